"""Numbers behind a capacity report: per-point tables, power-law fits, collapse, bits per parameter.

All functions are pure. Log-space quantities use the natural log.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from jaxmem.spec.expr import evaluate
from jaxmem.persistence.store import SEARCH_COLUMNS
from jaxmem.spec.report_tables import ReportSpec

# Every column of the searches table except the grid point's own fields (spread from `config`).
FIXED_COLUMNS = tuple(c for c in SEARCH_COLUMNS if c != "config")


def config_columns(searches: pd.DataFrame) -> list[str]:
    """The columns of `searches` that describe the grid point (everything not fixed)."""
    return [c for c in searches.columns if c not in FIXED_COLUMNS]


def search_variable(searches: pd.DataFrame) -> str:
    """The single searched variable name (e.g. "N")."""
    names = searches["variable"].dropna().unique()
    if len(names) != 1:
        raise ValueError(f"expected one searched variable, found {sorted(map(str, names))}")
    return str(names[0])


def x_column(report_spec: ReportSpec, searches: pd.DataFrame) -> str:
    """The x-axis column named by the report spec (default "params"), checked to exist."""
    x = report_spec.x
    if x not in searches.columns:
        raise ValueError(f"report x column {x!r} is not in the searches (columns: {list(searches.columns)})")
    return x


def group_columns(report_spec: ReportSpec, searches: pd.DataFrame) -> list[str]:
    """The report's group_by columns, checked to exist."""
    group_by = list(report_spec.group_by)
    missing = [c for c in group_by if c not in searches.columns]
    if missing:
        raise ValueError(
            f"report group_by columns {missing} are not in the searches (columns: {list(searches.columns)})"
        )
    return group_by


def usable_mask(searches: pd.DataFrame, x: str) -> pd.Series:
    """Rows whose capacity can enter a fit: finite positive capacity and x, not censored."""
    censored = searches["censored"].fillna("").astype(str).str.strip() != ""
    capacity = pd.to_numeric(searches["capacity"], errors="coerce")
    xs = pd.to_numeric(searches[x], errors="coerce")
    return (capacity > 0) & np.isfinite(capacity) & (xs > 0) & np.isfinite(xs) & ~censored


def format_number(value) -> str:
    """Text for a table cell or label: integers plainly, floats ≥ 1000 rounded, others to 4 significant digits."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if isinstance(value, (bool, np.bool_)):
        return str(bool(value))
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (float, np.floating)):
        if 1000 <= abs(value) < 1e9:
            return f"{value:.0f}"
        return str(int(value)) if float(value).is_integer() else f"{value:.4g}"
    return str(value)


def group_labels(frame: pd.DataFrame, group_by: list[str]) -> pd.Series:
    """One label per row, e.g. "m_over_d=2, model=mlp"; "all" without grouping."""
    if not group_by:
        return pd.Series("all", index=frame.index)
    labels = [
        ", ".join(f"{c}={format_number(v)}" for c, v in zip(group_by, values))
        for values in frame[group_by].itertuples(index=False)
    ]
    return pd.Series(labels, index=frame.index, dtype=object)


def point_table(searches: pd.DataFrame, x: str = "params") -> pd.DataFrame:
    """One row per grid point: config, params, capacity mean/std/min/max over usable seeds, bits/param."""
    keep = list(dict.fromkeys(config_columns(searches) + ["params", x]))
    ok = searches[usable_mask(searches, x)].assign(bits_per_param=lambda f: f["bits"] / f["params"])
    grouped = ok.groupby("point", sort=False)
    table = (
        searches.groupby("point", sort=False)[keep]
        .first()
        .join(
            grouped["capacity"].agg(
                capacity_mean="mean", capacity_std="std", capacity_min="min", capacity_max="max", n_seeds="count"
            )
        )
        .join(grouped["bits_per_param"].mean().rename("bits_per_param_mean"))
    )
    table["n_seeds"] = table["n_seeds"].fillna(0).astype(int)
    table["n_excluded"] = searches.groupby("point", sort=False).size() - table["n_seeds"]
    return table.reset_index()


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


def log_residuals(x, y, slope: float, intercept: float) -> np.ndarray:
    """ln y − (intercept + slope · ln x)."""
    return np.log(np.asarray(y, dtype=float)) - (intercept + slope * np.log(np.asarray(x, dtype=float)))


def mean_std(values) -> tuple[float, float, int]:
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
        slope, _ = fit_power_law(per_point[x][y > 0], y[y > 0])
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
    """The report's numbers: pooled slope, per-seed slope spread, acceptance, collapse, bits per parameter."""
    expect = report_spec.expect_slope
    summary = {
        "variable": None,
        "x": report_spec.x,
        "fit": report_spec.fit,
        "n_searches": len(searches),
        "n_points": 0,
        "excluded": 0,
        "excluded_points": 0,
        "slope": math.nan,
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
    fittable = y > 0
    table, y = table[fittable], y[fittable]
    slope, intercept = fit_power_law(table[x], y)
    seed_mean, seed_std, n_seed_fits = mean_std(seed_slopes(rows, x, expression, variable))

    summary.update(
        variable=variable,
        x=x,
        n_points=len(table),
        excluded=int((~usable).sum()),
        excluded_points=searches["point"].nunique() - len(table),
        slope=slope,
        intercept=intercept,
        slope_seed_mean=seed_mean,
        slope_seed_std=seed_std,
        n_seed_fits=n_seed_fits,
    )
    if expect is not None:
        summary["pass"] = bool(np.isfinite(slope) and expect[0] <= slope <= expect[1])
    if report_spec.collapse and np.isfinite(slope):
        summary["collapse"] = collapse_stats(table[x], y, group_labels(table, group_by), slope, intercept)

    bpp = rows["bits"] / rows["params"]
    summary["bits_per_param_mean"], summary["bits_per_param_std"], _ = mean_std(bpp)
    summary["bits_per_param_by_group"] = {
        str(label): dict(zip(("mean", "std", "n"), mean_std(values)))
        for label, values in bpp.groupby(group_labels(rows, group_by), sort=False)
    }
    return summary
