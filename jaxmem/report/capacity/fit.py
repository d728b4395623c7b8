"""The numbers behind a capacity report: power-law fits of capacity against x, per-seed slopes, how
groups collapse onto one law, bits per parameter; and the least-squares line every report fit uses.

The fits use, per grid point, the mean over the searches answered inside their range (censored searches
are counted by the capacity table's quantiles, not by these means). All functions are pure. Log-space
quantities use the natural log.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from jaxmem.report.capacity.points import point_table
from jaxmem.report.capacity.searches import censored_side, group_columns, search_variable, usable_mask, x_column
from jaxmem.report.text import group_labels
from jaxmem.report.verdicts import slope_verdict, t_interval
from jaxmem.spec.expr import evaluate
from jaxmem.spec.report_tables import ReportSpec


def apply_fit(expression: str | None, variable: str, values) -> np.ndarray:
    """fit(capacity) for each value; the identity when no fit expression is given."""
    values = np.asarray(values, dtype=float)
    if expression is None:
        return values
    return np.array([float(evaluate(expression, {variable: float(v)})) for v in values])


def fit_power_law(x, y) -> tuple[float, float]:
    """Least-squares line through (ln x, ln y): returns (slope, intercept), y ≈ e^intercept · x^slope.

    Returns (nan, nan) when there are fewer than two distinct x values.
    """
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if np.any(~np.isfinite(x) | ~np.isfinite(y) | (x <= 0) | (y <= 0)):
        raise ValueError("power-law fit needs finite positive x and y")
    if np.unique(x).size < 2:
        return math.nan, math.nan
    slope, intercept = np.polyfit(np.log(x), np.log(y), 1)
    return float(slope), float(intercept)


def fit_line(x, y) -> dict:
    """Least squares y = a + b·x: a, b, their standard errors (from the residuals, n ≥ 3), b's 95 %
    t-interval (b_lo, b_hi), R², n (points) and n_x (distinct x). NaN where undefined (fewer than two
    distinct x; R² when every y is equal)."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    keep = np.isfinite(x) & np.isfinite(y)
    x, y = x[keep], y[keep]
    out = {"a": math.nan, "b": math.nan, "a_se": math.nan, "b_se": math.nan, "b_lo": math.nan, "b_hi": math.nan}
    out.update(r2=math.nan, n=int(x.size), n_x=int(np.unique(x).size))
    if out["n_x"] < 2:
        return out
    b, a = np.polyfit(x, y, 1)
    residual = y - (a + b * x)
    sxx, syy = float(((x - x.mean()) ** 2).sum()), float(((y - y.mean()) ** 2).sum())
    out.update(a=float(a), b=float(b), r2=1 - float((residual**2).sum()) / syy if syy > 0 else math.nan)
    if x.size >= 3:
        s2 = float((residual**2).sum()) / (x.size - 2)
        out.update(a_se=math.sqrt(s2 * (1 / x.size + x.mean() ** 2 / sxx)), b_se=math.sqrt(s2 / sxx))
        out["b_lo"], out["b_hi"] = t_interval(float(b), out["b_se"], x.size - 2)
    return out


def log_residuals(x, y, slope: float, intercept: float) -> np.ndarray:
    """ln y − (intercept + slope · ln x)."""
    return np.log(np.asarray(y, dtype=float)) - (intercept + slope * np.log(np.asarray(x, dtype=float)))


def moments(values) -> tuple[float, float, int]:
    """(mean, sample std, count) of the finite values; nan where undefined."""
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v)]
    mean = float(v.mean()) if v.size else math.nan
    std = float(v.std(ddof=1)) if v.size >= 2 else math.nan
    return mean, std, int(v.size)


def seed_slopes(rows: pd.DataFrame, x: str, expression: str | None, variable: str) -> list[float]:
    """Slope of a separate fit per seed (seeds with fewer than two distinct x values are skipped)."""
    slopes = []
    for _, seed_rows in rows.groupby("seed"):
        per_point = seed_rows.groupby("point")[[x, "capacity"]].mean()
        y = apply_fit(expression, variable, per_point["capacity"])
        keep = (y > 0) & (per_point[x].to_numpy(float) > 0)
        slope, _ = fit_power_law(per_point[x][keep], y[keep])
        if np.isfinite(slope):
            slopes.append(slope)
    return slopes


def collapse_stats(x, y, labels, slope: float, intercept: float) -> dict:
    """How well groups collapse onto the common law (slope, intercept) in log space.

    Returns rms and max |residual| of ln y about the common law, the geometric middle x_mid of
    the x range, per-group slope and fitted value at x_mid, and the max/min spread of those values.
    """
    x, y, labels = np.asarray(x, dtype=float), np.asarray(y, dtype=float), np.asarray(labels)
    residuals = log_residuals(x, y, slope, intercept)
    x_mid = math.sqrt(x.min() * x.max())
    groups = {}
    for label in dict.fromkeys(labels):
        sel = labels == label
        g_slope, g_intercept = fit_power_law(x[sel], y[sel])
        groups[str(label)] = {
            "n_points": int(sel.sum()),
            "slope": g_slope,
            "value_at_mid": math.exp(g_intercept + g_slope * math.log(x_mid)),
        }
    mids = [g["value_at_mid"] for g in groups.values() if np.isfinite(g["value_at_mid"])]
    return {
        "rms": float(np.sqrt(np.mean(residuals**2))),
        "max_abs": float(np.max(np.abs(residuals))),
        "x_mid": x_mid,
        "spread": max(mids) / min(mids) if mids else math.nan,
        "groups": groups,
    }


def summarise(report_spec: ReportSpec, searches: pd.DataFrame) -> dict:
    """The report's numbers: pooled slope with its 95 % interval (slope_lo, slope_hi), per-seed slope
    spread, the verdict of the expected slope ("pass", jaxmem.report.verdicts), collapse, bits per
    parameter, and what the fit left out: `excluded` searches (censored_above and censored_below among
    them) and `excluded_points` without an answered search."""
    expect = report_spec.expect_slope
    summary = {
        "variable": None,
        "x": report_spec.x,
        "fit": report_spec.fit,
        "n_searches": len(searches),
        "n_points": 0,
        "excluded": 0,
        "excluded_points": 0,
        "censored_above": 0,
        "censored_below": 0,
        "slope": math.nan,
        "slope_lo": math.nan,
        "slope_hi": math.nan,
        "intercept": math.nan,
        "slope_seed_mean": math.nan,
        "slope_seed_std": math.nan,
        "n_seed_fits": 0,
        "expect_slope": list(expect) if expect is not None else None,
        "pass": None,
        "collapse": None,
        "bits_per_param_mean": math.nan,
        "bits_per_param_std": math.nan,
        "bits_per_param_by_group": {},
    }
    if searches.empty:
        return summary
    x = x_column(report_spec, searches)
    group_by = group_columns(report_spec, searches)
    variable = search_variable(searches)
    expression = report_spec.fit
    usable = usable_mask(searches, x)
    rows = searches[usable]

    table = point_table(searches, x)
    table = table[table["n_seeds"] > 0]
    y = apply_fit(expression, variable, table["capacity_mean"])
    fittable = (y > 0) & (pd.to_numeric(table[x], errors="coerce") > 0).to_numpy()  # a power law needs x > 0
    table, y = table[fittable], y[fittable]
    line = fit_line(np.log(table[x].to_numpy(float)), np.log(y))
    slope, intercept = line["b"], line["a"]
    seed_mean, seed_std, n_seed_fits = moments(seed_slopes(rows, x, expression, variable))

    summary.update(
        variable=variable,
        x=x,
        n_points=len(table),
        excluded=int((~usable).sum()),
        excluded_points=searches["point"].nunique() - len(table),
        censored_above=int((censored_side(searches) == "above").sum()),
        censored_below=int((censored_side(searches) == "below").sum()),
        slope=slope,
        slope_lo=line["b_lo"],
        slope_hi=line["b_hi"],
        intercept=intercept,
        slope_seed_mean=seed_mean,
        slope_seed_std=seed_std,
        n_seed_fits=n_seed_fits,
    )
    if expect is not None:
        summary["pass"] = slope_verdict(line, expect)
    if report_spec.collapse and np.isfinite(slope):
        summary["collapse"] = collapse_stats(table[x], y, group_labels(table, group_by), slope, intercept)

    bpp = rows["bits"] / rows["params"]
    summary["bits_per_param_mean"], summary["bits_per_param_std"], _ = moments(bpp)
    summary["bits_per_param_by_group"] = {
        str(label): dict(zip(("mean", "std", "n"), moments(values)))
        for label, values in bpp.groupby(group_labels(rows, group_by), sort=False)
    }
    return summary
