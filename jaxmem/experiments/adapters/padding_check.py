"""The padded = unpadded check a module-built experiment passes before its sizes are padded.

At the probe config, one run at its true sizes and one with some sizes padded (each to 2n + 1, an awkward
amount) are set side by side: initial parameters, the loss, its gradient and every metric must agree on the
true block to float32 rounding, and the padded run's parameters must be zero past it. What differs names
the array, so a module that pads wrongly (a LayerNorm or a softmax over a padded axis, a loss that is not
per example, class logits without `logits=True`, a sampler that is not shape-stable) is caught here
instead of skewing results.
"""

from __future__ import annotations

from typing import Mapping

import jax
import numpy as np

from jaxmem.experiments.adapters.layout import named
from jaxmem.experiments.adapters.pipeline import run_once
from jaxmem.experiments.interface import Experiment

RTOL = 1e-4
ATOL = 1e-5  # relative to the array's largest entry
ORDER = ("loss", "metric", "initial", "gradient")  # what a difference names first: what a user sees first


def padded_size(n: int) -> int:
    return 2 * n + 1


def outcomes(exp: Experiment, shapes: Mapping[str, Mapping], dyn: Mapping) -> dict[str, dict[str, np.ndarray]]:
    """Initial parameters, the loss, its gradient and the metrics of one run at each of `shapes`, by name;
    one compiled program for them all."""

    def one(key, shape):
        params, problem = exp.init(key, shape, dyn)
        loss, grads = jax.value_and_grad(exp.loss)(params, problem, shape, dyn, key)
        return {
            **{f"initial {name}": x for name, x in named(params).items()},
            "loss": loss,
            **{f"gradient of {name}": x for name, x in named(grads).items()},
            **{f"metric {name}": x for name, x in exp.evaluate(params, problem, shape, dyn).items()},
        }

    return run_once(lambda key: {label: one(key, shape) for label, shape in shapes.items()}, jax.random.PRNGKey(0))


def difference(small: Mapping[str, np.ndarray], big: Mapping[str, np.ndarray]) -> str | None:
    """What differs between the unpadded run `small` and the padded run `big` on the true block (and past
    it, for the parameters and their gradients: zero), or None."""
    for name in sorted(small, key=lambda name: ORDER.index(name.split(" ")[0])):
        want, got = small[name], big[name]
        block = tuple(slice(0, n) for n in want.shape)
        tolerance = ATOL * max(float(np.max(np.abs(want), initial=0.0)), 1e-30)
        if not np.allclose(got[block], want, rtol=RTOL, atol=tolerance, equal_nan=True):
            gap = float(np.nanmax(np.abs(got[block].astype(float) - want.astype(float))))
            return f"{name} differs from the unpadded run's (by up to {gap:.3g})"
        outside = np.ones(got.shape, bool)
        outside[block] = False
        if np.any(got[outside] != 0):
            return f"{name} is not zero past the true sizes"
    return None


def mismatches(exp: Experiment, statics: Mapping, sizes: Mapping[str, int], traced: Mapping) -> dict[str, str]:
    """The sizes of `sizes` that padding changes a run in, each with what differs: all padded together,
    and if that differs, each alone (a difference only together blames them all)."""
    dyn = {**traced, **sizes}

    def padded(fields) -> dict:
        return {**statics, **{f: padded_size(n) if f in fields else n for f, n in sizes.items()}}

    runs = outcomes(exp, {"unpadded": {**statics, **sizes}, "padded": padded(sizes)}, dyn)
    together = difference(runs["unpadded"], runs["padded"])
    if together is None:
        return {}
    alone = outcomes(exp, {f: padded([f]) for f in sizes}, dyn)
    blamed = {f: why for f in sizes if (why := difference(runs["unpadded"], alone[f])) is not None}
    return blamed or {f: f"padded together with {', '.join(sorted(set(sizes) - {f}))}: {together}" for f in sizes}
