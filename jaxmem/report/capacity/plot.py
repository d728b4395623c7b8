"""capacity.png: the fitted quantity (the spec's `fit` of the capacity, e.g. facts = size·size; else the
capacity) against x, log-log, one curve per group (the mean over the answered searches, shaded between their
min and max, each search a dot, a search censored outside its range a triangle at its last probed value),
the claim's law (a relation's fit, jaxmem.report.laws) or else the power fit, and the paper's guide line,
drawn over the data's range of x only, on readable log axes; every mark named in the legend."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

from jaxmem.report.axes import data_y_range, readable_log  # noqa: E402
from jaxmem.report.capacity.censored import ordered  # noqa: E402
from jaxmem.report.capacity.fit import apply_fit  # noqa: E402
from jaxmem.report.capacity.points import point_table  # noqa: E402
from jaxmem.report.capacity.searches import censored_side, group_columns, usable_mask, x_column  # noqa: E402
from jaxmem.report.captions import save_captioned  # noqa: E402
from jaxmem.report.laws import Law  # noqa: E402
from jaxmem.report.text import group_labels, rounded  # noqa: E402
from jaxmem.spec.expr import evaluate  # noqa: E402
from jaxmem.spec.report_tables import ReportSpec  # noqa: E402

GRID_POINTS = 100
X_LABELS = {"params": "parameters (the experiment's count)"}
CENSORED_MARKERS = {"above": "^", "below": "v"}  # drawn at the last value probed on that side
CAPACITY_SECTIONS = ("Fitted slope", "Capacity", "Linear fits")  # the claims capacity.png shows


def within(x: np.ndarray, y: np.ndarray, lo: float, hi: float) -> tuple[np.ndarray, np.ndarray]:
    """The points of a curve whose x lies in [lo, hi] (a guide drawn over the data only)."""
    keep = (x >= lo) & (x <= hi)
    return x[keep], y[keep]


def seed_legend(ax, censored: set[str]) -> None:
    """The legend: the curves, then what a dot, a band and a triangle (each side drawn) are."""
    handles, _ = ax.get_legend_handles_labels()
    handles += [
        Line2D([], [], ls="", marker="o", ms=4, color="0.4", label="one search (seed)"),
        Patch(color="0.4", alpha=0.2, label="min–max over answered searches"),
    ]
    handles += [
        Line2D([], [], ls="", marker=marker, mfc="none", color="0.3", label=f"search censored {side} its range")
        for side, marker in CENSORED_MARKERS.items()
        if side in censored
    ]
    ax.legend(handles=handles, fontsize="small")


def guide_curve(expression: str, variable: str, fit: str | None, lo: float, hi: float) -> tuple[np.ndarray, np.ndarray]:
    """(x, fit(variable)) along the guide x = expression(variable), variable on a geometric grid [lo, hi]."""
    values = np.geomspace(lo, hi, GRID_POINTS)
    x = np.array([float(evaluate(expression, {variable: float(v)})) for v in values])
    return x, apply_fit(fit, variable, values)


def power_label(summary: dict) -> str:
    """e.g. "power fit: slope 0.74 (95 % CI [0.61, 0.88])", the slope to the precision of its interval."""
    slope, low, high = summary["slope"], summary["slope_lo"], summary["slope_hi"]
    interval = f" (95 % CI [{rounded(low, low, high)}, {rounded(high, low, high)}])" if np.isfinite(low) else ""
    return f"power fit: slope {rounded(slope, low, high)}{interval}"


def transformed(fit: str | None, variable: str) -> bool:
    """Whether the spec's fit is a function of the capacity other than the capacity itself."""
    return fit is not None and fit.replace(" ", "") != variable


def plotted_names(fit: str | None, variable: str) -> set[str]:
    """The spellings of the plotted quantity in a relation's y: the fit expression, or the capacity."""
    return {fit} if transformed(fit, variable) else {"capacity", variable}


def y_label(fit: str | None, variable: str) -> str:
    """The plotted quantity: the fit expression of the capacity, or the capacity itself."""
    if not transformed(fit, variable):
        return f"capacity: {variable} at the success threshold"
    return f"{fit.replace('**', '^').replace('*', '·')} ({variable} at the success threshold)"


def censored_marks(
    ax, searches: pd.DataFrame, labels: pd.Series, x: str, fit: str | None, variable: str, colors: dict
) -> None:
    """A search censored outside its range: a triangle (▲ above, ▼ below) at its last probed value, in the
    colour of its group (`labels`: each search's group label)."""
    side = censored_side(searches)
    values = ordered(searches)["value"].reindex(searches.index)
    for name, marker in CENSORED_MARKERS.items():
        part = searches[(side == name) & values.notna() & (pd.to_numeric(searches[x], errors="coerce") > 0)]
        if part.empty:
            continue
        y = apply_fit(fit, variable, values[part.index])
        color = [colors.get(label, "0.3") for label in labels[part.index]]
        ax.scatter(part[x], y, marker=marker, s=36, facecolors="none", edgecolors=color, lw=1.2, zorder=4)


def plot_capacity(
    path: Path,
    report_spec: ReportSpec,
    searches: pd.DataFrame,
    summary: dict,
    laws: list[Law] = (),
    about: tuple[str, ...] = CAPACITY_SECTIONS,
) -> Path:
    """Write the log-log capacity plot to `path` and return it; `laws`: the claims' laws to draw
    (jaxmem.report.laws.figure_laws), in place of the power fit where that states no expected slope;
    `about`: the sections whose claims its caption holds (jaxmem.report.captions)."""
    x = x_column(report_spec, searches)
    group_by = group_columns(report_spec, searches)
    variable, fit = summary["variable"], report_spec.fit
    labels = group_labels(searches, group_by)
    rows = searches[usable_mask(searches, x) & (pd.to_numeric(searches[x], errors="coerce") > 0)]  # log axes
    table = point_table(searches, x)
    table = table[(table["n_seeds"] > 0) & (pd.to_numeric(table[x], errors="coerce") > 0)]
    table = table.sort_values([x, "point"], kind="stable")
    table_labels = group_labels(table, group_by)

    fig, ax = plt.subplots(figsize=(7, 5))
    for axis, scale in ((ax.xaxis, ax.set_xscale), (ax.yaxis, ax.set_yscale)):
        scale("log")
        readable_log(axis)
    colors = {label: f"C{i % 10}" for i, label in enumerate(dict.fromkeys(table_labels))}
    for label, color in colors.items():
        group = table[table_labels == label]
        seeds = rows[labels[rows.index] == label]
        name = label if group_by else "mean over answered searches"
        low, high = (apply_fit(fit, variable, group[c]) for c in ("capacity_min", "capacity_max"))
        ax.fill_between(group[x], low, high, color=color, alpha=0.2, lw=0)
        ax.plot(group[x], apply_fit(fit, variable, group["capacity_mean"]), "-", color=color, label=name)
        ax.scatter(seeds[x], apply_fit(fit, variable, seeds["capacity"]), s=14, color=color, alpha=0.7, lw=0)
    censored_marks(ax, searches, labels, x, fit, variable, colors)

    lo, hi = rows["capacity"].min(), rows["capacity"].max()
    x_lo, x_hi = rows[x].min(), rows[x].max()
    grid = np.geomspace(x_lo, x_hi, GRID_POINTS) if x_hi > x_lo else np.array([])
    with data_y_range(ax):
        for law in laws:
            ax.plot(grid, law.curve(x, grid), "--", color="black", lw=1.6, zorder=3, label=law.label())
    if np.isfinite(summary["slope"]) and grid.size and (not laws or summary["expect_slope"] is not None):
        line = np.exp(summary["intercept"]) * grid ** summary["slope"]
        ax.plot(grid, line, "--", color="0.35", lw=1.6, zorder=3, label=power_label(summary))
    guide = report_spec.guide
    if guide is not None:
        gx, gy = within(*guide_curve(guide.expr, variable, fit, lo / 4, hi * 4), x_lo, x_hi)
        ax.plot(gx, gy, ":", color="black", label=guide.label)

    ax.set_xlabel(report_spec.x_label or X_LABELS.get(x, x))
    ax.set_ylabel(y_label(fit, variable))
    ax.set_title(report_spec.title or "Capacity scaling")
    ax.grid(True, which="both", alpha=0.3)
    seed_legend(ax, censored=set(censored_side(searches)) - {""})
    fig.tight_layout()
    save_captioned(fig, path, about, dpi=120)
    plt.close(fig)
    return path
