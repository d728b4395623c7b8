"""relations.png: one panel per `[[report.relation]]`, per group the finite medians against x with
their 25–75 % bars and, where the relation claims a law (an expected slope or R²), its fitted line (dashed);
log-log axes for a power fit."""

from __future__ import annotations

import math
import textwrap
from pathlib import Path

import numpy as np

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib import ticker  # noqa: E402
import pandas as pd  # noqa: E402

from jaxmem.report.captions import save_captioned  # noqa: E402
from jaxmem.report.text import number  # noqa: E402
from jaxmem.spec.report_relations import Relation  # noqa: E402

COLUMNS = 3
TITLE_WIDTH = 60  # characters per line of a panel's title


def claims_law(relation: Relation) -> bool:
    """Whether the relation's fit is a claim (an expected slope or R²), not only a description."""
    return relation.fit != "none" and (relation.expect_slope is not None or relation.min_r2 is not None)


def fitted_curve(relation: Relation, fit: dict, x: np.ndarray) -> np.ndarray:
    """The fitted law at x (NaN without a fit)."""
    a, b = fit.get("a", math.nan), fit.get("b", math.nan)
    return np.exp(a) * x**b if relation.fit == "power" else a + b * x


def draw_relation(ax, relation: Relation, table: pd.DataFrame, fits: list[dict]) -> None:
    for fit in fits:
        group = table[table["group"] == fit["group"]]
        infinite = np.isinf(group["median"].to_numpy(float))
        part = group[np.isfinite(group["median"].to_numpy(float))]
        label = fit["group"] if relation.group_by else "median, 25–75 %"
        prefix = f"{fit['group']}: " if relation.group_by else ""
        color = None
        if not part.empty:
            x, median = part["x"].to_numpy(float), part["median"].to_numpy(float)
            low = np.where(np.isfinite(part["q25"]), median - part["q25"], 0)
            high = np.where(np.isfinite(part["q75"]), part["q75"] - median, 0)
            color = ax.errorbar(x, median, yerr=[low, high], fmt="o", ms=4, capsize=2, label=label)[0].get_color()
            if claims_law(relation) and math.isfinite(fit.get("b", math.nan)):
                grid = np.linspace(x.min(), x.max(), 50)
                ax.plot(grid, fitted_curve(relation, fit, grid), "--", lw=1, color=color)
        if infinite.any():  # a median that is a missing value ranked high (low): a marker at the top (bottom)
            top = group["median"].to_numpy(float)[infinite] > 0
            edge = ax.get_xaxis_transform()
            for up in (True, False):
                xs = group["x"].to_numpy(float)[infinite][top == up]
                if xs.size:
                    marker, y = ("^", 0.97) if up else ("v", 0.03)
                    ax.plot(
                        xs, [y] * xs.size, marker, color=color, transform=edge, label=f"{prefix}median ±∞ (no value)"
                    )
    finite = table[np.isfinite(table["median"].to_numpy(float))]
    if relation.fit == "power" and (finite["x"] > 0).any() and (finite["median"] > 0).any():
        ax.set_xscale("log")
        ax.set_yscale("log")
        xs = np.unique(table["x"].to_numpy(float))
        xs = xs[np.isfinite(xs) & (xs > 0)]
        if xs.size and xs.max() < 10 * xs.min():  # under a decade: label the measured x values themselves
            ax.xaxis.set_major_locator(ticker.FixedLocator(xs[:: max(1, xs.size // 8)]))
            ax.xaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _: number(v)))
            ax.xaxis.set_minor_formatter(ticker.NullFormatter())
    ax.set_xlabel(relation.x_label)
    ax.set_ylabel(relation.y_label)
    ax.set_title("\n".join(textwrap.wrap(relation.label, TITLE_WIDTH)), fontsize="small")
    ax.grid(True, which="both", alpha=0.3)
    entries = len(ax.get_legend_handles_labels()[1])
    ax.legend(fontsize="xx-small" if entries > 6 else "x-small", ncol=2 if entries > 6 else 1)


def plot_relations(path: Path, results: list[tuple[Relation, pd.DataFrame, list[dict]]]) -> Path:
    """Write relations.png and return its path."""
    columns = min(COLUMNS, len(results))
    rows = math.ceil(len(results) / columns)
    fig, panels = plt.subplots(rows, columns, figsize=(5 * columns, 3.8 * rows), squeeze=False)
    for ax, (relation, table, fits) in zip(panels.flat, results):
        draw_relation(ax, relation, table, fits)
    for ax in list(panels.flat)[len(results) :]:
        ax.axis("off")
    fig.suptitle("Relations: median over runs per x, bars = 25–75 %, dashed = the claimed law's fit", fontsize="small")
    save_captioned(fig, path, ("Relations",), dpi=120, bbox_inches="tight")
    plt.close(fig)
    return path
