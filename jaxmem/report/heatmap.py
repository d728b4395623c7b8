"""Grid sweeps without a threshold search: one value of a run metric per grid point, placed on two
axes computed from config fields, and the `[report.heatmap]` options that drive it.

`[report.heatmap]` keys (all but x and y optional):

    x, y        expressions over config fields (jaxmem.expr), e.g. x = "d*d_h*H", y = "d*m"
    x_label, y_label   axis names in the plot and report.md (default: the expressions)
    metric      the run column shown (default "max_metric", the best value of the train metric;
                any runs.csv column works, e.g. "final_exact_accuracy")
    better      "max" (default) or "min": how the best learning rate is chosen and the threshold read
    threshold   the value counted as success (default: [train] early_stop, else 0.99)
    vmin, vmax  colour range (default: the data's range)
    annotate    write each cell's value in the plot (default: when the grid has at most 20 x 20 cells)
    lines       overlay lines, a list of tables {x, y, label, color, style}: one of x, y is a range
                [lo, hi] and the other a number or an expression in that variable, e.g.
                {x = [1280, 4700], y = "2300 - x/2"} or {x = 1280, y = [1660, 4300]}

Each cell is one (x, y) value: per (grid point, seed) the best learning rate's metric, then the mean
over seeds (and over grid points that share the cell). `n_success` counts the seeds at threshold.
"""

from __future__ import annotations

import dataclasses
import numpy as np
import pandas as pd

from jaxmem.spec.expr import evaluate, names_in
from jaxmem.report.final_metrics import best_runs, metric_names
from jaxmem.persistence.store import RUN_COLUMNS

DEFAULT_THRESHOLD = 0.99
LINE_POINTS = 100


@dataclasses.dataclass(frozen=True)
class Line:
    """An overlay line: its points in plot units and its legend label."""

    x: np.ndarray
    y: np.ndarray
    label: str
    color: str = "red"
    style: str = "-"


@dataclasses.dataclass(frozen=True)
class HeatmapSpec:
    x: str
    y: str
    x_label: str
    y_label: str
    metric: str = "max_metric"
    better: str = "max"
    threshold: float = DEFAULT_THRESHOLD
    vmin: float | None = None
    vmax: float | None = None
    annotate: bool | None = None
    lines: tuple[Line, ...] = ()

    def reaches(self, values) -> np.ndarray:
        """Whether each value reaches the threshold (NaN never does)."""
        v = np.asarray(values, dtype=float)
        with np.errstate(invalid="ignore"):
            return np.where(np.isnan(v), False, v >= self.threshold if self.better == "max" else v <= self.threshold)


def heatmap_spec(report_spec: dict, train_spec: dict | None = None) -> HeatmapSpec | None:
    """The parsed `[report.heatmap]` table, or None when the report has none."""
    table = report_spec.get("heatmap")
    if table is None:
        return None
    if not isinstance(table, dict) or "x" not in table or "y" not in table:
        raise ValueError("report.heatmap must be a table with x and y expressions")
    unknown = set(table) - {f.name for f in dataclasses.fields(HeatmapSpec)}
    if unknown:
        raise ValueError(f"report.heatmap: unknown keys {sorted(unknown)}")
    for axis in ("x", "y"):
        names_in(str(table[axis]))  # parse errors surface here, before any data is read
    threshold = table.get("threshold", (train_spec or {}).get("early_stop", DEFAULT_THRESHOLD))
    better = table.get("better", "max")
    if better not in ("max", "min"):
        raise ValueError(f"report.heatmap.better must be 'max' or 'min', got {better!r}")
    return HeatmapSpec(
        x=str(table["x"]),
        y=str(table["y"]),
        x_label=str(table.get("x_label", table["x"])),
        y_label=str(table.get("y_label", table["y"])),
        metric=str(table.get("metric", "max_metric")),
        better=better,
        threshold=float(threshold if threshold is not None else DEFAULT_THRESHOLD),
        vmin=table.get("vmin"),
        vmax=table.get("vmax"),
        annotate=table.get("annotate"),
        lines=tuple(overlay_line(i, line) for i, line in enumerate(table.get("lines", []))),
    )


def overlay_line(index: int, line: dict) -> Line:
    """One `lines` entry as plot points: the range axis sampled evenly, the other evaluated along it."""
    where = f"report.heatmap.lines[{index}]"
    if not isinstance(line, dict) or "x" not in line or "y" not in line:
        raise ValueError(f"{where}: needs x and y")
    ranges = [axis for axis in ("x", "y") if isinstance(line[axis], list)]
    if len(ranges) != 1 or len(line[ranges[0]]) != 2:
        raise ValueError(f"{where}: exactly one of x, y must be a range [lo, hi]")
    free = ranges[0]
    other = "y" if free == "x" else "x"
    lo, hi = (float(v) for v in line[free])
    along = np.linspace(lo, hi, LINE_POINTS)
    across = np.array([float(evaluate(line[other], {free: float(v)})) for v in along])
    x, y = (along, across) if free == "x" else (across, along)
    label = line.get("label", f"{other} = {line[other]}")
    return Line(x=x, y=y, label=str(label), color=str(line.get("color", "red")), style=str(line.get("style", "-")))


def axis_values(expression: str, runs: pd.DataFrame) -> pd.Series:
    """The expression evaluated on each run's numeric config fields."""
    numeric = [c for c in names_in(expression) if c in runs]
    values = []
    for row in runs[numeric].to_dict("records"):
        names = {k: v.item() if hasattr(v, "item") else v for k, v in row.items()}
        values.append(float(evaluate(expression, names)))
    return pd.Series(values, index=runs.index, dtype=float)


def point_cells(runs: pd.DataFrame, spec: HeatmapSpec | None = None, metric: str = "max_metric") -> pd.DataFrame:
    """One row per grid point: its config, x and y (with a spec), the metric and every final metric.

    Per (point, seed) the learning rate with the best metric is kept; values are then averaged over
    seeds. Columns: point, the config fields, [x, y], `metric`, final_*, seeds, n_success (with a
    spec), best_lr (the most common best learning rate).
    """
    if spec is not None:
        metric = spec.metric
    best = best_runs(runs, metric, spec.better if spec else "max").copy()
    if spec is not None:
        best["x"], best["y"] = axis_values(spec.x, best), axis_values(spec.y, best)
        best["success_seed"] = spec.reaches(pd.to_numeric(best[metric], errors="coerce"))
    values = list(dict.fromkeys([metric, *metric_names(best)]))
    for column in values:
        best[column] = pd.to_numeric(best[column], errors="coerce")
    grouped = best.groupby("point", sort=False)
    config = [c for c in config_fields(runs) if c in best]
    first = grouped[config + (["x", "y"] if spec else [])].first()
    table = first.join(grouped[values].mean())
    table["seeds"] = grouped.size()
    if spec is not None:
        table["n_success"] = grouped["success_seed"].sum().astype(int)
    table["best_lr"] = grouped["lr"].agg(lambda s: s.mode().iloc[0])
    return table.reset_index()


def heatmap_cells(points: pd.DataFrame, spec: HeatmapSpec) -> pd.DataFrame:
    """One row per (x, y): the mean metric and final metrics over the grid points there, seeds, successes."""
    values = [c for c in points.columns if c == spec.metric or c.startswith("final_")]
    grouped = points.groupby(["x", "y"])
    cells = grouped[values].mean()
    cells["points"] = grouped.size()
    cells["seeds"] = grouped["seeds"].sum()
    cells["n_success"] = grouped["n_success"].sum()
    cells = cells.reset_index().sort_values(["x", "y"], kind="stable").reset_index(drop=True)
    cells["reaches"] = spec.reaches(cells[spec.metric])
    return cells


RUN_FIELDS = frozenset(RUN_COLUMNS) | {"config"}


def config_fields(runs: pd.DataFrame) -> list[str]:
    """The expanded config columns of a runs table (everything that is not a run result)."""
    return [c for c in runs.columns if c not in RUN_FIELDS and not c.startswith("final_")]


def varying_fields(points: pd.DataFrame) -> list[str]:
    """Config fields that take more than one value over the grid points."""
    return [
        c
        for c in config_fields(points)
        if c not in ("x", "y", "seeds", "n_success", "best_lr") and points[c].astype(str).nunique() > 1
    ]
