"""capacity.png: capacity against x, log-log, one curve per group (the mean over the answered searches,
shaded between their min and max, each search a dot, all three named in the legend), the fitted law
and the paper's guide line drawn over the data's range of x only, on readable log axes."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

from jaxmem.report.axes import readable_log  # noqa: E402
from jaxmem.report.capacity.fit import apply_fit  # noqa: E402
from jaxmem.report.capacity.points import point_table  # noqa: E402
from jaxmem.report.capacity.searches import group_columns, usable_mask, x_column  # noqa: E402
from jaxmem.report.files import save_figure  # noqa: E402
from jaxmem.report.text import group_labels, number  # noqa: E402
from jaxmem.spec.expr import evaluate  # noqa: E402
from jaxmem.spec.report_tables import ReportSpec  # noqa: E402

GRID_POINTS = 100
X_LABELS = {"params": "parameters (the experiment's count)"}


def within(x: np.ndarray, y: np.ndarray, lo: float, hi: float) -> tuple[np.ndarray, np.ndarray]:
    """The points of a curve whose x lies in [lo, hi] (a guide drawn over the data only)."""
    keep = (x >= lo) & (x <= hi)
    return x[keep], y[keep]


def seed_legend(ax) -> None:
    """The legend: the curves, then what a dot and a band are."""
    handles, _ = ax.get_legend_handles_labels()
    handles += [
        Line2D([], [], ls="", marker="o", ms=4, color="0.4", label="one search (seed)"),
        Patch(color="0.4", alpha=0.2, label="min–max over seeds"),
    ]
    ax.legend(handles=handles, fontsize="small")


def guide_curve(expression: str, variable: str, lo: float, hi: float) -> tuple[np.ndarray, np.ndarray]:
    """(x, variable) along the guide x = expression(variable), variable on a geometric grid [lo, hi]."""
    values = np.geomspace(lo, hi, GRID_POINTS)
    return np.array([float(evaluate(expression, {variable: float(v)})) for v in values]), values


def fit_curve(summary: dict, lo: float, hi: float) -> tuple[np.ndarray, np.ndarray]:
    """(x, variable) along the fitted law fit(variable) = e^intercept · x^slope, variable in [lo, hi]; the
    points whose x is finite (none for a flat law: slope 0 gives no x for a variable)."""
    values = np.geomspace(lo, hi, GRID_POINTS)
    if not summary["slope"]:
        return np.array([]), np.array([])
    fitted = apply_fit(summary["fit"], summary["variable"], values)
    keep = fitted > 0
    with np.errstate(over="ignore"):  # a nearly flat law sends x past the float range: not drawn
        x = (fitted[keep] / np.exp(summary["intercept"])) ** (1.0 / summary["slope"])
    finite = np.isfinite(x)
    return x[finite], values[keep][finite]


def plot_capacity(path: Path, report_spec: ReportSpec, searches: pd.DataFrame, summary: dict) -> Path:
    """Write the log-log capacity plot to `path` and return it."""
    x = x_column(report_spec, searches)
    group_by = group_columns(report_spec, searches)
    variable = summary["variable"]
    rows = searches[usable_mask(searches, x) & (pd.to_numeric(searches[x], errors="coerce") > 0)]  # log axes
    table = point_table(searches, x)
    table = table[(table["n_seeds"] > 0) & (pd.to_numeric(table[x], errors="coerce") > 0)]
    table = table.sort_values([x, "point"], kind="stable")
    table_labels, row_labels = group_labels(table, group_by), group_labels(rows, group_by)

    fig, ax = plt.subplots(figsize=(7, 5))
    for i, label in enumerate(dict.fromkeys(table_labels)):
        color = f"C{i % 10}"
        group = table[table_labels == label]
        seeds = rows[row_labels == label]
        name = label if group_by else "mean over seeds"
        ax.fill_between(group[x], group["capacity_min"], group["capacity_max"], color=color, alpha=0.2, lw=0)
        ax.plot(group[x], group["capacity_mean"], "-", color=color, label=name)
        ax.scatter(seeds[x], seeds["capacity"], s=14, color=color, alpha=0.7, lw=0)

    lo, hi = rows["capacity"].min(), rows["capacity"].max()
    x_lo, x_hi = rows[x].min(), rows[x].max()
    if np.isfinite(summary["slope"]) and summary["slope"] != 0:
        fx, fy = within(*fit_curve(summary, lo / 2, hi * 2), x_lo, x_hi)
        ax.plot(fx, fy, "--", color="0.35", zorder=3, label=f"fit: slope {number(summary['slope'], 3)}")
    guide = report_spec.guide
    if guide is not None:
        gx, gy = within(*guide_curve(guide.expr, variable, lo / 4, hi * 4), x_lo, x_hi)
        ax.plot(gx, gy, ":", color="black", label=guide.label)

    ax.set_xscale("log")
    ax.set_yscale("log")
    readable_log(ax.xaxis)
    readable_log(ax.yaxis)
    ax.set_xlabel(report_spec.x_label or X_LABELS.get(x, x))
    ax.set_ylabel(f"capacity: {variable} at the success threshold")
    ax.set_title(report_spec.title or "Capacity scaling")
    ax.grid(True, which="both", alpha=0.3)
    seed_legend(ax)
    fig.tight_layout()
    save_figure(fig, path, dpi=120)
    plt.close(fig)
    return path
