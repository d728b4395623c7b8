"""The escape-time law: crossing times against an expression of the config (e.g. ln(1/α)), fitted by
least squares per crossing and group, next to a predicted slope (e.g. 1/(lr·λ_r), Nichani et al. §6.3).

Per (crossing, group) the points are the runs that crossed: x = the `escape.x` expression of the run's
config, y = the crossing in `escape.y` units (step or time = step · lr). The slope's standard error is
sqrt(Σ residual² / (n − 2) / Σ (x − x̄)²) (n ≥ 3); the predicted slope is an expression over the config
fields constant within the group; ratio = fitted / predicted, within tolerance when |ratio − 1| ≤ tol.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from jaxmem.report.text import group_labels
from jaxmem.report.trajectory.data import common_names
from jaxmem.report.trajectory.stages import crossing_column
from jaxmem.spec.expr import ExpressionError, evaluate
from jaxmem.spec.report_tables import TrajectorySpec


def fit_line(x, y) -> dict:
    """Least squares y ≈ intercept + slope · x: n, slope, intercept, slope_se, r2 (NaN where undefined:
    fewer than two distinct x for the slope, fewer than three points for its error)."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    n = int(x.size)
    out = {"n": n, "slope": math.nan, "intercept": math.nan, "slope_se": math.nan, "r2": math.nan}
    if n < 2 or np.unique(x).size < 2:
        return out
    xm, ym = x.mean(), y.mean()
    sxx = float(((x - xm) ** 2).sum())
    slope = float(((x - xm) * (y - ym)).sum() / sxx)
    intercept = float(ym - slope * xm)
    residuals = y - (intercept + slope * x)
    ss_res, ss_tot = float((residuals**2).sum()), float(((y - ym) ** 2).sum())
    out.update(slope=slope, intercept=intercept, r2=1.0 - ss_res / ss_tot if ss_tot > 0 else math.nan)
    if n >= 3:
        out["slope_se"] = math.sqrt(ss_res / (n - 2) / sxx)
    return out


def escape_fits(stages: pd.DataFrame, spec: TrajectorySpec, fields: list[str]) -> pd.DataFrame:
    """One row per (crossing, group): crossing, group, runs (in the group), n (runs that crossed), the
    fit_line numbers, predicted, ratio and within (bool, or None without a prediction)."""
    escape = spec.escape
    columns = ["crossing", "group", "runs", "n", "slope", "intercept", "slope_se", "r2", "predicted", "ratio"]
    if escape is None or stages.empty:
        return pd.DataFrame(columns=columns + ["within"])
    labels = group_labels(stages, list(escape.group_by))
    rows = []
    for crossing in spec.crossings:
        y_column = crossing_column(crossing.label, escape.y)
        for group in dict.fromkeys(labels):
            runs = stages[labels == group]
            ok = runs[np.isfinite(runs["escape x"].astype(float)) & np.isfinite(runs[y_column].astype(float))]
            row = {
                "crossing": crossing.label,
                "group": group,
                "runs": len(runs),
                **fit_line(ok["escape x"], ok[y_column]),
            }
            row["predicted"] = predicted_slope(escape.predicted.get(crossing.label), runs, fields)
            row["ratio"] = row["slope"] / row["predicted"] if row["predicted"] else math.nan
            row["within"] = (
                bool(math.isfinite(row["ratio"]) and abs(row["ratio"] - 1) <= escape.tolerance)
                if crossing.label in escape.predicted
                else None
            )
            rows.append(row)
    return pd.DataFrame(rows, columns=columns + ["within"])


def predicted_slope(expression, runs: pd.DataFrame, fields: list[str]) -> float:
    """The predicted slope for a group of runs: NaN without an expression or when it cannot be evaluated."""
    if expression is None:
        return math.nan
    try:
        return float(evaluate(expression, common_names(runs, fields)))
    except ExpressionError as err:
        raise ValueError(f"report.trajectory.escape.predicted: {err} (names constant within the group)") from None


def slope_ratios(fits: pd.DataFrame) -> pd.DataFrame:
    """Per group, each later crossing's fitted slope over the first crossing's (and the same for the
    predicted slopes): group, crossings ("b / a"), fitted, predicted."""
    rows = []
    for group, table in fits.groupby("group", sort=False):
        table = table[np.isfinite(table["slope"].astype(float))]
        if len(table) < 2:
            continue
        first = table.iloc[0]
        for other in table.iloc[1:].to_dict("records"):
            predicted = other["predicted"] / first["predicted"] if first["predicted"] else math.nan
            rows.append(
                {
                    "group": group,
                    "crossings": f"{other['crossing']} / {first['crossing']}",
                    "fitted": other["slope"] / first["slope"] if first["slope"] else math.nan,
                    "predicted": predicted,
                }
            )
    return pd.DataFrame(rows, columns=["group", "crossings", "fitted", "predicted"])
