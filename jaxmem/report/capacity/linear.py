"""Linear fits y = a + b·x over the grid points of a search sweep ([report] fit_linear), beside the
power law: intercept and slope with their standard errors, R², the points, the per-seed slopes, and the
acceptance of the slope and R².

Like the power-law fit (jaxmem.report.capacity.fit), each point enters with the mean of its searches
answered inside their range; y is the expression of that mean (the searched variable bound to it).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from jaxmem.report.capacity.fit import moments
from jaxmem.report.expressions import row_values
from jaxmem.report.text import group_labels, markdown_table, mean_std, number
from jaxmem.spec.report_tables import LinearFit


def fit_line(x, y) -> dict:
    """Least squares y = a + b·x: a, b, their standard errors (from the residuals, n ≥ 3), R² and n.
    NaN where undefined (fewer than two distinct x; R² when every y is equal)."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    keep = np.isfinite(x) & np.isfinite(y)
    x, y = x[keep], y[keep]
    out = {"a": math.nan, "b": math.nan, "a_se": math.nan, "b_se": math.nan, "r2": math.nan, "n": int(x.size)}
    if np.unique(x).size < 2:
        return out
    b, a = np.polyfit(x, y, 1)
    residual = y - (a + b * x)
    sxx, syy = float(((x - x.mean()) ** 2).sum()), float(((y - y.mean()) ** 2).sum())
    out.update(a=float(a), b=float(b), r2=1 - float((residual**2).sum()) / syy if syy > 0 else math.nan)
    if x.size >= 3:
        s2 = float((residual**2).sum()) / (x.size - 2)
        out.update(a_se=math.sqrt(s2 * (1 / x.size + x.mean() ** 2 / sxx)), b_se=math.sqrt(s2 / sxx))
    return out


def point_means(rows: pd.DataFrame) -> pd.DataFrame:
    """Per point: its first row with `capacity` replaced by the mean over the rows."""
    grouped = rows.groupby("point", sort=True)
    return grouped.first().assign(capacity=grouped["capacity"].mean()).reset_index()


def xy(spec: LinearFit, rows: pd.DataFrame, variable: str) -> tuple[pd.Series, pd.Series]:
    """The fit's x and y of each row, the searched variable bound to `capacity`."""
    y = spec.y or variable
    return row_values(spec.x, rows), row_values(y, rows, {variable: "capacity"})


def linear_fit(spec: LinearFit, rows: pd.DataFrame, variable: str) -> dict:
    """The pooled fit over the per-point means of the answered searches `rows`, the per-seed slopes
    (mean, std, count) and the verdicts ("slope_pass", "r2_pass": None without an expectation)."""
    means = point_means(rows)
    result = fit_line(*xy(spec, means, variable))
    slopes = [fit_line(*xy(spec, point_means(part), variable))["b"] for _, part in rows.groupby("seed")]
    result["seed_b"] = moments(slopes)
    lo_hi = spec.expect_slope
    result["slope_pass"] = judged(lo_hi is not None, result["b"], lambda b: lo_hi[0] <= b <= lo_hi[1])
    result["r2_pass"] = judged(spec.min_r2 is not None, result["r2"], lambda r2: r2 >= spec.min_r2)
    return result


UNMEASURED = "unmeasured"  # a verdict whose value could not be computed (e.g. a fit over fewer than 2 points)


def judged(expected: bool, value: float, ok) -> bool | str | None:
    """A verdict: None without an expectation, UNMEASURED for a NaN value, else whether `ok(value)`."""
    if not expected:
        return None
    return UNMEASURED if not math.isfinite(value) else bool(ok(value))


def checked(expected: bool, outcome: bool | None) -> bool | str | None:
    """A yes/no check's verdict: None without an expectation, UNMEASURED when it could not be made."""
    if not expected:
        return None
    return UNMEASURED if outcome is None else outcome


def passed(ok: bool | str) -> str:
    return "**not measurable**" if ok == UNMEASURED else f"**{'PASS' if ok else 'FAIL'}**"


def fit_verdicts(spec, result: dict) -> list[str]:
    """The slope's and R²'s verdicts of a fit (`spec`: its expect_slope and min_r2), e.g.
    ["b in [2, 4]: **PASS**", "R² ≥ 0.9: **FAIL**"]; none without expectations."""
    parts = []
    if result["slope_pass"] is not None:
        lo, hi = spec.expect_slope
        parts.append(f"b in [{number(lo)}, {number(hi)}]: {passed(result['slope_pass'])}")
    if result["r2_pass"] is not None:
        parts.append(f"R² ≥ {number(spec.min_r2)}: {passed(result['r2_pass'])}")
    return parts


def verdicts(spec: LinearFit, result: dict) -> str:
    """e.g. "b in [2, 4]: PASS; R² ≥ 0.9: FAIL"; "–" without expectations."""
    return "; ".join(fit_verdicts(spec, result)) or "–"


def linear_section(specs: tuple[LinearFit, ...], rows: pd.DataFrame, variable: str) -> str:
    """The `## Linear fits` section: one row per fit and group."""
    if not specs or rows.empty:
        return ""
    table = []
    for spec in specs:
        labels = group_labels(rows, list(spec.group_by))
        for label in sorted(set(labels)):
            table.append(fit_row(spec, rows[labels == label], variable, label if spec.group_by else ""))
    headers = ["fit", "a ± se", "b ± se", "R²", "points", "b per seed (mean ± std)", "expected"]
    intro = (
        "## Linear fits\n\nLeast squares of y = a + b·x over the grid points, each at the mean of its searches "
        "answered inside their range (as the fitted slope above); standard errors from the residuals "
        "(3 or more points). Per seed: the same fit over that seed's answers.\n\n"
    )
    return intro + markdown_table(headers, table)


def fit_row(spec: LinearFit, rows: pd.DataFrame, variable: str, group: str) -> list:
    """One row of the section: the fit (and its group), a, b, R², points, per-seed b, verdicts."""
    r = linear_fit(spec, rows, variable)
    mean, std, count = r["seed_b"]
    name = f"{spec.y_label or variable} = a + b · {spec.x_label}" + (f" ({group})" if group else "")
    return [
        name,
        mean_std(r["a"], r["a_se"], 3),
        mean_std(r["b"], r["b_se"], 3),
        number(r["r2"], 4),
        r["n"],
        f"{mean_std(mean, std, 3)} ({count} seeds)",
        verdicts(spec, r),
    ]
