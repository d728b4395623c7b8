"""The shapes a module-built experiment's loss and metrics must return, checked on the layout's shapes (learnt
with jax.eval_shape: nothing has compiled yet).

The adapter averages the per-example values over the true examples, and an average takes any shape: a
prediction of shape (N, 1) against labels of shape (N,) broadcasts the loss to an (N, N) matrix, a metric
sliced to a fixed length ([:2]) averages two examples, and either would skew every result silently. The
rule: the loss and each metric return one array, a scalar or one value per example, a 1-D array whose axis
is an example axis: one that leads an array of the batch or of the prediction, following the same size the
same way (the layout's `Axis`) or, where no size moves either, of the same length. A broadcast matrix has two
axes; a fixed-length slice follows no size that the examples follow.
"""

from __future__ import annotations

import inspect
from typing import Callable, Mapping

import numpy as np

from jaxmem.experiments.adapters.layout import Axes, Axis
from jaxmem.experiments.user_errors import ExperimentError, defined_at

EXAMPLE_HOLDERS = ("batch", "prediction")  # the arrays whose leading axes are example axes


def axis_key(axis: Axis | None, length: int) -> Axis | int:
    """What an axis follows: its size (an Axis), or its fixed length."""
    return length if axis is None else axis


def axis_keys(axes: Axes, shape: tuple) -> tuple:
    """Each axis's `axis_key`."""
    return tuple(map(axis_key, axes, shape))


def example_axes(axes: Mapping[str, Axes], dims: Mapping[str, tuple]) -> dict:
    """{example axis (its `axis_key`): (its length, the arrays it leads)} at the shapes `dims`."""
    found: dict = {}
    for name, shape in dims.items():
        if shape and name.split(".")[0] in EXAMPLE_HOLDERS:
            found.setdefault(axis_key(axes[name][0], shape[0]), (shape[0], []))[1].append(name)
    return found


def misshapen(name: str, axes: Mapping[str, Axes], dims: Mapping[str, tuple]) -> str | None:
    """What is wrong with the shape of the values named `name` ("loss", "metrics.accuracy") in the layout
    (`axes`, and `dims`: the shapes at the probe's sizes), or None."""
    leaves = [n for n in dims if n == name or n.startswith(f"{name}.")]
    if leaves != [name]:
        found = ", ".join(leaves) or "none"
        return f"returned {len(leaves)} arrays ({found}); it must return one array of per-example values"
    shape, examples = dims[name], example_axes(axes, dims)
    if not shape or (len(shape) == 1 and axis_key(axes[name][0], shape[0]) in examples):
        return None
    expected = f"it must return a scalar or one value per example, {expected_shapes(examples)}"
    if len(shape) > 1:
        return "; ".join([f"returned an array of shape {shape}", expected, *broadcasts(shape, axes, dims)])
    return f"returned an array of shape {shape}, whose axis {followed(axes[name][0], shape[0])}; {expected}"


def expected_shapes(examples: Mapping) -> str:
    """The shapes one value per example may have, in words, from `example_axes`."""
    if not examples:
        return "and no array of the batch or the prediction has an example axis"
    shapes = [
        f"({n},) ({follows(key)}, the leading axis of {', '.join(names)})" for key, (n, names) in examples.items()
    ]
    return "shape " + " or ".join(shapes)


def follows(key: Axis | int) -> str:
    """An example axis in words: "N", "2·N + 1", or "a fixed length"."""
    if not isinstance(key, Axis):
        return "a fixed length"
    slope = "" if key.slope == 1 else f"{key.slope}·"
    offset = f" + {key.offset}" if key.offset > 0 else f" - {-key.offset}" if key.offset < 0 else ""
    return f"{slope}{key.field}{offset}"


def followed(axis: Axis | None, length: int) -> str:
    """What a 1-D value's axis that is no example axis follows, in words."""
    if axis is None:
        return f"stays {length} long whatever the sizes (a fixed-length slice?)"
    return f"follows {follows(axis)}, as no example axis does"


def broadcasts(shape: tuple, axes: Mapping[str, Axes], dims: Mapping[str, tuple]) -> list[str]:
    """The prediction and batch arrays that differ by a trailing axis of 1 and broadcast to `shape`, in words."""
    found = []
    for mine in (n for n in dims if n.split(".")[0] == "prediction"):
        for theirs in (n for n in dims if n.split(".")[0] == "batch"):
            apart = trailing_one_apart(axis_keys(axes[mine], dims[mine]), axis_keys(axes[theirs], dims[theirs]))
            if apart and broadcast(dims[mine], dims[theirs]) == shape:
                found.append(
                    f"perhaps {mine} of shape {dims[mine]} met {theirs} of {dims[theirs]}: they broadcast to {shape}"
                )
    return found


def trailing_one_apart(first: tuple, second: tuple) -> bool:
    """Whether one array's axes are the other's and a trailing axis of length 1 (by their `keys`)."""
    return first == second + (1,) or second == first + (1,)


def broadcast(*shapes: tuple) -> tuple | None:
    try:
        return np.broadcast_shapes(*shapes)
    except ValueError:
        return None


def function_label(function: Callable) -> str:
    """A user's function as "module:qualified name" (its repr when it has none)."""
    function = inspect.unwrap(function)
    module, name = getattr(function, "__module__", None), getattr(function, "__qualname__", None)
    return f"{module}:{name}" if module and name else repr(function)


def probe_text(statics: Mapping, sizes: Mapping[str, int], given: tuple[str, ...]) -> str:
    """The configuration a layout is learnt at, in words, telling the adapter's own probe sizes apart."""
    own = [f"{f} = {n}" for f, n in sizes.items() if f not in given]
    parts = [f"{', '.join(own)} (the adapter's own small probe sizes, `probe` sets others)"] if own else []
    parts += [f"{f} = {n} (from `probe`)" for f, n in sizes.items() if f in given]
    return ", ".join(parts + [f"{f} = {v}" for f, v in statics.items()])


def refuse_misshapen(experiment: str, functions: Mapping[str, tuple[str, Callable]], axes, dims, at: str) -> None:
    """Raise the ExperimentError naming each of `functions` ({array name: (what it is, the user's function)})
    whose values are misshapen, with the shapes found and expected, at `at` (see `probe_text`)."""
    lines = []
    for name, (what, function) in functions.items():
        wrong = misshapen(name, axes, dims)
        if wrong:
            lines += [f"experiment {experiment} ({function_label(function)}): {what} {wrong}", *defined_at(function)]
    if lines:
        lines.append(f"The shapes are at {at}, and each size was also doubled and tripled to see what follows it.")
        raise ExperimentError("\n".join(lines))
