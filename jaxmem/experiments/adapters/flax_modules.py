"""Flax modules as jaxmem experiments: linen (`module_fn(shape) -> nn.Module`, initialised by
`Module.init` and run by `Module.apply`) and nnx (`module_fn(shape, rngs) -> nnx.Module`, its parameters
split off with `nnx.split` and merged back with `nnx.merge`)."""

from __future__ import annotations

import inspect
from typing import Any, Callable, Mapping

import jax
from flax import nnx

from jaxmem.experiments.adapters.build import call_on_x, module_experiment
from jaxmem.experiments.adapters.layout import named
from jaxmem.experiments.adapters.pipeline import Binding
from jaxmem.experiments.interface import Experiment, Field
from jaxmem.experiments.user_errors import ExperimentError


def from_flax(
    module_fn: Callable,
    sample: Callable,
    loss: Callable,
    metrics: Mapping[str, Callable] | None,
    fields: Mapping[str, Field],
    *,
    name: str,
    forward: Callable = call_on_x,
    **options: Any,
) -> Experiment:
    """A jaxmem Experiment from a flax module.

    module_fn(shape) -> linen Module, or module_fn(shape, rngs) -> nnx Module: the module at the bucket's
        `shape` (every size padded, every static value as it is): sizes and static values become its
        constructor's arguments.
    sample(key, shape, dyn) -> batch: the run's data (a dict of arrays) at the padded shape; `key` is
        shape-stable (any elementwise jax.random draw agrees on the true block at every padding); what is
        derived from draws must mask past the true sizes in `dyn` (jaxmem.experiments.draws.block_mask).
    loss(prediction, batch, dyn) -> per-example losses; the adapter averages them over the true examples.
    metrics: {name: fn(prediction, batch, dyn) -> per-example values}, averaged likewise ("loss" is added).
        Per-example values are a 1-D array along an example axis (one that leads an array of the batch or the
        prediction) or a scalar: a broadcast matrix or a fixed-length slice is refused as the module is built
        (jaxmem.experiments.adapters.value_shapes).
    fields: the Experiment's fields (size / static / traced / host).
    forward(model, batch, dyn) -> prediction: the model (the bound linen module, or the nnx module) on the
        batch; default `model(batch["x"])`. A prediction may be any pytree of arrays. `dyn` (the run's true
        sizes and traced values) reaches forward, loss and metrics as it reaches the sampler.
    logits=True: the prediction's last axis holds class logits (padded classes become -inf).
    probe: a small config (sizes default to 3) at which the adapter checks that padding changes nothing; a
        size that fails runs static, with an UnpaddableWarning.
    Other keywords (doc, optimizer, resolve, derived, check, costs, ...) are the Experiment's.
    """
    arity = len([p for p in inspect.signature(module_fn).parameters.values() if p.default is p.empty])
    if arity not in (1, 2):
        raise ExperimentError(
            f"experiment {name}: module_fn takes (shape) for a linen module or (shape, rngs) for an nnx module"
        )
    binding = linen_binding if arity == 1 else nnx_binding
    return module_experiment(binding(module_fn, forward), sample, loss, metrics, fields, name=name, **options)


def linen_binding(module_fn: Callable, forward: Callable) -> Binding:
    def method(module, batch, dyn):
        return forward(module, batch, dyn)

    def create(key, shape, batch, dyn):
        variables = module_fn(shape).init(key, batch, dyn, method=method)
        others = sorted(set(variables) - {"params"})
        if others:
            raise ExperimentError(
                f"the linen module has variables other than params ({', '.join(others)}); only params are supported"
            )
        return variables["params"]

    def apply(params, shape, batch, dyn):
        return module_fn(shape).apply({"params": params}, batch, dyn, method=method)

    return Binding("linen", create, apply)


def nnx_binding(module_fn: Callable, forward: Callable) -> Binding:
    def create(key, shape, batch, dyn):
        _, params, others = nnx.split(module_fn(shape, nnx.Rngs(key)), nnx.Param, ...)
        if jax.tree.leaves(others):
            held = ", ".join(named(nnx.to_pure_dict(others)))
            raise ExperimentError(
                f"the nnx module holds state other than nnx.Param ({held}); only parameters are supported"
            )
        return nnx.to_pure_dict(params)

    def apply(params, shape, batch, dyn):
        graphdef, state = nnx.split(nnx.eval_shape(lambda: module_fn(shape, nnx.Rngs(0))))
        nnx.replace_by_pure_dict(state, params)
        return forward(nnx.merge(graphdef, state), batch, dyn)

    return Binding("nnx", create, apply)
