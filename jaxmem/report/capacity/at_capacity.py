"""Every metric of the runs at each search's answer: the best successful run at the capacity value."""

from __future__ import annotations

import numpy as np
import pandas as pd

from jaxmem.report.runs import best_runs, metric_names, untrained_names


def capacity_runs(searches: pd.DataFrame, runs: pd.DataFrame, better: str = "max") -> pd.DataFrame:
    """For each search with a capacity, its best successful run (by max_metric, `better` "max" or
    "min") at the capacity value.

    Returns one row per search, sorted by point and seed: the search's `point`, `seed` and `capacity`
    plus the run's `max_metric`, `final_*` and `untrained_*` columns. Searches with no capacity or no matching run are
    left out.
    """
    columns = ["point", "seed", "capacity", "max_metric", *metric_names(runs), *untrained_names(runs)]
    if searches.empty or runs.empty or not {"point", "seed", "value", "success"} <= set(runs.columns):
        return pd.DataFrame(columns=columns)
    ok = runs[runs["success"].fillna(False).astype(bool)].copy()
    ok["value"] = pd.to_numeric(ok["value"], errors="coerce")
    found = searches[["point", "seed", "capacity"]].dropna(subset=["capacity"])
    joined = found.merge(ok, on=["point", "seed"], how="inner")
    joined = joined[np.isclose(joined["value"], pd.to_numeric(joined["capacity"]))]
    best = best_runs(joined, "max_metric", better)
    return best[[c for c in columns if c in best]].reset_index(drop=True)


def capacity_metrics_table(searches: pd.DataFrame, runs: pd.DataFrame, better: str = "max") -> pd.DataFrame:
    """Per grid point: the mean over its searches of the capacity runs' max_metric, final and untrained
    metrics."""
    at_capacity = capacity_runs(searches, runs, better)
    if at_capacity.empty:
        return at_capacity
    values = [c for c in at_capacity.columns if c not in ("point", "seed")]
    grouped = at_capacity.groupby("point")
    table = grouped[values].mean()
    table.insert(0, "searches", grouped.size())
    return table.reset_index()
