"""The test-time axes of a sweep (`[final_eval]`): final_eval.csv / .parquet (one row per run and
point, see jaxmem.persistence.store.final_eval_frame), final_eval.png (every metric against the
`[report.final_eval]` x, default the first test-time axis, one line per setting: the other test-time
axes and the sweep's varying fields, the median over seeds and learning rates with their min–max band),
and the read-offs (`readoff`): final_eval_readoff.csv and a section of report.md."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from jaxmem.report.capacity.fit import fit_power_law  # noqa: E402
from jaxmem.report.files import write_csv, write_table  # noqa: E402
from jaxmem.spec.report_tables import FinalEvalSpec, Readoff  # noqa: E402

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


def plot_final_eval(path: Path, frame: pd.DataFrame, x: str, metrics: list[str]) -> Path:
    """final_eval.png: one panel per metric against the test-time axis `x` (log-scaled when it spans
    more than a decade of positive values)."""
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


def stays_from(xs: np.ndarray, ys: np.ndarray, level: float, at_most: bool) -> float:
    """The smallest x from which y stays at most (at least) `level` at every larger x; inf if it never
    does at the largest x. `xs` ascending."""
    bad = ys > level if at_most else ys < level
    if bad[-1]:
        return math.inf
    last_bad = np.flatnonzero(bad)
    return float(xs[last_bad[-1] + 1] if len(last_bad) else xs[0])


def readoff_table(frame: pd.DataFrame, x: str, readoff: Readoff, axes: list[str], metrics: list[str]) -> pd.DataFrame:
    """Per run and per value of the other test-time axes: its identity and config, and the read-off
    x* (column `x_star`)."""
    keys = ["run_id"] + [a for a in axes if a != x]
    identity = [c for c in frame.columns if c not in metrics and c != x]
    rows = []
    for _, curve in frame.groupby(keys, sort=True):
        curve = curve.sort_values(x)
        xs, ys = curve[x].to_numpy(float), curve[readoff.metric].to_numpy(float)
        rows.append({**curve.iloc[0][identity].to_dict(), "x_star": stays_from(xs, ys, readoff.level, readoff.at_most)})
    return pd.DataFrame(rows)


def power_slope(x: np.ndarray, y: np.ndarray) -> float:
    """Least-squares slope of ln y against ln x over the finite positive pairs; NaN with fewer than two."""
    keep = np.isfinite(x) & np.isfinite(y) & (x > 0) & (y > 0)
    return fit_power_law(x[keep], y[keep])[0]


def readoff_summary(table: pd.DataFrame, readoff: Readoff, settings: list[str]) -> tuple[pd.DataFrame, list[dict]]:
    """Per setting and `against` value: median, min, max of x* over seeds; per setting the slope of
    ln(median) against ln(against)."""
    by = [c for c in settings if c != readoff.against] + ([readoff.against] if readoff.against else [])
    summary = table.groupby(by, sort=True, dropna=False)["x_star"].agg(["median", "min", "max", "count"]).reset_index()
    slopes = []
    if readoff.against:
        others = [c for c in by if c != readoff.against]
        for key, group in summary.groupby(others, sort=True, dropna=False) if others else [((), summary)]:
            key = key if isinstance(key, tuple) else (key,)
            slope = power_slope(group[readoff.against].to_numpy(float), group["median"].to_numpy(float))
            slopes.append(
                {"setting": dict(zip(others, key)), "slope": slope, "points": int(np.isfinite(group["median"]).sum())}
            )
    return summary, slopes


def readoff_section(table: pd.DataFrame, summary: pd.DataFrame, slopes: list[dict], readoff: Readoff, x: str) -> str:
    """report.md's lines of one read-off."""
    lines = [f"### {readoff.label}", "", f"x = {x}; {len(table)} curves; median (min–max) over seeds:", ""]
    columns = [c for c in summary.columns if c not in ("median", "min", "max", "count")]
    lines += ["| " + " | ".join(columns + ["x* median", "min–max", "seeds"]) + " |"]
    lines += ["| " + " | ".join(["---"] * len(columns) + ["---:"] * 3) + " |"]
    for row in summary.itertuples(index=False):
        cells = [str(getattr(row, c)) for c in columns]
        lines.append("| " + " | ".join(cells + [f"{row.median:g}", f"{row.min:g}–{row.max:g}", str(row.count)]) + " |")
    for s in slopes:
        where = ", ".join(f"{k}={v}" for k, v in s["setting"].items()) or "all runs"
        verdict = ""
        if readoff.expect_slope is not None and math.isfinite(s["slope"]):
            lo, hi = readoff.expect_slope
            verdict = f" (expected [{lo:g}, {hi:g}]: {'PASS' if lo <= s['slope'] <= hi else 'FAIL'})"
        fit = f"slope of ln x* against ln {readoff.against} = {s['slope']:.3g}"
        lines.append(f"- {where}: {fit} over {s['points']} finite medians{verdict}")
    return "\n".join(lines)


def final_eval_sections(
    out_dir: Path, spec: FinalEvalSpec, frame: pd.DataFrame, axes: list[str], metrics: list[str], written: list[Path]
) -> list[str]:
    """Write final_eval.csv, .parquet, .png and final_eval_readoff.csv (nothing when no run was evaluated
    at test time); return report.md's section."""
    if frame.empty or not axes:
        return []
    x = spec.x or axes[0]
    shown = [m for m in (spec.metrics or metrics) if m in frame.columns and frame[m].notna().any()]
    written += write_table(frame, out_dir, "final_eval")
    written.append(plot_final_eval(out_dir / "final_eval.png", frame, x, shown))
    sections = [
        "## Test-time axes",
        f"Each finished run's final parameters evaluated at every point of {' × '.join(axes)} "
        f"({frame['run_id'].nunique()} runs, {len(frame)} rows): final_eval.csv, final_eval.png.",
    ]
    tables = []
    for readoff in spec.readoffs:
        table = readoff_table(frame, x, readoff, axes, list(metrics))
        settings = settings_of(table.drop(columns=["x_star"]), x, [])
        summary, slopes = readoff_summary(table, readoff, settings)
        tables.append(table.assign(readoff=readoff.label))
        sections.append(readoff_section(table, summary, slopes, readoff, x))
    if tables:
        written.append(write_csv(pd.concat(tables, ignore_index=True), out_dir / "final_eval_readoff.csv"))
    return sections
