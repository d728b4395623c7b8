"""How a module's arrays follow the experiment's sizes, learnt by building it at several sizes.

The adapter never asks which axis of which parameter is the hidden width: it evaluates the whole pipeline
(sampled data, the module's parameters, its prediction, the per-example losses and metrics) at the probe's
sizes and again with each size doubled and tripled, and reads off every axis's length as `slope·size +
offset` of one size field (`Axis`), or as fixed. An axis that grows with two sizes (a flattened heads × head
width), or not affinely, makes its sizes unpaddable. The same builds, with a shape-stable key, show how the
module's initial values scale with each size: a variance-scaling initialiser (lecun, he, equinox's
defaults) draws the same numbers at any size times a power of the sizes (`exponents`, read off one doubling
of each size; the padded = unpadded check confirms them), which the adapter corrects from the padded to the
true sizes. An initialiser whose values change otherwise (glorot's fan_avg, orthogonal) makes the size
unpaddable.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable, Mapping

import jax
import jax.numpy as jnp
import numpy as np

GROWTHS = (2, 3)  # each size's arrays are also shaped at these multiples of its probe value
DOUBLED = 2  # each size's initial values are also drawn at this multiple
SCALE_TOLERANCE = 1e-4  # relative spread of the ratios of two builds' initial values that still is one scale
EXPONENT_STEP = 1 / 16  # exponents are multiples of this (1/2 for lecun); farther than 1e-3 off: no power law


@dataclasses.dataclass(frozen=True)
class Axis:
    """An axis whose length is `slope`·size + `offset` for the size field `field`."""

    field: str
    slope: int
    offset: int

    def length(self, size):
        return self.slope * size + self.offset


Axes = tuple  # one entry per dimension: an Axis, or None for a length no size changes


def named(tree, prefix: str = "") -> dict[str, Any]:
    """The leaves of `tree` by their paths, joined with "." ("a.b.0"), under `prefix`."""
    leaves = jax.tree_util.tree_flatten_with_path(tree)[0]
    return {".".join(filter(None, [prefix, *map(_key_name, path)])): leaf for path, leaf in leaves}


def _key_name(entry) -> str:
    for attribute in ("key", "name", "idx"):
        if hasattr(entry, attribute):
            return str(getattr(entry, attribute))
    return str(entry)


def map_named(fn: Callable[[str, Any], Any], tree, prefix: str = ""):
    """`tree` with each leaf replaced by fn(its name as `named` gives it, the leaf)."""

    def one(path, leaf):
        return fn(".".join(filter(None, [prefix, *map(_key_name, path)])), leaf)

    return jax.tree_util.tree_map_with_path(one, tree)


def infer_axes(dims_at: Callable[[dict], Mapping[str, tuple]], sizes: dict) -> tuple[dict[str, Axes], dict[str, str]]:
    """Every array's axes (see the module doc) from `dims_at(sizes) -> {name: shape}`, and the sizes that
    cannot be padded, each with its reason."""
    base = dims_at(sizes)
    grown = {f: [dims_at({**sizes, f: k * sizes[f]}) for k in GROWTHS] for f in sizes}
    problems: dict[str, str] = {}
    for f, builds in grown.items():
        for build in builds:
            changed = sorted(set(build) ^ set(base)) or [n for n in base if len(build[n]) != len(base[n])]
            if changed:
                problems.setdefault(f, f"{changed[0]} appears, disappears or changes rank as {f} changes")
    axes = {}
    for name, dims in base.items():
        axes[name] = tuple(_axis(name, i, dims[i], sizes, grown, problems) for i in range(len(dims)))
    return axes, problems


def _axis(name: str, i: int, length: int, sizes: dict, grown: dict, problems: dict) -> Axis | None:
    moving = [f for f in sizes if f not in problems and any(b[name][i] != length for b in grown[f])]
    if len(moving) > 1:
        for f in moving:
            problems[f] = f"axis {i} of {name} grows with {' and '.join(moving)} at once"
        return None
    if not moving:
        return None
    f = moving[0]
    lengths = [length] + [b[name][i] for b in grown[f]]
    slope, rest = divmod(lengths[1] - length, sizes[f])
    if rest or slope <= 0 or lengths[2] - lengths[1] != lengths[1] - length:
        problems[f] = f"axis {i} of {name} is not {f} times a whole number plus a constant (lengths {lengths})"
        return None
    return Axis(f, slope, length - slope * sizes[f])


def exponents(base: Mapping[str, Any], doubled: Mapping[str, Mapping[str, Any]]) -> tuple[dict, dict[str, str]]:
    """{name: {size: exponent}}: how each initial array scales with each size (see the module doc), from the
    arrays drawn with a shape-stable key at the probe's sizes (`base`) and with each size doubled
    (`doubled[size]`); and the sizes that cannot be padded, with reasons."""
    found: dict[str, dict[str, float]] = {name: {} for name in base}
    problems: dict[str, str] = {}
    for f, values in doubled.items():
        for name, value in base.items():
            value = np.asarray(value, np.float64)
            block = tuple(slice(0, n) for n in value.shape)
            exponent = _power(_common_ratio(value, np.asarray(values[name], np.float64)[block]))
            if exponent is None:
                problems.setdefault(f, f"the initial values of {name} change with {f} beyond a power of {f}")
            elif exponent:
                found[name][f] = exponent
    return found, problems


def _common_ratio(small: np.ndarray, big: np.ndarray) -> float | None:
    """The one positive factor taking `small` to `big` (1.0 for all zeros), or None if there is none."""
    nonzero = small != 0
    if np.any(big[~nonzero] != 0):
        return None
    if not nonzero.any():
        return 1.0
    ratios = big[nonzero] / small[nonzero]
    ratio = float(np.median(ratios))
    if ratio <= 0 or np.max(np.abs(ratios - ratio)) > SCALE_TOLERANCE * ratio:
        return None
    return ratio


def _power(ratio: float | None) -> float | None:
    """The exponent e with ratio = DOUBLED^e, a multiple of EXPONENT_STEP; None if there is none."""
    if ratio is None:
        return None
    measured = math.log(ratio) / math.log(DOUBLED)
    exponent = round(measured / EXPONENT_STEP) * EXPONENT_STEP
    return exponent if abs(measured - exponent) < 1e-3 else None


def inside(axes: Axes, shape: tuple, sizes: Mapping[str, jax.Array]) -> jax.Array:
    """Boolean mask (broadcastable to `shape`) of the entries within the true sizes."""
    mask = jnp.ones((), bool)
    for i, axis in enumerate(axes):
        if axis is not None:
            index = jnp.arange(shape[i]).reshape((-1,) + (1,) * (len(shape) - i - 1))
            mask = mask & (index < axis.length(sizes[axis.field]))
    return mask


def true_count(axes: Axes, shape: tuple, sizes: Mapping[str, jax.Array]) -> jax.Array:
    """How many entries of an array of `shape` lie within the true sizes."""
    lengths = [shape[i] if axis is None else axis.length(sizes[axis.field]) for i, axis in enumerate(axes)]
    return math.prod(lengths) if lengths else 1


def scale(exponent_of: Mapping[str, float], padded: Mapping[str, int], sizes: Mapping[str, jax.Array]):
    """The factor taking an initial value drawn at the `padded` sizes to its value at the true `sizes`."""
    factor = 1.0
    for f, exponent in exponent_of.items():
        factor = factor * (jnp.asarray(sizes[f]) / padded[f]) ** exponent
    return factor
