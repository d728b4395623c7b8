"""heatmap.png: the metric (or the success rate) over the (x, y) cells in data units, with the measured
success boundary, the phase boundaries of the success-rate levels and the report's overlay lines (e.g. a
paper's hand-drawn boundary)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib import patheffects  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from jaxmem.report.files import save_figure  # noqa: E402
from jaxmem.report.success import comparison  # noqa: E402
from jaxmem.report.text import number, percent  # noqa: E402
from jaxmem.spec.report_tables import HeatmapSpec  # noqa: E402

ANNOTATE_MAX = 20
LEVEL_COLORS = ("orange", "red", "magenta", "cyan")
STROKE = [patheffects.withStroke(linewidth=3.5, foreground="black")]


def cell_edges(values) -> np.ndarray:
    """Edges around sorted distinct centres: midpoints inside, half a gap beyond each end (not below 0
    when every centre is ≥ 0)."""
    v = np.unique(np.asarray(values, dtype=float))
    if v.size == 1:
        half = abs(v[0]) / 2 or 0.5
        edges = np.array([v[0] - half, v[0] + half])
    else:
        mids = (v[1:] + v[:-1]) / 2
        edges = np.concatenate([[v[0] - (mids[0] - v[0])], mids, [v[-1] + (v[-1] - mids[-1])]])
    if v[0] >= 0:
        edges[0] = max(edges[0], 0.0)
    return edges


def boundary_path(boundary: list[dict], xs: np.ndarray, ys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A staircase along the lower edge of each column's boundary cell; gaps where a column has none."""
    x_edges, y_edges = cell_edges(xs), cell_edges(ys)
    px, py = [], []
    for row in boundary:
        i = int(np.searchsorted(xs, row["x"]))
        if row["y"] is None:
            px.append(np.nan)
            py.append(np.nan)
            continue
        lower = y_edges[int(np.searchsorted(ys, row["y"]))]
        px += [x_edges[i], x_edges[i + 1]]
        py += [lower, lower]
    return np.array(px), np.array(py)


def value_grid(cells: pd.DataFrame, column: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(xs, ys, grid[y, x]) of `column`, NaN where the grid has no cell; a categorical axis's values
    (text) as positions 0, 1, ... (axis_positions)."""
    grid = cells.pivot(index="y", columns="x", values=column).sort_index().sort_index(axis=1)
    return axis_positions(grid.columns)[0], axis_positions(grid.index)[0], grid.to_numpy(float)


def axis_positions(values: pd.Index) -> tuple[np.ndarray, list[str] | None]:
    """Sorted axis values as numbers, with None; text values as 0, 1, ... with their labels."""
    if pd.api.types.is_numeric_dtype(values):
        return values.to_numpy(float), None
    return np.arange(len(values), dtype=float), [str(v) for v in values]


def axis_edges(cells: pd.DataFrame, axis: str, centres: np.ndarray) -> np.ndarray:
    """The cell edges along one axis: cell_edges of numbers, ±0.5 around the positions of text values."""
    if pd.api.types.is_numeric_dtype(cells[axis]):
        return cell_edges(centres)
    return np.arange(len(centres) + 1) - 0.5


def plot_heatmap(
    path: Path,
    spec: HeatmapSpec,
    cells: pd.DataFrame,
    boundary: list[dict],
    title: str,
    label: str,
    phases: dict[float, list[dict]] | None = None,
) -> Path:
    """Write the heatmap of `spec.metric` (named `label`), or of the success rate with `spec.shade`, to
    `path` and return it; `phases` are the rate levels' boundaries (jaxmem.report.grid.phase)."""
    rate = spec.shade == "success_rate"
    xs, ys, grid = value_grid(cells, "success_rate" if rate else spec.metric)
    vmin, vmax = (0.0, 1.0) if rate else (spec.vmin, spec.vmax)
    fig, ax = plt.subplots(figsize=(8, 6))
    values = np.ma.masked_invalid(grid)
    x_edges, y_edges = axis_edges(cells, "x", xs), axis_edges(cells, "y", ys)
    mesh = ax.pcolormesh(x_edges, y_edges, values, cmap="viridis", vmin=vmin, vmax=vmax)
    fig.colorbar(mesh, ax=ax, label="success rate over seeds" if rate else label)
    annotate = spec.annotate if spec.annotate is not None else (len(xs) <= ANNOTATE_MAX and len(ys) <= ANNOTATE_MAX)
    if annotate:
        lo, hi = mesh.get_clim()
        for j, y in enumerate(ys):
            for i, x in enumerate(xs):
                if np.isfinite(grid[j, i]):
                    light = (grid[j, i] - lo) < 0.5 * (hi - lo) if hi > lo else True
                    color = "white" if light else "black"
                    ax.text(x, y, number(grid[j, i], 2), ha="center", va="center", fontsize=7, color=color)
    found = any(r["y"] is not None for r in boundary)
    if found:
        bx, by = boundary_path(boundary, xs, ys)
        ax.plot(
            bx,
            by,
            "--",
            color="white",
            lw=2,
            path_effects=STROKE,
            label=f"measured: {label} {comparison(spec.better, spec.threshold)} above",
        )
    for i, (level, rows) in enumerate((phases or {}).items()):
        px, py = boundary_path(rows, xs, ys)
        color = LEVEL_COLORS[i % len(LEVEL_COLORS)]
        ax.plot(px, py, "-", color=color, lw=2, path_effects=STROKE, label=f"success rate ≥ {percent(level)} above")
    for line in spec.lines:
        ax.plot(line.x, line.y, line.style, color=line.color, lw=2, label=line.label)
    for axis, values in ((ax.xaxis, cells["x"]), (ax.yaxis, cells["y"])):
        positions, names = axis_positions(pd.Index(sorted(values.unique())))
        if names is not None:
            axis.set_ticks(positions, names)
    ax.set_xlabel(spec.x_label)
    ax.set_ylabel(spec.y_label)
    ax.set_title(title)
    if found or spec.lines or phases:
        ax.legend(fontsize="small", loc="upper right", framealpha=0.8)
    fig.tight_layout()
    save_figure(fig, path, dpi=120)
    plt.close(fig)
    return path
