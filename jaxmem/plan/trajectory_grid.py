"""Which evaluations of a run a trajectory keeps: all of them, or a log-spaced subset.

Runs evaluate every `eval_every` steps; with `per_decade = k > 0` a trajectory keeps step 0 and the
first evaluation in each bin ⌊k·log10(step)⌋, i.e. about k points per decade of steps, which is what
plateaus and escape times (Nichani et al. §5) need over runs of 10^4+ steps.
"""

from __future__ import annotations

import math


def log_bin(step: int, per_decade: int) -> int:
    """The log-spaced bin of a positive step; step 0 is bin −1."""
    return math.floor(per_decade * math.log10(step) + 1e-9) if step > 0 else -1


def kept(step: int, eval_every: int, per_decade: int) -> bool:
    """Whether the evaluation at `step` is on the trajectory grid."""
    if per_decade <= 0 or step == 0:
        return True
    return log_bin(step, per_decade) != log_bin(step - eval_every, per_decade)


def on_grid(points, eval_every: int, per_decade: int) -> list:
    """The (run_id, step, metrics) points whose step is on the grid."""
    return [p for p in points if kept(p[1], eval_every, per_decade)]
