"""escape.png: crossing times against the escape-law x, one panel per crossing: the runs as points, the
fitted line per group (solid) and the predicted slope (dashed, drawn through the centroid of the group's
points, since only the slope is predicted)."""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from matplotlib.lines import Line2D  # noqa: E402

from jaxmem.report.captions import save_captioned  # noqa: E402
from jaxmem.report.text import group_labels, number  # noqa: E402
from jaxmem.report.trajectory.stages import crossing_column  # noqa: E402
from jaxmem.spec.report_tables import TrajectorySpec  # noqa: E402

MAX_COLUMNS = 3


def plot_escape(path: Path, stages: pd.DataFrame, fits: pd.DataFrame, spec: TrajectorySpec, title: str) -> Path:
    """Write escape.png for the crossings of `spec` (those with no run crossed are left out)."""
    escape = spec.escape
    labels = group_labels(stages, list(escape.group_by))
    groups = list(dict.fromkeys(labels))
    xs = stages["escape x"].astype(float)
    crossings = [c for c in spec.crossings if np.isfinite(stages[crossing_column(c.label, escape.y)]).any()]
    ncols = min(max(len(crossings), 1), MAX_COLUMNS)
    nrows = max(math.ceil(len(crossings) / ncols), 1)
    fig, axes = plt.subplots(nrows, ncols, figsize=(5.5 * ncols, 4.2 * nrows), squeeze=False)
    for ax, crossing in zip(axes.flat, crossings):
        ys = stages[crossing_column(crossing.label, escape.y)].astype(float)
        for g, group in enumerate(groups):
            color = f"C{g % 10}"
            sel = (labels == group) & np.isfinite(xs) & np.isfinite(ys)
            if not sel.any():
                continue
            gx, gy = xs[sel].to_numpy(), ys[sel].to_numpy()
            prefix = f"{group}: " if escape.group_by else ""
            ax.scatter(gx, gy, s=16, color=color, alpha=0.8, lw=0)
            fit = fits[(fits["crossing"] == crossing.label) & (fits["group"] == group)]
            line = np.linspace(gx.min(), gx.max(), 2)
            if len(fit) and np.isfinite(fit["slope"].iloc[0]):
                slope, intercept, se = (float(fit[c].iloc[0]) for c in ("slope", "intercept", "slope_se"))
                error = f" ± {number(se)}" if np.isfinite(se) else ""
                ax.plot(
                    line, intercept + slope * line, "-", color=color, label=f"{prefix}fit: slope {number(slope)}{error}"
                )
            if len(fit) and np.isfinite(fit["predicted"].iloc[0]):
                predicted = float(fit["predicted"].iloc[0])
                centre = gy.mean() + predicted * (line - gx.mean())
                ax.plot(
                    line, centre, "--", color=color, alpha=0.7, label=f"{prefix}predicted slope {number(predicted)}"
                )
        ax.set_xlabel(escape.x_label)
        ax.set_ylabel(f"{escape.y} at which {crossing.label}")
        ax.set_title(f"{crossing.label}: {escape.y} of the crossing against {escape.x_label}", fontsize="medium")
        ax.grid(True, alpha=0.3)
        handles = ax.get_legend_handles_labels()[0]
        handles.append(Line2D([], [], ls="", marker="o", ms=4, color="0.4", label="one run (seed)"))
        ax.legend(handles=handles, fontsize="x-small")
    for ax in list(axes.flat)[len(crossings) :]:
        ax.set_visible(False)
    fig.suptitle(title)
    fig.tight_layout()
    save_captioned(fig, path, ("Trajectories / Escape",), dpi=120)
    plt.close(fig)
    return path
