"""Every metric of a run at its last evaluation, side by side: runs' `final_metrics` JSON as columns,
the best learning rate's run per (point, seed), and the runs at each search's capacity value.

Stores written before `final_metrics` existed lack the column or hold NULL; they give no `final_*`
columns beyond those the runs table already has (`final_metric`, `final_loss`).
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

PREFIX = "final_"


def parse_metrics(cell) -> dict:
    """One `final_metrics` cell as a dict of floats; {} for NULL, NaN, empty or unreadable cells."""
    if isinstance(cell, dict):
        raw = cell
    elif isinstance(cell, str) and cell.strip():
        try:
            raw = json.loads(cell)
        except json.JSONDecodeError:
            return {}
    else:
        return {}
    if not isinstance(raw, dict):
        return {}
    return {str(k): float(v) for k, v in raw.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}


def expand_final_metrics(runs: pd.DataFrame) -> pd.DataFrame:
    """Spread the JSON `final_metrics` column into `final_<name>` columns and drop it.

    A `final_<name>` column the table already has (e.g. `final_loss`) keeps its values; only its
    missing ones are filled from the JSON.
    """
    if "final_metrics" not in runs:
        return runs
    parsed = pd.DataFrame([parse_metrics(c) for c in runs["final_metrics"]], index=runs.index)
    out = runs.drop(columns="final_metrics")
    for name in parsed.columns:
        column = PREFIX + name
        values = pd.to_numeric(parsed[name], errors="coerce")
        out[column] = pd.to_numeric(out[column], errors="coerce").fillna(values) if column in out else values
    return out


def metric_names(runs: pd.DataFrame) -> list[str]:
    """The `final_<name>` columns holding a whole metric (not `final_metric`, the train metric's alias)."""
    return [c for c in runs.columns if c.startswith(PREFIX) and c != "final_metric" and runs[c].notna().any()]


def best_runs(runs: pd.DataFrame, metric: str = "max_metric", better: str = "max") -> pd.DataFrame:
    """One run per (point, seed): the learning rate with the best `metric` (NaN, e.g. diverged, loses).

    `better` is "max" or "min". Ties keep the first run in table order.
    """
    if runs.empty:
        return runs
    if metric not in runs:
        raise ValueError(f"report metric {metric!r} is not a run column (columns: {list(runs.columns)})")
    if better not in ("max", "min"):
        raise ValueError(f"report better must be 'max' or 'min', got {better!r}")
    score = pd.to_numeric(runs[metric], errors="coerce")
    score = (score if better == "max" else -score).fillna(-np.inf)
    order = score.sort_values(ascending=False, kind="stable").index
    return runs.loc[order].drop_duplicates(["point", "seed"]).sort_index()


def capacity_runs(searches: pd.DataFrame, runs: pd.DataFrame) -> pd.DataFrame:
    """For each search with a capacity, its best successful run at the capacity value (largest success).

    Returns one row per search: the search's `point`, `seed` and `capacity` plus the run's
    `max_metric` and `final_*` columns. Searches with no capacity or no matching run are left out.
    """
    columns = ["point", "seed", "capacity", "max_metric", *metric_names(runs)]
    if searches.empty or runs.empty or not {"point", "seed", "value", "success"} <= set(runs.columns):
        return pd.DataFrame(columns=columns)
    ok = runs[runs["success"].fillna(False).astype(bool)].copy()
    ok["value"] = pd.to_numeric(ok["value"], errors="coerce")
    found = searches[["point", "seed", "capacity"]].dropna(subset=["capacity"])
    joined = found.merge(ok, on=["point", "seed"], how="inner")
    joined = joined[np.isclose(joined["value"], pd.to_numeric(joined["capacity"]))]
    best = best_runs(joined)
    return best[[c for c in columns if c in best]].reset_index(drop=True)


def capacity_metrics_table(searches: pd.DataFrame, runs: pd.DataFrame) -> pd.DataFrame:
    """Per grid point: mean over searches of the capacity runs' max_metric and final metrics."""
    at_capacity = capacity_runs(searches, runs)
    if at_capacity.empty:
        return at_capacity
    values = [c for c in at_capacity.columns if c not in ("point", "seed")]
    grouped = at_capacity.groupby("point", sort=False)
    table = grouped[values].mean()
    table.insert(0, "searches", grouped.size())
    return table.reset_index()
