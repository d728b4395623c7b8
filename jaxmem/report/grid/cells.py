"""Grid sweeps without a threshold search: one value of a run metric per grid point, placed on two
axes computed from config fields, as the `[report.heatmap]` table asks (keys in jaxmem.spec.report_tables;
its better and threshold default to the success rule's, see jaxmem.report.success).

Each cell is one (x, y) value: per (grid point, seed) the best learning rate's metric, then the mean
over seeds (and over grid points that share the cell). `n_success` counts the seeds at threshold.

An axis that names a field of text or bool values (e.g. x = "model") is categorical: its cells hold the
values as text, in sorted order.
"""

from __future__ import annotations

import pandas as pd

from jaxmem.persistence.untrained import UNTRAINED
from jaxmem.report.expressions import row_values
from jaxmem.report.runs import best_runs, config_fields, metric_names, untrained_names
from jaxmem.spec.report_tables import HeatmapSpec


def point_cells(runs: pd.DataFrame, spec: HeatmapSpec | None = None, better: str = "max") -> pd.DataFrame:
    """One row per grid point, sorted by point: its config, x and y (with a spec), the metric, every
    final metric and every metric of the untrained model.

    Per (point, seed) the learning rate with the best metric (the spec's, else max_metric by `better`)
    is kept (jaxmem.report.runs.best_runs); values are then averaged over seeds. Columns: point, the
    config fields, [x, y], the metric, final_*, untrained_*, seeds, n_success (with a spec), best_lr (the most common
    best learning rate, the smallest of equally common ones).
    """
    metric, better = (spec.metric, spec.better) if spec is not None else ("max_metric", better)
    best = best_runs(runs, metric, better).copy()
    if spec is not None:
        best["x"], best["y"] = axis_values(spec.x, best), axis_values(spec.y, best)
        best["success_seed"] = spec.reaches(pd.to_numeric(best[metric], errors="coerce"))
    values = list(dict.fromkeys([metric, *metric_names(best), *untrained_names(best)]))
    for column in values:
        best[column] = pd.to_numeric(best[column], errors="coerce")
    grouped = best.groupby("point")
    config = [c for c in config_fields(runs) if c in best]
    first = grouped[config + (["x", "y"] if spec else [])].first()
    table = first.join(grouped[values].mean())
    table["seeds"] = grouped.size()
    if spec is not None:
        table["n_success"] = grouped["success_seed"].sum().astype(int)
    table["best_lr"] = grouped["lr"].agg(lambda s: s.mode().iloc[0])
    return table.reset_index()


def axis_values(expression: str, frame: pd.DataFrame) -> pd.Series:
    """A heatmap axis per row: the expression's numbers, or the values as text where it names a field
    of text or bool values (a categorical axis)."""
    column = frame.get(expression)
    if column is not None and (pd.api.types.is_bool_dtype(column) or not pd.api.types.is_numeric_dtype(column)):
        return column.astype(str)
    return row_values(expression, frame)


def is_categorical(values: pd.Series) -> bool:
    """Whether an axis of cells holds text (axis_values) rather than numbers."""
    return not pd.api.types.is_numeric_dtype(values)


def heatmap_cells(points: pd.DataFrame, spec: HeatmapSpec) -> pd.DataFrame:
    """One row per (x, y): the mean metric, final and untrained metrics over the grid points there, seeds,
    successes."""
    values = [c for c in points.columns if c == spec.metric or c.startswith(("final_", UNTRAINED))]
    grouped = points.groupby(["x", "y"])
    cells = grouped[values].mean()
    cells["points"] = grouped.size()
    cells["seeds"] = grouped["seeds"].sum()
    cells["n_success"] = grouped["n_success"].sum()
    cells = cells.reset_index().sort_values(["x", "y"], kind="stable").reset_index(drop=True)
    cells["reaches"] = spec.reaches(cells[spec.metric])
    return cells


def varying_fields(points: pd.DataFrame) -> list[str]:
    """Config fields that take more than one value over the grid points."""
    return [
        c
        for c in config_fields(points)
        if c not in ("x", "y", "seeds", "n_success", "best_lr") and points[c].astype(str).nunique() > 1
    ]
