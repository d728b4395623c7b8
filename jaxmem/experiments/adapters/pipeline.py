"""One run of a module-built experiment: data from the user's sampler, the module's parameters, its
prediction, per-example losses and metrics, each masked past the run's true sizes.

What is masked, and how (the arrays' axes come from `layout`):
- the sampled data: zero past the true sizes;
- the parameters: the module's own initial values, drawn with a shape-stable key, rescaled from the padded
  to the true sizes and zero past them; the loss reads them through the same mask, so the gradient past
  the true sizes is exactly zero and no optimizer moves them;
- the prediction: zero past the true sizes, or -inf past the true classes where `logits` is set (its last
  axis holds class logits), so a padded row is harmless and a padded class never wins or takes mass;
- the per-example losses and metrics: averaged over the true examples only.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
from typing import Any, Callable, Mapping

import jax
import jax.numpy as jnp
import numpy as np

from jaxmem.experiments.adapters import layout as lay
from jaxmem.experiments.adapters import value_shapes as shapes
from jaxmem.experiments.adapters.stable_keys import HASHED, stable_key
from jaxmem.experiments.user_errors import ExperimentError, UserCode

PROBE_KEY = np.zeros(2, np.uint32)  # the key data the layout is learnt with (its ratios do not depend on it)
MODEL_STREAM = 0x30DE1  # the module's key is the run's key folded with this
USER_CODE = UserCode("module-built experiment")  # tells what the user's functions raised from jaxmem's bugs


def keys(key: jax.Array) -> tuple[jax.Array, jax.Array]:
    """The sampler's key (the run's own, made shape-stable: jaxmem.experiments.draws gives the numbers a
    shipped family draws from it) and the module's (hashed bits: see stable_keys)."""
    data_key = stable_key(key)
    return data_key, stable_key(jax.random.fold_in(data_key, MODEL_STREAM), HASHED)


@dataclasses.dataclass(frozen=True)
class Binding:
    """How the adapter reaches one framework's modules: `create(key, shape, batch, dyn)` builds the module at
    `shape` and returns its parameters, a pytree of float arrays; `apply(parameters, shape, batch, dyn)`
    returns the user's `forward(model, batch, dyn)` of the module with those parameters."""

    framework: str
    create: Callable[[jax.Array, Mapping, Any], Any]
    apply: Callable[[Any, Mapping, Any], Any]


@dataclasses.dataclass(frozen=True)
class Layout:
    """A static configuration's layout: every pipeline array's axes by name ("batch.x", "params.layer1.kernel",
    "prediction", "loss", "metrics.accuracy") and the initial parameters' exponents."""

    axes: dict[str, lay.Axes]
    exponents: dict[str, dict[str, float]]


class Unpaddable(Exception):
    """Sizes a module cannot be padded in, each with its reason."""

    def __init__(self, reasons: dict[str, str]):
        super().__init__(reasons)
        self.reasons = reasons


@dataclasses.dataclass
class Pipeline:
    """A module-built experiment's functions on one run (see the module doc). `name`: the experiment's, in
    messages; `sizes`: the size fields run padded; `static_sizes`: those run static; `probe`: the probe
    config's sizes and traced values, at which each static configuration's layout is learnt; `probe_given`:
    those the user's `probe` gave."""

    name: str
    binding: Binding
    sample: Callable
    loss_fn: Callable
    metric_fns: Mapping[str, Callable]
    logits: bool
    sizes: tuple[str, ...]
    static_sizes: tuple[str, ...]
    probe: dict
    probe_given: tuple[str, ...]
    layouts: dict = dataclasses.field(default_factory=dict)  # by static configuration
    structures: dict = dataclasses.field(default_factory=dict)  # by shape

    # -- the Experiment's functions ----------------------------------------------------------------------
    def init(self, key, shape, dyn):
        layout = self.layout(shape)
        sizes, dyn = self.true_sizes(shape, dyn), self.user_dyn(shape, dyn)
        data_key, model_key = keys(key)
        batch = self.masked(layout, "batch", self.sample(data_key, shape, dyn), sizes)
        created = lay.named(self.binding.create(model_key, shape, batch, dyn))
        params = {}
        for name, value in created.items():
            axes = layout.axes[f"params.{name}"]
            self._check_lengths(f"params.{name}", axes, value.shape, shape)
            factor = lay.scale(layout.exponents[name], shape, sizes)
            params[name] = jnp.where(lay.inside(axes, value.shape, sizes), value * factor, 0.0).astype(value.dtype)
        return params, batch

    def loss(self, params, problem, shape, dyn, key=None):
        layout, sizes, dyn = self.layout(shape), self.true_sizes(shape, dyn), self.user_dyn(shape, dyn)
        prediction = self.prediction(layout, params, problem, shape, sizes, dyn)
        return self.mean(layout, "loss", self.loss_fn(prediction, problem, dyn), sizes)

    def evaluate(self, params, problem, shape, dyn):
        layout, sizes, dyn = self.layout(shape), self.true_sizes(shape, dyn), self.user_dyn(shape, dyn)
        prediction = self.prediction(layout, params, problem, shape, sizes, dyn)
        metrics = {"loss": self.mean(layout, "loss", self.loss_fn(prediction, problem, dyn), sizes)}
        for name, fn in self.metric_fns.items():
            metrics[name] = self.mean(layout, f"metrics.{name}", fn(prediction, problem, dyn), sizes)
        return metrics

    # -- masking ----------------------------------------------------------------------------------------
    def true_sizes(self, shape, dyn) -> dict:
        return {**{f: dyn[f] for f in self.sizes}, **{f: shape[f] for f in self.static_sizes}}

    def user_dyn(self, shape, dyn) -> dict:
        """What the user's functions get as `dyn`: the traced values, and the sizes run static too."""
        return {**dyn, **{f: shape[f] for f in self.static_sizes}}

    def masked(self, layout: Layout, prefix: str, tree, sizes):
        def zeroed(name, x):
            return jnp.where(lay.inside(layout.axes[name], x.shape, sizes), x, jnp.zeros((), x.dtype))

        return lay.map_named(zeroed, tree, prefix)

    def prediction(self, layout: Layout, params, batch, shape, sizes, dyn):
        """The prediction of the module with `params` (read through their masks) on `batch`, masked."""
        params = {
            n: jnp.where(lay.inside(layout.axes[f"params.{n}"], p.shape, sizes), p, 0.0) for n, p in params.items()
        }
        structure, names = self.structure(shape)
        tree = jax.tree.unflatten(structure, [params[n] for n in names])
        return lay.map_named(
            lambda n, x: self._filled(layout.axes[n], x, sizes),
            self.binding.apply(tree, shape, batch, dyn),
            "prediction",
        )

    def _filled(self, axes: lay.Axes, x, sizes):
        keep = lay.inside(axes, x.shape, sizes)
        if not (self.logits and axes and axes[-1] is not None):
            return jnp.where(keep, x, jnp.zeros((), x.dtype))
        true_class = lay.inside((None,) * (len(axes) - 1) + (axes[-1],), x.shape, sizes)
        return jnp.where(keep, x, jnp.where(true_class, 0.0, -jnp.inf))

    def mean(self, layout: Layout, name: str, values, sizes):
        """The mean of per-example `values` over the true examples (a scalar: itself)."""
        values = jnp.asarray(values)
        axes = layout.axes[name]
        total = jnp.sum(jnp.where(lay.inside(axes, values.shape, sizes), values, 0))
        return total / lay.true_count(axes, values.shape, sizes)

    # -- the layout ---------------------------------------------------------------------------------------
    def layout(self, shape) -> Layout:
        """The layout of `shape`'s static configuration, learnt once (see jaxmem.experiments.adapters.layout)."""
        statics = {k: v for k, v in shape.items() if k not in self.sizes}
        try:
            return self.learned(statics)
        except Unpaddable as err:
            detail = "; ".join(f"{f}: {why}" for f, why in err.reasons.items())
            raise ExperimentError(
                f"at {statics}, the {self.binding.framework} module cannot be padded exactly ({detail}); "
                "declare those sizes static"
            ) from None

    def learned(self, statics: dict) -> Layout:
        """The layout of a static configuration, learnt at the probe's sizes on first use; raises
        Unpaddable for sizes the module cannot be padded in, and an ExperimentError for what the user's
        functions raise or misshape."""
        key = repr(sorted(statics.items()))
        if key not in self.layouts:
            sizes = {f: self.probe[f] for f in self.sizes}
            at = shapes.probe_text(statics, sizes, self.probe_given)
            try:
                self.layouts[key] = self._learn(statics, sizes, at)
            except Exception as err:
                if not USER_CODE.raised(err):
                    raise
                raise USER_CODE.failure(f"experiment {self.name}: its pipeline at {at}", err) from err
        return self.layouts[key]

    def _learn(self, statics: dict, sizes: dict, at: str) -> Layout:
        """The layout at the probe's `sizes` (`at`: they and `statics` in words); the user's per-example values
        are checked (jaxmem.experiments.adapters.value_shapes) before anything compiles."""
        probed = self._dims(statics, sizes)
        axes, problems = lay.infer_axes(lambda s: probed if s == sizes else self._dims(statics, s), sizes)
        shapes.refuse_misshapen(self.name, self._per_example(), axes, probed, at)
        exponents, scale_problems = lay.exponents(*self._initial_values(statics, sizes))
        problems = {**scale_problems, **problems}
        if problems:
            raise Unpaddable(problems)
        return Layout(axes, exponents)

    def _per_example(self) -> dict[str, tuple[str, Callable]]:
        """The user's functions of per-example values by the layout's name of their values, each with what it
        is in a message."""
        metrics = {f"metrics.{n}": (f"metric {n!r}", fn) for n, fn in self.metric_fns.items()}
        return {"loss": ("the loss", self.loss_fn), **metrics}

    def structure(self, shape) -> tuple[Any, tuple[str, ...]]:
        """The pytree structure of the module's parameters at `shape` (a framework may keep sizes in it, as
        equinox does) and their names in its order."""
        key = repr(sorted(shape.items()))
        if key not in self.structures:
            statics = {k: v for k, v in shape.items() if k not in self.sizes}
            sizes = {k: v for k, v in shape.items() if k in self.sizes}
            created = jax.eval_shape(lambda key_data: self._created(statics, sizes, key_data), PROBE_KEY)
            self.structures[key] = jax.tree.structure(created), tuple(lay.named(created))
        return self.structures[key]

    def _run_at(self, statics: dict, sizes: dict):
        shape = {**statics, **sizes}
        return shape, self.user_dyn(shape, {**self.probe, **sizes})

    def _raw(self, statics: dict, sizes: dict, key_data) -> dict:
        """The unmasked pipeline's arrays at `sizes` (for the layout)."""
        shape, dyn = self._run_at(statics, sizes)
        data_key, model_key = keys(key_data)
        batch = self.sample(data_key, shape, dyn)
        created = self.binding.create(model_key, shape, batch, dyn)
        prediction = self.binding.apply(created, shape, batch, dyn)
        metrics = {name: fn(prediction, batch, dyn) for name, fn in self.metric_fns.items()}
        return {
            "batch": batch,
            "params": lay.named(created),
            "prediction": prediction,
            "loss": self.loss_fn(prediction, batch, dyn),
            "metrics": metrics,
        }

    def _dims(self, statics: dict, sizes: dict) -> dict[str, tuple]:
        arrays = jax.eval_shape(lambda key_data: self._raw(statics, sizes, key_data), PROBE_KEY)
        return {name: tuple(x.shape) for name, x in lay.named(arrays).items()}

    def _created(self, statics: dict, sizes: dict, key_data):
        """The module's parameters as created at `sizes` (shape-stable key), unmasked."""
        shape, dyn = self._run_at(statics, sizes)
        data_key, model_key = keys(key_data)
        return self.binding.create(model_key, shape, self.sample(data_key, shape, dyn), dyn)

    def _initial_values(self, statics: dict, sizes: dict):
        """The module's initial parameters by name at `sizes`, and {size: them with that size doubled}."""
        builds = {"": sizes, **{f: {**sizes, f: lay.DOUBLED * n} for f, n in sizes.items()}}
        values = run_once(
            lambda key: {b: lay.named(self._created(statics, s, key)) for b, s in builds.items()}, PROBE_KEY
        )
        return values.pop(""), values

    def _check_lengths(self, name: str, axes: lay.Axes, dims: tuple, shape) -> None:
        for i, axis in enumerate(axes):
            if axis is not None and dims[i] != axis.length(shape[axis.field]):
                raise ExperimentError(
                    f"axis {i} of {name} has length {dims[i]} at {axis.field} = {shape[axis.field]}, not the "
                    f"{axis.slope}·{axis.field} + {axis.offset} learnt at the probe's sizes"
                )


def run_once(fn: Callable, *args):
    """fn(*args) as one program, compiled at XLA's lowest optimisation level (it runs once: on a CPU that
    halves its compile) and run at once, in a worker thread, where no program is being traced: called
    while a bucket's program traces, a jitted function would be inlined into it instead."""

    def compiled_and_run():
        program = jax.jit(fn).lower(*args).compile(compiler_options={"xla_backend_optimization_level": 0})
        return jax.device_get(program(*args))

    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="jaxmem-layout") as worker:
        return worker.submit(compiled_and_run).result()
