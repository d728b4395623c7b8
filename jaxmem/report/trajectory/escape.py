"""The escape-time law: crossing times against an expression of the config (e.g. ln(1/α)), fitted by
least squares per crossing and group, next to a predicted slope (e.g. 1/(lr·λ_r), Nichani et al. §6.3).

Per (crossing, group) the points are the runs that crossed: x = the `escape.x` expression of the run's
config, y = the crossing in `escape.y` units (step or time = step · lr). The slope, its standard error and
95 % interval are jaxmem.report.capacity.fit.fit_line's; the predicted slope is an expression over the
config fields constant within the group; ratio = fitted / predicted. The verdict is the one rule's
(jaxmem.report.verdicts.slope_verdict): PASS when the slope's 95 % interval lies inside predicted · [1 − tol,
1 + tol], which needs 3 or more distinct x among the runs that crossed (INCONCLUSIVE below).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from jaxmem.report.capacity.fit import fit_line as line_fit
from jaxmem.report.text import group_labels
from jaxmem.report.trajectory.data import common_names
from jaxmem.report.trajectory.stages import crossing_column
from jaxmem.report.verdicts import Verdict, slope_verdict
from jaxmem.spec.expr import ExpressionError, evaluate
from jaxmem.spec.report_tables import TrajectorySpec

NAMES = {"n": "n", "n_x": "n_x", "b": "slope", "a": "intercept", "b_se": "slope_se", "b_lo": "slope_lo"}
NAMES.update(b_hi="slope_hi", r2="r2")


def fit_line(x, y) -> dict:
    """jaxmem.report.capacity.fit.fit_line of y on x under the escape table's names: n, n_x, slope,
    intercept, slope_se, slope_lo, slope_hi (its 95 % interval), r2."""
    fit = line_fit(x, y)
    return {name: fit[key] for key, name in NAMES.items()}


def escape_verdict(row: dict, tolerance: float) -> Verdict | None:
    """The fitted slope of `row` (fit_line, predicted) against predicted · [1 − tol, 1 + tol]; None
    without a prediction."""
    if not math.isfinite(row["predicted"]):
        return None
    band = sorted(row["predicted"] * (1 + side * tolerance) for side in (-1, 1))
    return slope_verdict({"n_x": row["n_x"], "b_lo": row["slope_lo"], "b_hi": row["slope_hi"]}, tuple(band))


def escape_fits(stages: pd.DataFrame, spec: TrajectorySpec, fields: list[str]) -> pd.DataFrame:
    """One row per (crossing, group): crossing, group, runs (in the group), the fit_line numbers (n: runs
    that crossed), predicted, ratio, verdict and reason (escape_verdict; "" without a prediction)."""
    escape = spec.escape
    columns = ["crossing", "group", "runs", *NAMES.values(), "predicted", "ratio", "verdict", "reason"]
    if escape is None or stages.empty:
        return pd.DataFrame(columns=columns)
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
            verdict = escape_verdict(row, escape.tolerance)
            row.update(verdict=verdict.outcome if verdict else "", reason=verdict.reason if verdict else "")
            rows.append(row)
    return pd.DataFrame(rows, columns=columns)


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
