"""The test-time axes of a sweep (`[final_eval]`): final_eval.csv / .parquet (one row per run and
point, see jaxmem.persistence.store.final_eval_frame) and final_eval.png: every metric against the first
test-time axis, one line per setting (the other test-time axes and the sweep's varying fields), the
median over seeds and learning rates with their min–max band."""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from jaxmem.report.files import write_table  # noqa: E402

COLUMNS = 3


def settings_of(frame: pd.DataFrame, x: str, metrics: list[str]) -> list[str]:
    """The columns that tell one curve from another: every column but the run's identity, x and the
    metrics that takes more than one value."""
    fixed = {"run_id", "seed", "lr", x, *metrics}
    return [c for c in frame.columns if c not in fixed and frame[c].astype(str).nunique() > 1]


def curves(frame: pd.DataFrame, x: str, metric: str, by: list[str]) -> pd.DataFrame:
    """Per setting and x: the median, min and max of `metric` over seeds (and learning rates)."""
    keys = by + [x]
    grouped = frame.groupby(keys, sort=True, dropna=False)[metric]
    return grouped.agg(["median", "min", "max", "count"]).reset_index()


def plot_final_eval(path: Path, frame: pd.DataFrame, axes: list[str], metrics: list[str]) -> Path:
    """final_eval.png: one panel per metric, x = the first test-time axis (log-scaled when it spans
    more than a decade of positive values)."""
    x = axes[0]
    by = settings_of(frame, x, metrics)
    columns = min(COLUMNS, len(metrics))
    rows = math.ceil(len(metrics) / columns)
    fig, panels = plt.subplots(rows, columns, figsize=(5 * columns, 3.6 * rows), squeeze=False)
    for ax, metric in zip(panels.flat, metrics):
        table = curves(frame, x, metric, by)
        for key, curve in table.groupby(by, sort=True, dropna=False) if by else [((), table)]:
            key = key if isinstance(key, tuple) else (key,)
            label = ", ".join(f"{name}={value}" for name, value in zip(by, key)) or "all runs"
            line = ax.plot(curve[x], curve["median"], "o-", ms=3, lw=1.2, label=label)[0]
            ax.fill_between(curve[x], curve["min"], curve["max"], color=line.get_color(), alpha=0.18, lw=0)
        values = pd.to_numeric(frame[x], errors="coerce")
        if (values > 0).all() and values.max() / values.min() > 10:
            ax.set_xscale("log")
        ax.set_xlabel(f"{x} (test time)")
        ax.set_ylabel(metric)
        ax.set_title(f"{metric} of the trained runs against {x}", fontsize="small")
        ax.grid(True, which="both", alpha=0.3)
    for ax in list(panels.flat)[len(metrics) :]:
        ax.axis("off")
    handles, labels = panels.flat[0].get_legend_handles_labels()
    if len(labels) > 1:
        fig.legend(handles, labels, loc="lower center", ncol=min(4, len(labels)), fontsize="x-small", frameon=False)
        fig.subplots_adjust(bottom=0.12 + 0.04 * math.ceil(len(labels) / 4))
    fig.suptitle("Test-time axes: median over seeds, band = min–max", fontsize="small")
    fig.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(fig)
    return path


def write_final_eval(out_dir: Path, frame: pd.DataFrame, axes: list[str], metrics: list[str]) -> list[Path]:
    """final_eval.csv, .parquet and .png in `out_dir` (nothing when no run was evaluated at test time)."""
    if frame.empty or not axes:
        return []
    metrics = [m for m in metrics if m in frame.columns]
    return write_table(frame, out_dir, "final_eval") + [
        plot_final_eval(out_dir / "final_eval.png", frame, axes, metrics)
    ]
