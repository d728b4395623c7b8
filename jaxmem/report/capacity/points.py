"""capacity.csv: one row per grid point, its searches aggregated over seeds."""

from __future__ import annotations

import pandas as pd

from jaxmem.report.capacity.censored import censored_quantiles
from jaxmem.report.capacity.searches import censored_side, config_columns, usable_mask


def point_table(searches: pd.DataFrame, x: str = "params") -> pd.DataFrame:
    """One row per grid point, sorted by point: its config, params and x; n_searches, n_seeds (answered
    inside the range, with a usable capacity), n_above and n_below (censored); the censored quantiles
    capacity_q25, capacity_median, capacity_q75, each with its `_censored` column (see
    jaxmem.report.capacity.censored); over the answered searches only, capacity mean, std, min and max
    and the mean bits per parameter."""
    keep = list(dict.fromkeys(config_columns(searches) + ["params", x]))
    by_point = searches.groupby("point")
    side = censored_side(searches)
    ok = searches[usable_mask(searches, x)].assign(bits_per_param=lambda f: f["bits"] / f["params"])
    answered = ok.groupby("point")
    table = by_point[keep].first()
    table["n_searches"] = by_point.size()
    for name in ("above", "below"):
        table[f"n_{name}"] = (side == name).groupby(searches["point"]).sum().astype(int)
    table = table.join(
        answered["capacity"].agg(
            n_seeds="count", capacity_mean="mean", capacity_std="std", capacity_min="min", capacity_max="max"
        )
    )
    table["n_seeds"] = table["n_seeds"].fillna(0).astype(int)
    table = table.join(censored_quantiles(searches))
    censored = [c for c in table.columns if c.endswith("_censored")]
    table[censored] = table[censored].fillna("")
    table = table.join(answered["bits_per_param"].mean().rename("bits_per_param_mean"))
    return table.reset_index()
