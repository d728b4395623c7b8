"""Bring your own model: flax (linen, nnx) and equinox modules as jaxmem experiments.

`jaxmem.experiments.from_flax` and `jaxmem.experiments.from_equinox` (imported on first use, so that jaxmem
needs neither framework until one is used) turn a module, a data sampler, a per-example loss and metrics into
an Experiment whose sizes are padded exactly: `build` (the check that decides which sizes pad), `pipeline`
(what is masked), `layout` (how the arrays follow the sizes), `value_shapes` (what the loss and metrics must
return, checked before anything compiles), `stable_keys` (shape-stable draws).
"""
