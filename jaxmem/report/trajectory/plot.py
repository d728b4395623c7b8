"""trajectory.png: chosen metrics against step or time, one panel per group, with reference lines,
shaded stages (named in the legend, so no label sits on a curve or a reference line), the measured
crossings marked and the predicted rates drawn over the steps they were fitted on
(jaxmem.report.trajectory.guides); the legend names every mark: series, metrics, seeds, stages,
crossings and predictions."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

from jaxmem.report.axes import along_axis, readable_log  # noqa: E402

from jaxmem.report.captions import save_captioned  # noqa: E402
from jaxmem.report.text import number  # noqa: E402
from jaxmem.report.trajectory.guides import Guide  # noqa: E402
from jaxmem.spec.report_tables import TrajectorySpec  # noqa: E402

STYLES = ("-", "--", ":", "-.")
STAGE_COLORS = ("#cfe2f3", "#fce5cd", "#d9ead3", "#ead1dc", "#fff2cc", "#d0e0e3")
MAX_CYCLE = 10
GUIDE_STYLE = (0, (1, 1.2))  # dotted: a predicted rate
MAX_COLUMNS = 3


@dataclasses.dataclass(frozen=True)
class Level:
    """A horizontal line of one panel: its value, legend label, colour and style."""

    y: float
    label: str
    color: str = "0.3"
    style: str = "--"


def series_colors(series: list[str]) -> dict[str, object]:
    """The default colour cycle for a few series, a sequential colormap (in the given order) for many."""
    if len(series) <= MAX_CYCLE:
        return {s: f"C{i}" for i, s in enumerate(series)}
    cmap = plt.get_cmap("viridis")
    return {s: cmap(i / (len(series) - 1)) for i, s in enumerate(series)}


def plot_trajectories(
    path: Path,
    frame: pd.DataFrame,
    spec: TrajectorySpec,
    metrics: list[str],
    panels: list[str],
    levels: dict[str, list[Level]],
    marks: pd.DataFrame,
    labels: dict[str, str],
    log_y_panels: frozenset = frozenset(),
    titles: dict[str, str] | None = None,
    guides: dict[str, list[Guide]] | None = None,
) -> Path:
    """Write the curves of `frame` (columns panel, series, run_id, spec.x and the metrics; series are
    coloured in the order they first appear) to `path`.

    `levels`: per panel, its reference lines; `marks`: crossings to mark (panel, series, metric, x,
    level); `labels`: title, x_label, y_label, and per panel its y label; `log_y_panels`: panels drawn
    on a log y axis too; `titles`: per panel its title in words (default: the panel's name, none for
    the one panel "all"); `guides`: per panel its predicted-rate lines.
    """
    titles = titles if titles is not None else {p: "" if p == "all" else p for p in panels}
    guides = guides or {}
    x = spec.x
    log_x = spec.x_scale == "log"
    series = list(dict.fromkeys(frame["series"]))  # in the frame's order
    colors = series_colors(series)
    by_metric = len(series) == 1
    ncols = min(len(panels), MAX_COLUMNS)
    nrows = math.ceil(len(panels) / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(5.8 * ncols, 4.3 * nrows), squeeze=False)
    for ax, panel in zip(axes.flat, panels):
        data = frame[(frame["panel"] == panel) & frame[x].notna()]
        if log_x:
            data = data[data[x] > 0]
        for i, stage in enumerate(spec.stages):
            ax.axvspan(stage.start, stage.end, color=stage_color(stage, i), alpha=0.5, lw=0, zorder=0)
        for name in dict.fromkeys(data["series"]):
            part = data[data["series"] == name]
            for m, metric in enumerate(metrics):
                color = f"C{m % MAX_CYCLE}" if by_metric else colors[name]
                style = "-" if by_metric else STYLES[m % len(STYLES)]
                if spec.seeds == "band":
                    stats = part.groupby(x)[metric].agg(["mean", "min", "max"])
                    ax.fill_between(stats.index, stats["min"], stats["max"], color=color, alpha=0.2, lw=0)
                    ax.plot(stats.index, stats["mean"], style, color=color, lw=1.5)
                else:
                    for _, curve in part.groupby("run_id", sort=False):
                        ax.plot(curve[x], curve[metric], style, color=color, lw=0.9, alpha=0.8)
        for guide in guides.get(panel, []):
            ax.plot(guide.x, guide.y, ls=GUIDE_STYLE, color="black", lw=1.4, zorder=3)
        mine = marks[(marks["panel"] == panel) & np.isfinite(marks["x"].astype(float))] if len(marks) else marks
        for mark in mine.to_dict("records"):
            color = f"C{metrics.index(mark['metric']) % MAX_CYCLE}" if by_metric else colors[mark["series"]]
            ax.plot(mark["x"], mark["level"], "o", mfc="none", color=color, ms=4, zorder=4)
        for level in levels.get(panel, []):
            ax.axhline(level.y, ls=level.style, color=level.color, lw=1)
            ax.text(
                0.995,
                level.y,
                f"{level.label} = {number(level.y)}",
                transform=ax.get_yaxis_transform(),
                ha="right",
                va="top",
                fontsize=7,
                color=level.color,
            )
        if log_x:
            ax.set_xscale("log")
            readable_log(ax.xaxis)
        if spec.y_scale == "log" or panel in log_y_panels:
            ax.set_yscale("log")
        width, height = ax.get_position().width * fig.get_figwidth(), ax.get_position().height * fig.get_figheight()
        ax.set_xlabel(along_axis(labels["x_label"], width))
        ax.set_ylabel(along_axis(labels.get(panel, labels["y_label"]), height))
        if titles.get(panel):
            ax.set_title(titles[panel], fontsize="medium")
        ax.grid(True, which="both", alpha=0.3)
    for ax in list(axes.flat)[len(panels) :]:
        ax.set_visible(False)
    fig.suptitle(labels["title"])
    fig.tight_layout()
    handles = legend_handles(series, metrics, colors, by_metric) + seed_handles(spec.seeds)
    handles += stage_handles(spec) + mark_handles(len(marks) > 0, guides)
    if len(handles) > 1 or not by_metric:
        fig.legend(handles=handles, loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize="small", frameon=False)
    save_captioned(fig, path, ("Trajectories",), dpi=120, bbox_inches="tight")
    plt.close(fig)
    return path


def stage_color(stage, index: int) -> str:
    return stage.color or STAGE_COLORS[index % len(STAGE_COLORS)]


def seed_handles(seeds: str) -> list:
    """What a band means, where the seeds are drawn as one (line: their mean); else what a line is."""
    if seeds == "band":
        return [Patch(color="0.4", alpha=0.2, label="min–max over seeds (line: mean)")]
    return [Line2D([], [], color="0.4", lw=0.9, label="one line per run (seed)")]


def stage_handles(spec: TrajectorySpec) -> list:
    """The stages by colour and label (the spans carry no text)."""
    return [
        Patch(color=stage_color(s, i), alpha=0.5, label=f"{s.label} ({number(s.start)}–{number(s.end)})")
        for i, s in enumerate(spec.stages)
        if s.label
    ]


def mark_handles(crossings: bool, guides: dict[str, list[Guide]]) -> list:
    """The crossing marks and one entry per predicted rate."""
    handles = [Line2D([], [], ls="", marker="o", mfc="none", color="0.3", ms=4, label="crossing (one run)")]
    labels = dict.fromkeys(g.label for lines in guides.values() for g in lines)
    guide_handles = [Line2D([], [], ls=GUIDE_STYLE, color="black", lw=1.4, label=label) for label in labels]
    return (handles if crossings else []) + guide_handles


def legend_handles(series: list[str], metrics: list[str], colors: dict, by_metric: bool) -> list:
    """Metrics by colour when there is one series; else series by colour and metrics by line style."""
    if by_metric:
        return [Line2D([], [], color=f"C{m % MAX_CYCLE}", label=metric) for m, metric in enumerate(metrics)]
    handles = [Line2D([], [], color=colors[s], label=s) for s in series]
    if len(metrics) > 1:
        handles += [
            Line2D([], [], color="black", ls=STYLES[m % len(STYLES)], label=metric) for m, metric in enumerate(metrics)
        ]
    return handles
