"""`jaxmem compare DIR1 DIR2`: where two sweeps' results differ. Runs are matched by run_id and searches
by unit (point/seed); a number differs when |a - b| > tolerance · max(|a|, |b|, 1e-12)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from jaxmem.persistence.store import load_results

RUN_VALUES = ("max_metric", "final_metric", "final_loss", "steps_run", "steps_to_threshold", "success", "diverged")
SEARCH_VALUES = ("capacity", "first_failure", "censored", "rounds", "probes")
SHOWN = 10  # differing rows listed per table


def differs(a: pd.Series, b: pd.Series, tolerance: float) -> pd.Series:
    """Row-wise: the values differ (numbers beyond the relative tolerance; NaN equals NaN)."""
    x, y = pd.to_numeric(a, errors="coerce"), pd.to_numeric(b, errors="coerce")
    if x.notna().any() or y.notna().any():
        x, y = x.astype(float), y.astype(float)
        scale = np.maximum(np.maximum(x.abs(), y.abs()), 1e-12)
        return ~((x - y).abs() <= tolerance * scale) & ~(x.isna() & y.isna())
    return a.fillna("").astype(str) != b.fillna("").astype(str)


def table_diff(
    name: str, key: str, first: pd.DataFrame, second: pd.DataFrame, columns, tolerance: float
) -> tuple[list[str], bool]:
    """Lines on one table (keys only in one folder, then the rows whose values differ, column by
    column), and whether it differs."""
    a, b = first.set_index(key), second.set_index(key)
    both, only = a.index.intersection(b.index), (a.index.difference(b.index), b.index.difference(a.index))
    lines = [f"{name}: {len(only[0])} only in the first, {len(only[1])} only in the second, {len(both)} in both"]
    for column in (c for c in columns if c in a and c in b):
        mask = differs(a.loc[both, column], b.loc[both, column], tolerance)
        if mask.any():
            keys = list(both[mask.to_numpy()])
            rows = ", ".join(f"{k}: {a.at[k, column]} vs {b.at[k, column]}" for k in keys[:SHOWN])
            more = f" and {len(keys) - SHOWN} more" if len(keys) > SHOWN else ""
            lines.append(f"  {column} differs in {len(keys)}: {rows}{more}")
    return lines, len(lines) > 1 or bool(len(only[0]) or len(only[1]))


def compare(first: Path, second: Path, tolerance: float = 1e-6) -> tuple[str, bool]:
    """The differences between two output folders' results, and whether there are any."""
    metas = [load_results(f, "meta").set_index("key")["value"] for f in (first, second)]
    lines = [f"comparing {first} ({metas[0].get('spec', '?')}) with {second} ({metas[1].get('spec', '?')})"]
    if metas[0].get("fingerprint") != metas[1].get("fingerprint"):
        lines.append("the two folders hold different sweeps (their specs differ)")
    runs = [load_results(f, "runs", expand=False) for f in (first, second)]
    searches = [load_results(f, "searches", expand=False) for f in (first, second)]
    found = [table_diff("runs", "run_id", *runs, RUN_VALUES, tolerance)]
    if not (searches[0].empty and searches[1].empty):
        found.append(table_diff("searches", "unit", *searches, SEARCH_VALUES, tolerance))
    lines += [line for table, _ in found for line in table]
    differ = any(d for _, d in found)
    lines.append("results differ" if differ else f"results agree (relative tolerance {tolerance:g})")
    return "\n".join(lines), differ
