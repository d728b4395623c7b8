"""The runs table as the report reads it: every metric of a run at its last evaluation (the JSON
`final_metrics` as `final_<name>` columns) and of its untrained model (the JSON's `untrained_<name>`
entries as `untrained_<name>` columns: the baseline a trained value is shown beside), its config fields,
and the best run per (point, seed).

Stores written before `final_metrics` existed lack the column or hold NULL; they give no `final_*`
columns beyond those the runs table already has (`final_metric`, `final_loss`); stores written before
the untrained metrics were kept give no `untrained_*` columns.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from jaxmem.persistence.untrained import UNTRAINED
from jaxmem.persistence.store import RUN_COLUMNS

PREFIX = "final_"
RUN_FIELDS = frozenset(RUN_COLUMNS) | {"config"}


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
    """Spread the JSON `final_metrics` column into `final_<name>` columns (its `untrained_<name>`
    entries into columns of that name) and drop it.

    A `final_<name>` column the table already has (e.g. `final_loss`) keeps its values; only its
    missing ones are filled from the JSON.
    """
    if "final_metrics" not in runs:
        return runs
    parsed = pd.DataFrame([parse_metrics(c) for c in runs["final_metrics"]], index=runs.index)
    out = runs.drop(columns="final_metrics")
    for name in parsed.columns:
        column = name if name.startswith(UNTRAINED) else PREFIX + name
        values = pd.to_numeric(parsed[name], errors="coerce")
        out[column] = pd.to_numeric(out[column], errors="coerce").fillna(values) if column in out else values
    return out


def metric_names(runs: pd.DataFrame) -> list[str]:
    """The `final_<name>` columns holding a whole metric (not `final_metric`, the judged metric's alias)."""
    return [c for c in runs.columns if c.startswith(PREFIX) and c != "final_metric" and runs[c].notna().any()]


def untrained_names(runs: pd.DataFrame) -> list[str]:
    """The `untrained_<name>` columns holding a value (the untrained model's metrics)."""
    return [c for c in runs.columns if c.startswith(UNTRAINED) and runs[c].notna().any()]


def metric_columns(columns) -> list[str]:
    """max_metric first, then the final_* columns by name."""
    return sorted(
        (c for c in columns if c == "max_metric" or c.startswith(PREFIX)), key=lambda c: (c != "max_metric", c)
    )


def config_fields(runs: pd.DataFrame) -> list[str]:
    """The expanded config columns of a runs table (everything that is not a run result)."""
    return [c for c in runs.columns if c not in RUN_FIELDS and not c.startswith((PREFIX, UNTRAINED))]


def shown_metric(column: str, judged: str | None) -> str | None:
    """The metric a runs column shows: `<name>` for `final_<name>`, the `judged` metric for `max_metric`
    and `final_metric`; None for any other column."""
    if column in ("max_metric", "final_metric"):
        return judged
    return column[len(PREFIX) :] if column.startswith(PREFIX) else None


def with_untrained(columns: list[str], available, metrics, judged: str | None) -> list[str]:
    """Metric `columns` with the untrained model's column (`untrained_<name>`) of each of `metrics` right
    after the first column showing it (see shown_metric), where `available` holds it; other metrics get
    none, so that a table stays readable."""
    out, added = [], set()
    for column in columns:
        out.append(column)
        name = shown_metric(column, judged)
        if name is not None and name in metrics and name not in added and UNTRAINED + name in available:
            out.append(UNTRAINED + name)
            added.add(name)
    return out


def ranked(runs: pd.DataFrame, metric: str = "max_metric", better: str = "max") -> pd.DataFrame:
    """The runs best first by `metric` (NaN, e.g. diverged, last); ties go to the smaller learning rate,
    then the smaller run_id, so the order depends on the rows alone, never on the table's order."""
    if metric not in runs:
        raise ValueError(f"report metric {metric!r} is not a run column (columns: {list(runs.columns)})")
    if better not in ("max", "min"):
        raise ValueError(f"report better must be 'max' or 'min', got {better!r}")
    score = pd.to_numeric(runs[metric], errors="coerce")
    score = (-score if better == "max" else score).fillna(np.inf)
    keys = pd.DataFrame({"score": score, "lr": runs["lr"], "run_id": runs["run_id"].astype(str)})
    return runs.loc[keys.sort_values(["score", "lr", "run_id"], kind="stable").index]


def best_runs(runs: pd.DataFrame, metric: str = "max_metric", better: str = "max") -> pd.DataFrame:
    """One run per (point, seed), sorted by them: the learning rate with the best `metric` (see ranked)."""
    if runs.empty:
        return runs
    best = ranked(runs, metric, better).drop_duplicates(["point", "seed"])
    return best.sort_values(["point", "seed"], kind="stable")
