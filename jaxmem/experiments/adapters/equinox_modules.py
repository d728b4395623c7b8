"""Equinox modules as jaxmem experiments: `module_fn(shape, key) -> eqx.Module`, its float arrays split off
as the parameters with `eqx.partition` and put back with `eqx.combine`."""

from __future__ import annotations

from typing import Any, Callable, Mapping

import equinox as eqx
import jax
import jax.numpy as jnp

from jaxmem.experiments.adapters.build import call_on_x, module_experiment
from jaxmem.experiments.adapters.pipeline import Binding
from jaxmem.experiments.adapters.stable_keys import HASHED, stable_key
from jaxmem.experiments.interface import Experiment, Field
from jaxmem.experiments.user_errors import ExperimentError


def from_equinox(
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
    """A jaxmem Experiment from an equinox module: `module_fn(shape, key) -> eqx.Module`; the rest as
    `jaxmem.experiments.from_flax`. The module's float arrays are its parameters; it may hold no other
    arrays. `forward(model, batch, dyn)` sees the module itself (vmap it over examples as equinox does)."""
    return module_experiment(equinox_binding(module_fn, forward), sample, loss, metrics, fields, name=name, **options)


def equinox_binding(module_fn: Callable, forward: Callable) -> Binding:
    def create(key, shape, batch, dyn):
        params, rest = eqx.partition(module_fn(shape, key), eqx.is_inexact_array)
        if any(eqx.is_array(leaf) for leaf in jax.tree.leaves(rest)):
            raise ExperimentError(
                "the equinox module holds arrays that are not floats; only float parameters are supported"
            )
        return params

    def apply(params, shape, batch, dyn):
        abstract = eqx.filter_eval_shape(module_fn, shape, stable_key(jnp.zeros(2, jnp.uint32), HASHED))
        rest = eqx.filter(abstract, lambda leaf: not isinstance(leaf, jax.ShapeDtypeStruct))
        return forward(eqx.combine(params, rest), batch, dyn)

    return Binding("equinox", create, apply)
