"""Stage detection on trajectories: when a metric first crosses a level, and where it sits on a plateau.

Rules (also in jaxmem.spec.report_tables):

- first_crossing: the first evaluation at which the value is ≤ level (≥ for "above"); the crossing
  step is interpolated linearly between it and the evaluation before it, so it lies in (previous
  step, step]. Already past the level at the first evaluation: that step. Never: NaN. NaN values
  are skipped.
- plateau: the first and last evaluated step with |value − near| ≤ tol, the length last − first, the
  evaluations in the band and the evaluations from first to last (equal for a contiguous plateau).
- a judged crossing's verdict (`reached = true` or `after`), per panel and series: every run reaches it
  (after the crossing named by `after`, where given): FAIL when a finished run never does (or reaches it
  first), PASS when each of 3 or more runs does, INCONCLUSIVE with fewer runs or a run still running that
  has not.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from jaxmem.report.trajectory.data import Trajectories, names_of
from jaxmem.report.verdicts import MIN_X, Verdict, decided, inconclusive, too_few_x
from jaxmem.spec.expr import ExpressionError, evaluate, names_in
from jaxmem.spec.report_tables import TrajectorySpec


def _finite(steps, values) -> tuple[np.ndarray, np.ndarray]:
    steps, values = np.asarray(steps, dtype=float), np.asarray(values, dtype=float)
    keep = np.isfinite(values) & np.isfinite(steps)
    order = np.argsort(steps[keep], kind="stable")
    return steps[keep][order], values[keep][order]


def first_crossing(steps, values, level: float, direction: str = "below") -> float:
    """The interpolated step at which `values` first reach `level` from above ("below") or below
    ("above"); NaN when they never do."""
    steps, values = _finite(steps, values)
    hit = values <= level if direction == "below" else values >= level
    if not hit.any():
        return math.nan
    k = int(np.argmax(hit))
    if k == 0:
        return float(steps[0])
    s0, s1, v0, v1 = steps[k - 1], steps[k], values[k - 1], values[k]
    return float(s0 + (level - v0) * (s1 - s0) / (v1 - v0))


def plateau(steps, values, near: float, tol: float) -> dict:
    """first, last, length (steps), in_band and between (evaluation counts) of the band |v − near| ≤ tol."""
    steps, values = _finite(steps, values)
    inside = np.abs(values - near) <= tol
    if not inside.any():
        return {"first": math.nan, "last": math.nan, "length": math.nan, "in_band": 0, "between": 0}
    where = np.flatnonzero(inside)
    first, last = float(steps[where[0]]), float(steps[where[-1]])
    return {
        "first": first,
        "last": last,
        "length": last - first,
        "in_band": int(inside.sum()),
        "between": int(where[-1] - where[0] + 1),
    }


def run_value(expression: str | float, names: dict, run: dict, where: str) -> float:
    """An expression of one run's config; NaN when it cannot be evaluated there (log(0), or a run still
    in flight whose config is unknown). A name no run has is an error in the spec."""
    missing = names_in(expression) - set(names) if isinstance(expression, str) else set()
    if missing:
        if isinstance(run.get("point"), str):
            raise ValueError(f"{where} = {expression!r}: unknown names {sorted(missing)} (known: {sorted(names)})")
        return math.nan
    try:
        return float(evaluate(expression, names))
    except ExpressionError:
        return math.nan


def crossing_column(label: str, unit: str) -> str:
    return f"{label} [{unit}]"


def plateau_column(label: str, what: str, unit: str | None = None) -> str:
    return f"plateau {label}: {what}" + (f" [{unit}]" if unit else "")


def stage_table(traj: Trajectories, spec: TrajectorySpec) -> pd.DataFrame:
    """One row per run: its keys, config fields, then per crossing `<label> [step]` and `<label> [time]`
    (time = step · lr), per plateau first/last/length in step and time units, in_band and between, and
    with an escape law `escape x` (the escape.x expression of the run's config)."""
    rows = []
    by_run = {run: group for run, group in traj.frame.groupby("run_id", sort=False)}
    for run in traj.runs.to_dict("records"):
        row = dict(run)
        names = names_of(run, traj.fields)
        lr = run["lr"]
        curve = by_run.get(run["run_id"])
        for c in spec.crossings:
            level = run_value(c.level, names, run, f"crossing {c.label!r}")
            ok = curve is not None and math.isfinite(level)
            step = first_crossing(curve["step"], curve[c.metric], level, c.direction) if ok else math.nan
            row[crossing_column(c.label, "level")] = level
            row[crossing_column(c.label, "step")] = step
            row[crossing_column(c.label, "time")] = step * lr
        for p in spec.plateaus:
            near = run_value(p.near, names, run, f"plateau {p.label!r}")
            ok = curve is not None and math.isfinite(near)
            found = plateau(curve["step"], curve[p.metric], near, p.tol) if ok else plateau([], [], 0, 0)
            for what in ("first", "last", "length"):
                row[plateau_column(p.label, what, "step")] = found[what]
                row[plateau_column(p.label, what, "time")] = found[what] * lr
            row[plateau_column(p.label, "in_band")] = found["in_band"]
            row[plateau_column(p.label, "between")] = found["between"]
        if spec.escape is not None:
            row["escape x"] = run_value(spec.escape.x, names, run, "escape.x")
        rows.append(row)
    return pd.DataFrame(rows)


def crossing_verdict(times: np.ndarray, finished: np.ndarray, earlier: np.ndarray | None = None) -> Verdict:
    """Whether every run reaches a crossing (see the module's docstring): `times` per run (NaN: never),
    `finished` whether each run ended, `earlier` the times of the crossing that must come first (None: none)."""
    never = ~np.isfinite(times)
    out_of_order = np.zeros(times.shape, bool) if earlier is None else ~never & ~(earlier <= times)
    failed = int(((never & finished) | out_of_order).sum())
    if failed:
        first = "" if earlier is None else " or reach it first"
        return decided(False, f"{failed} of {times.size} runs never reach it{first}")
    if never.any():
        return inconclusive(f"{int(never.sum())} of {times.size} runs still running before it")
    return too_few_x(times.size, MIN_X, "run") or decided(True)
