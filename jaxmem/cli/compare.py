"""`jaxmem compare DIR1 DIR2`: where two sweeps' results differ. Runs are matched by run_id, searches
by unit (point/seed), trajectory points by (run_id, step), test-time evaluations by (run_id, point) and,
where both sweeps speculated (no round barrier), timeline rows by (kind, id, start), each of their
values compared; a number differs when |a - b| > tolerance · max(|a|, |b|, 1e-12). Each
store is checked whole first, as `jaxmem status` checks it: a row failing its checksum, or lost rows, in
any table is an error (exit 4), never an agreement."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from jaxmem.cli.status import holds_results
from jaxmem.persistence.store import Store
from jaxmem.persistence.timeline import speculated

RUN_VALUES = ("max_metric", "final_metric", "final_loss", "steps_run", "steps_to_threshold", "success", "diverged")
SEARCH_VALUES = ("capacity", "first_failure", "censored", "rounds", "probes")
METRICS = None  # the values of a table with a JSON `metrics` column: every metric in it
COMPARED = {  # table: (the key matching its rows, the values compared)
    "runs": ("run_id", RUN_VALUES),
    "searches": ("unit", SEARCH_VALUES),
    "trajectories": (["run_id", "step"], METRICS),
    "final_eval": (["run_id", "point"], METRICS),
}
TIMELINE = (["kind", "id", "start"], ("end", "known_at", "status"))  # compared where both sweeps speculated
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
    name: str, key: str | list[str], first: pd.DataFrame, second: pd.DataFrame, columns, tolerance: float
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


def stored_tables(folder: Path) -> dict[str, pd.DataFrame]:
    """The meta and compared tables of an output folder, its store opened read-only, which checks every
    row of every table (as `jaxmem status` does): StoreError for damage or lost rows."""
    store = Store(holds_results(folder), write=False)
    try:
        return {name: store.table(name) for name in ("meta", "timeline", *COMPARED)}
    finally:
        store.close()


def spread_metrics(first: pd.DataFrame, second: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame, list[str]]:
    """Two tables' JSON `metrics` column spread into one column per metric either has (a metric a row
    lacks is NaN there: it differs), and the metrics' names."""
    metrics = [pd.DataFrame([json.loads(m) for m in f["metrics"]], index=f.index) for f in (first, second)]
    names = sorted(set().union(*(m.columns for m in metrics)))
    a, b = (pd.concat([f.drop(columns="metrics"), m.reindex(columns=names)], axis=1)
            for f, m in zip((first, second), metrics))  # fmt: skip
    return a, b, names


def compare(first: Path, second: Path, tolerance: float = 1e-6) -> tuple[str, bool]:
    """The differences between two output folders' results, and whether there are any."""
    tables = [stored_tables(f) for f in (first, second)]
    metas = [t["meta"].set_index("key")["value"] for t in tables]
    lines = [f"comparing {first} ({metas[0].get('spec', '?')}) with {second} ({metas[1].get('spec', '?')})"]
    if metas[0].get("fingerprint") != metas[1].get("fingerprint"):
        lines.append("the two folders hold different sweeps (their specs differ)")
    found = []
    compared = {**COMPARED, "timeline": TIMELINE} if all(speculated(m) for m in metas) else COMPARED
    for name, (key, values) in compared.items():
        a, b = tables[0][name], tables[1][name]
        if name != "runs" and a.empty and b.empty:
            continue
        if values is METRICS:
            a, b, values = spread_metrics(a, b)
        found.append(table_diff(name, key, a, b, values, tolerance))
    lines += [line for table, _ in found for line in table]
    differ = any(d for _, d in found)
    lines.append("results differ" if differ else f"results agree (relative tolerance {tolerance:g})")
    return "\n".join(lines), differ
