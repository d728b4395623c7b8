"""Thresholds over seeds as censored quantiles: a search whose answer lies outside its range still counts.

Per grid point the searches are ordered with the censored ones past every answer on their side: one
censored "above" after every answer, one censored "below" before (their brackets are the point's, so
an answer inside the range lies between them). A quantile interpolates linearly between the two
searches around it (numpy's default rule). One that draws on a censored search is a bound: at least
(or at most) the same interpolation with those searches' last probed values in their place, which
they lie beyond; one drawing on both sides is unknown. Searches with neither an answer nor a side
(a row without a capacity) are left out.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from jaxmem.report.capacity.searches import censored_side

QUANTILES = {"q25": 0.25, "median": 0.5, "q75": 0.75}
RANK = {"below": -1, "above": 1}


def ordered(searches: pd.DataFrame) -> pd.DataFrame:
    """point, rank (-1 below the range, 0 answered, 1 above it) and value (the answer, or the last value
    probed on a censored search's side: the most extreme finite of capacity and first_failure), sorted
    by point, rank and value."""
    side = censored_side(searches)
    probed = searches[["capacity", "first_failure"]].apply(pd.to_numeric, errors="coerce")
    capacity = probed["capacity"]
    value = capacity.where(side == "", probed.max(axis=1).where(side == "above", probed.min(axis=1)))
    rank = side.map(RANK).fillna(0).astype(int)
    frame = pd.DataFrame({"point": searches["point"], "rank": rank, "value": value})
    keep = (rank != 0) | np.isfinite(capacity)
    return frame[keep].sort_values(["point", "rank", "value"], kind="stable")


def quantile(rank: np.ndarray, value: np.ndarray, q: float) -> tuple[float, str]:
    """The q-quantile of one point's ordered searches and its censoring: "" (a value), "above" (a lower
    bound), "below" (an upper bound) or "both" (unknown, NaN); (NaN, "") without searches."""
    if not len(rank):
        return math.nan, ""
    h = (len(rank) - 1) * q
    i = math.floor(h)
    f = h - i
    used = {rank[i]} | ({rank[i + 1]} if f > 0 else set())
    v = value[i] + f * (value[i + 1] - value[i]) if f > 0 else value[i]
    if used == {0}:
        return float(v), ""
    if used >= {-1, 1}:
        return math.nan, "both"
    return float(v), "above" if 1 in used else "below"


def censored_quantiles(searches: pd.DataFrame) -> pd.DataFrame:
    """Per point (the index): capacity_<name> and capacity_<name>_censored for each of QUANTILES."""
    rows = {}
    for point, part in ordered(searches).groupby("point"):
        rank, value = part["rank"].to_numpy(), part["value"].to_numpy(float)
        row = {}
        for name, q in QUANTILES.items():
            row[f"capacity_{name}"], row[f"capacity_{name}_censored"] = quantile(rank, value, q)
        rows[point] = row
    columns = [f"capacity_{n}{s}" for n in QUANTILES for s in ("", "_censored")]
    return pd.DataFrame.from_dict(rows, orient="index", columns=columns)
