"""success_map.png: the probes of a search sweep on (x, searched value), coloured by their success rate
over the seeds that probed them (sized by how many did), each search's answer as a black tick just right
of its x and the median answer per x as a line; one panel per group."""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402

from jaxmem.report.capacity.plot import CAPACITY_SECTIONS  # noqa: E402
from jaxmem.report.captions import save_captioned  # noqa: E402
from jaxmem.spec.report_tables import ReportSpec  # noqa: E402

COLUMNS = 3
OFFSET = 0.12  # the answers sit this fraction of the smallest x spacing right of the probes


def offset(xs) -> float:
    """How far right of its probes an x's answers are drawn."""
    distinct = np.unique(np.asarray(xs, dtype=float))
    gaps = np.diff(distinct)
    return OFFSET * (gaps.min() if gaps.size else abs(distinct[0]) or 1.0)


def plot_success_map(
    path: Path, report_spec: ReportSpec, table: pd.DataFrame, found: pd.DataFrame, variable: str, x_label: str
) -> Path:
    """Write the map of `table` (jaxmem.report.capacity.success_map.probe_table) with the answers `found`."""
    groups = list(dict.fromkeys(table["group"]))
    columns = min(COLUMNS, len(groups))
    rows = math.ceil(len(groups) / columns)
    fig, axes = plt.subplots(rows, columns, figsize=(5 * columns, 4 * rows), squeeze=False)
    for ax, group in zip(axes.flat, groups):
        probes, mine = table[table["group"] == group], found[found["group"] == group].dropna(subset=["capacity"])
        points = ax.scatter(
            probes["x"],
            probes["value"],
            c=probes["rate"],
            s=18 + 14 * probes["seeds"],
            cmap="RdYlGn",
            vmin=0,
            vmax=1,
            edgecolors="0.3",
            linewidths=0.5,
            zorder=2,
        )
        shift = offset(table["x"])
        ax.scatter(
            mine["x"] + shift,
            mine["capacity"],
            marker="_",
            s=160,
            color="black",
            lw=1.5,
            label="one search's answer (seed)",
        )
        median = mine.groupby("x")["capacity"].median()
        ax.plot(median.index + shift, median.to_numpy(), "-", color="black", lw=1, label="median answer")
        ax.set_yscale(report_spec.success_map.y_scale)
        ax.set_xlabel(x_label)
        ax.set_ylabel(f"{variable} (the searched value)")
        title = group.replace("=", " = ") if group != "all" else (report_spec.title or "Success map")
        ax.set_title(title, fontsize="small")
        ax.grid(True, which="both", alpha=0.3)
        probe = Line2D([], [], ls="", marker="o", mfc="none", color="0.3", label="a probed value (size: seeds)")
        ax.legend(handles=[probe, *ax.get_legend_handles_labels()[0]], fontsize="x-small", loc="best")
    for ax in list(axes.flat)[len(groups) :]:
        ax.set_visible(False)
    fig.colorbar(points, ax=axes.ravel().tolist(), label="success rate over the seeds that probed it")
    save_captioned(fig, path, CAPACITY_SECTIONS, dpi=120)
    plt.close(fig)
    return path
