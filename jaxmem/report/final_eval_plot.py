"""final_eval.png, readable at gallery size: one panel per metric that changes along the test-time axis x
(a metric constant along it, within FLAT, for every run and setting, e.g. the training loss, is named in the
title, not drawn; one equal to a drawn metric at every point shares its panel), three panels a row, x named
under each column, one line per setting (the median over seeds and learning rates with its min–max band;
the first setting field by colour, the others by marker), dashed: the same runs untrained, and the legend
below the panels."""

from __future__ import annotations

import math
import textwrap
from pathlib import Path

import numpy as np

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from jaxmem.report.axes import readable_log  # noqa: E402
from jaxmem.report.captions import save_captioned  # noqa: E402

COLUMNS = 3
PANEL_INCHES = (4.4, 2.9)  # width, height of one panel
MARKERS = ("o", "s", "^", "D", "v", "P")
TITLE_WIDTH = 110  # characters per line of the figure's title
FLAT = 0.01  # a metric that moves along x by less than this fraction of its largest value is flat


def curves(frame: pd.DataFrame, x: str, metric: str, by: list[str]) -> pd.DataFrame:
    """Per setting and x: the median, min and max of `metric` over seeds (and learning rates)."""
    keys = by + [x]
    grouped = frame.groupby(keys, sort=True, dropna=False)[metric]
    return grouped.agg(["median", "min", "max", "count"]).reset_index()


def setting_groups(table: pd.DataFrame, by: list[str]) -> list[tuple[tuple, pd.DataFrame]]:
    """The rows of each setting (values of `by`, as a tuple), in sorted order."""
    if not by:
        return [((), table)]
    return [(k if isinstance(k, tuple) else (k,), g) for k, g in table.groupby(by, sort=True, dropna=False)]


def setting_label(by: list[str], key: tuple) -> str:
    """e.g. "alpha_test=0.4, l_ts=8"; "all runs" without settings."""
    return ", ".join(f"{name}={value}" for name, value in zip(by, key)) or "all runs"


def equal_columns(a: pd.Series, b: pd.Series) -> bool:
    """Whether two metric columns hold the same values (NaN equal to NaN)."""
    return bool(np.array_equal(a.to_numpy(float), b.to_numpy(float), equal_nan=True))


def varies_along(frame: pd.DataFrame, x: str, metric: str, by: list[str]) -> bool:
    """Whether `metric` moves along `x`, for some run and setting, by FLAT of its largest value or more."""
    values = frame[metric].to_numpy(float)
    scale = np.nanmax(np.abs(values)) if np.isfinite(values).any() else 0.0
    spread = frame.groupby(["run_id"] + by, dropna=False)[metric].agg(lambda v: np.nanmax(v) - np.nanmin(v))
    return bool((spread > FLAT * scale).any())


def panel_metrics(frame: pd.DataFrame, x: str, metrics: list[str], by: list[str]) -> tuple[dict, list[str]]:
    """The metrics drawn, each with the metrics equal to it at every point (sharing its panel), and those
    constant along x (not drawn)."""
    constant = [m for m in metrics if not varies_along(frame, x, m, by)]
    drawn: dict[str, list[str]] = {}
    for metric in (m for m in metrics if m not in constant):
        twin = next((d for d in drawn if equal_columns(frame[d], frame[metric])), None)
        drawn.setdefault(twin or metric, []).extend([metric] if twin else [])
    return drawn, constant


def line_styles(by: list[str], keys: list[tuple]) -> dict[tuple, tuple[str, str]]:
    """Per setting its colour (by the first field's value) and marker (by the other fields' values)."""
    firsts = list(dict.fromkeys(k[0] for k in keys)) if by else []
    rests = list(dict.fromkeys(k[1:] for k in keys)) if by else []
    return {
        k: (f"C{firsts.index(k[0]) % 10}" if by else "C0", MARKERS[rests.index(k[1:]) % len(MARKERS)] if by else "o")
        for k in keys
    }


def plot_final_eval(
    path: Path, frame: pd.DataFrame, x: str, metrics: list[str], by: list[str], untrained: pd.DataFrame | None = None
) -> Path:
    """final_eval.png (module docstring) of `metrics` against the test-time axis `x` (log-scaled when it
    spans more than a decade of positive values), one line per setting (`by`: jaxmem.report.final_eval.
    settings_of); with `untrained` (split_untrained), its medians dashed."""
    drawn, constant = panel_metrics(frame, x, metrics, by)
    columns = max(1, min(COLUMNS, len(drawn)))
    rows = max(1, math.ceil(len(drawn) / columns))
    size = (PANEL_INCHES[0] * columns, PANEL_INCHES[1] * rows + 1.2)
    fig, panels = plt.subplots(rows, columns, figsize=size, squeeze=False, layout="constrained")
    keys = [key for key, _ in setting_groups(frame.drop_duplicates(by) if by else frame.iloc[:1], by)]
    styles = line_styles(by, keys)
    values = pd.to_numeric(frame[x], errors="coerce")
    log_x = bool((values > 0).all() and values.max() / values.min() > 10)
    for ax, (metric, twins) in zip(panels.flat, drawn.items()):
        table = curves(frame, x, metric, by)
        baseline = dict(setting_groups(curves(untrained, x, metric, by), by)) if untrained is not None else {}
        for key, curve in setting_groups(table, by):
            color, marker = styles[key]
            ax.plot(
                curve[x], curve["median"], "-", marker=marker, ms=3.5, lw=1.2, color=color, label=setting_label(by, key)
            )
            ax.fill_between(curve[x], curve["min"], curve["max"], color=color, alpha=0.15, lw=0)
            if key in baseline:
                ax.plot(baseline[key][x], baseline[key]["median"], "--", lw=0.9, color=color, alpha=0.8)
        if log_x:
            ax.set_xscale("log")
            readable_log(ax.xaxis)
        ax.set_title(" = ".join([metric] + twins), fontsize="small")
        ax.tick_params(labelsize="small")
        ax.grid(True, which="both", alpha=0.3)
    for ax in list(panels.flat)[len(drawn) :]:
        ax.axis("off")
    for ax in list(panels.flat)[max(0, len(drawn) - columns) : len(drawn)]:  # the lowest panel of each column
        ax.set_xlabel(f"{x} (test time)")
    handles, labels = panels.flat[0].get_legend_handles_labels()
    if len(labels) > 1:
        fig.legend(handles, labels, loc="outside lower center", ncol=min(5, len(labels)), fontsize="x-small")
    fig.suptitle(title(x, constant, untrained is not None), fontsize="small")
    save_captioned(fig, path, ("Test-time axes",), dpi=120, bbox_inches="tight")
    plt.close(fig)
    return path


def title(x: str, constant: list[str], dashed: bool) -> str:
    """What the lines and bands are, and the metrics constant along x (not drawn)."""
    text = "Test-time axes: median over seeds, band = min–max" + ("; dashed: the same runs untrained" if dashed else "")
    if constant:
        text += f". Constant along {x} (within {FLAT:.0%} of their largest value), not drawn: {', '.join(constant)}"
    return "\n".join(textwrap.wrap(text, TITLE_WIDTH))
