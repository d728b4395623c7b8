"""heatmap.png: the metric (or the success rate) over the (x, y) cells in data units, with the measured
success boundary, the phase boundaries of the success-rate levels, the report's overlay lines (e.g. a
paper's hand-drawn boundary) and the threshold on the colour bar. The colour scale is not stretched over a
narrow range of values: one narrower than NARROW of its largest value starts at 0, and the colour bar says
so. A grid with one row (or one column) is drawn as a line against the axis that varies, with the claimed
laws of the relations on that axis (jaxmem.report.laws), on log axes where there is one."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib import patheffects  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from jaxmem.report.axes import data_y_range, readable_log  # noqa: E402
from jaxmem.report.captions import save_captioned  # noqa: E402
from jaxmem.report.laws import Law  # noqa: E402
from jaxmem.report.success import comparison  # noqa: E402
from jaxmem.report.text import number, percent  # noqa: E402
from jaxmem.spec.report_tables import HeatmapSpec  # noqa: E402

ANNOTATE_MAX = 20
LEVEL_COLORS = ("orange", "red", "magenta", "cyan")
STROKE = [patheffects.withStroke(linewidth=3.5, foreground="black")]
NARROW = 0.25  # a colour range narrower than this fraction of its largest |value| is not stretched
THRESHOLD_COLOR = "red"
HEATMAP_SECTIONS = ("Heatmap",)  # the claims heatmap.png shows


def near(threshold: float, lo: float, hi: float) -> bool:
    """Whether a threshold lies close enough to values in [lo, hi] to be drawn with them: within a factor
    2 of positive values, else within their span of them."""
    if lo > 0 and threshold > 0:
        return lo / 2 <= threshold <= 2 * hi
    return lo - (hi - lo) <= threshold <= hi + (hi - lo)


def colour_range(values: np.ndarray, spec: HeatmapSpec) -> tuple[float | None, float | None, str]:
    """vmin, vmax and what the colour bar says of them: the spec's range; else the values' (and the
    threshold's, when near), starting at 0 where that range is narrower than NARROW of its largest value."""
    finite = values[np.isfinite(values)]
    if spec.vmin is not None or spec.vmax is not None or not finite.size:
        return spec.vmin, spec.vmax, ""
    lo, hi = float(finite.min()), float(finite.max())
    low, high = (min(lo, spec.threshold), max(hi, spec.threshold)) if near(spec.threshold, lo, hi) else (lo, hi)
    if high - low >= NARROW * max(abs(low), abs(high)) or low < 0 < high:
        return low, high, ""
    note = f"; values {number(lo, 3)}–{number(hi, 3)}, scale from 0"
    return (0.0, high, note) if low >= 0 else (low, 0.0, note)


def profile_axis(cells: pd.DataFrame) -> str | None:
    """ "x" when the grid has one row and numbers along x (2 or more), "y" for one such column; else None."""
    for along, other in (("x", "y"), ("y", "x")):
        numeric = pd.api.types.is_numeric_dtype(cells[along])
        if numeric and cells[other].nunique() == 1 and cells[along].nunique() >= 2:
            return along
    return None


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
    laws: list[Law] = (),
    about: tuple[str, ...] = HEATMAP_SECTIONS,
) -> Path:
    """Write the heatmap of `spec.metric` (named `label`), or of the success rate with `spec.shade`, to
    `path` and return it; `phases` are the rate levels' boundaries (jaxmem.report.grid.phase). A grid of
    one row or column is drawn by plot_profile, with `laws`; `about`: the sections its caption shows."""
    rate = spec.shade == "success_rate"
    if not rate and profile_axis(cells) is not None:
        return plot_profile(path, spec, cells, title, label, laws, about)
    xs, ys, grid = value_grid(cells, "success_rate" if rate else spec.metric)
    vmin, vmax, note = (0.0, 1.0, "") if rate else colour_range(grid, spec)
    fig, ax = plt.subplots(figsize=(8, 6))
    values = np.ma.masked_invalid(grid)
    x_edges, y_edges = axis_edges(cells, "x", xs), axis_edges(cells, "y", ys)
    mesh = ax.pcolormesh(x_edges, y_edges, values, cmap="viridis", vmin=vmin, vmax=vmax)
    bar = fig.colorbar(mesh, ax=ax, label="success rate over seeds" if rate else label + note)
    low, high = mesh.get_clim()
    threshold = not rate and low <= spec.threshold <= high
    if threshold:
        bar.ax.axhline(spec.threshold, color=THRESHOLD_COLOR, lw=2.5)
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
    if threshold:
        ax.plot([], [], "-", color=THRESHOLD_COLOR, lw=2.5, label=f"threshold {number(spec.threshold)} (colour bar)")
    if found or spec.lines or phases or threshold:
        ax.legend(fontsize="small", loc="upper right", framealpha=0.8)
    fig.tight_layout()
    save_captioned(fig, path, about, dpi=120)
    plt.close(fig)
    return path


def plot_profile(
    path: Path, spec: HeatmapSpec, cells: pd.DataFrame, title: str, label: str, laws: list[Law], about: tuple[str, ...]
) -> Path:
    """A grid of one row (column) as a line: the cells' values (means over seeds) against the axis that
    varies, the claimed `laws` over it and the threshold where it lies near the values; log axes where a
    law is drawn and every value is positive."""
    along = profile_axis(cells)
    other = "y" if along == "x" else "x"
    names = {"x": (spec.x, spec.x_label), "y": (spec.y, spec.y_label)}
    cells = cells.sort_values(along)
    xs, values = cells[along].to_numpy(float), cells[spec.metric].to_numpy(float)
    fig, ax = plt.subplots(figsize=(7, 5))
    finite = values[np.isfinite(values)]
    if laws and xs.min() > 0 and finite.size and finite.min() > 0:
        for axis, scale in ((ax.xaxis, ax.set_xscale), (ax.yaxis, ax.set_yscale)):
            scale("log")
            readable_log(axis)
    ax.plot(xs, values, "o-", color="C0", label="mean over seeds (the heatmap's cell)")
    grid = np.geomspace(xs.min(), xs.max(), 100) if xs.min() > 0 else np.linspace(xs.min(), xs.max(), 100)
    with data_y_range(ax):
        for i, law in enumerate(laws):
            ax.plot(grid, law.curve(names[along][0], grid), "--", color=f"C{i + 1}", lw=1.6, label=law.label())
    if finite.size and near(spec.threshold, finite.min(), finite.max()):
        ax.axhline(spec.threshold, color=THRESHOLD_COLOR, lw=1, ls=":", label=f"threshold {number(spec.threshold)}")
    ax.set_xlabel(names[along][1])
    ax.set_ylabel(label)
    ax.set_title(f"{title}\n({names[other][1]} = {number(cells[other].iloc[0])})", fontsize="medium")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize="small")
    fig.tight_layout()
    save_captioned(fig, path, about, dpi=120)
    plt.close(fig)
    return path
