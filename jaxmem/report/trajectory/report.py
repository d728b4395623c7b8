"""The report files of a trajectory sweep: trajectories.csv and .parquet, trajectory.png, stages.csv,
escape.png, rates.csv and the report.md sections, driven by `[report.trajectory]` (keys in
jaxmem.spec.report_tables).

Nothing is written when the store holds no trajectory (record_trajectory off). Mid-sweep, runs still
in flight are included with status "running" (see jaxmem.report.trajectory.data).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from jaxmem.report.files import write_csv, write_table
from jaxmem.report.text import group_labels
from jaxmem.report.trajectory.data import Trajectories, common_names, load_trajectories, varying
from jaxmem.report.trajectory.escape import escape_fits, slope_ratios
from jaxmem.report.trajectory.escape_plot import plot_escape
from jaxmem.report.trajectory.guides import rate_guides
from jaxmem.report.trajectory.markdown import (
    crossings_section,
    escape_section,
    overview_section,
    plateaus_section,
    rates_section,
)
from jaxmem.report.trajectory.plot import Level, plot_trajectories
from jaxmem.report.trajectory.rates import RATES_CSV, rate_tables
from jaxmem.report.trajectory.stages import crossing_column, stage_table
from jaxmem.spec.expr import ExpressionError, evaluate
from jaxmem.spec.report_tables import ReportSpec, TrajectorySpec

STAGES_CSV = "stages.csv"


def write_trajectory_report(
    out_dir: Path,
    report_spec: ReportSpec,
    raw: pd.DataFrame | None,
    runs: pd.DataFrame,
    planned: pd.DataFrame | None,
    written: list[Path],
    axes: list[str] | None = None,
) -> list[str]:
    """Write the trajectory files into `out_dir` (appended to `written`); return report.md sections.

    `raw`: the store's trajectories table (run_id, step, metrics JSON); `runs`: the expanded runs
    table; `planned`: the plan of runs in flight (jaxmem.report.trajectory.data.planned_runs) or None;
    `axes`: the fields the spec varies (those of the stored configs), which the default color_by
    draws on; None: every field that varies.
    """
    if raw is None or raw.empty:
        return []
    out_dir = Path(out_dir)
    spec = report_spec.trajectory
    traj = load_trajectories(raw, runs, planned)
    metrics = chosen_metrics(spec, traj)
    group_by = list(spec.group_by)
    check_fields(spec, traj, group_by + list(spec.color_by or ()))
    color_by = list(spec.color_by) if spec.color_by is not None else varying_within(traj, group_by, axes)

    written += write_table(traj.frame, out_dir, "trajectories")

    labelled = label_runs(traj.runs, group_by, color_by)
    frame = labelled[["run_id", "panel", "series"]].merge(traj.frame, on="run_id")  # sorted like labelled
    panels = list(dict.fromkeys(labelled["panel"]))
    levels = {p: panel_levels(spec, labelled[labelled["panel"] == p], traj.fields) for p in panels}
    measured = bool(spec.crossings or spec.plateaus)
    stages = stage_table(traj, spec) if measured else pd.DataFrame()
    if measured:
        stages = labelled[["run_id", "panel", "series"]].merge(stages, on="run_id", how="left")  # in plot order
        written.append(write_csv(stages, out_dir / STAGES_CSV))

    title = spec.title or report_spec.title or "Trajectories"
    labels = {
        "title": title,
        "x_label": spec.x_label or ("step" if spec.x == "step" else "time (step × lr)"),
        "y_label": spec.y_label or ", ".join(metrics),
    }
    rates, trends = rate_tables(frame, labelled, spec) if spec.rates or spec.trends else (None, None)
    plot_name = None
    if frame[metrics].notna().any().any() and frame[spec.x].notna().any():
        path = out_dir / "trajectory.png"
        if spec.layout == "metric":
            drawn = list(dict.fromkeys(metrics + [r.metric for r in spec.rates]))
            long, metric_panels = metric_panels_frame(frame, drawn, spec.x)
            log_y = set(spec.log_y) | {r.metric for r in spec.rates if r.scale != "log"}
            plot = plot_trajectories(
                path,
                long,
                spec,
                ["value"],
                list(metric_panels),
                {},
                marks(pd.DataFrame(), spec, []),
                {**labels, **metric_panels},
                frozenset(p for p, m in metric_panels.items() if m in log_y),
                titles={p: panel_title(p, m, spec) for p, m in metric_panels.items()},
                guides=rate_guides(spec, rates, frame, lambda m, g: metric_panel(m, g) if m in drawn else None),
            )
        else:
            plot = plot_trajectories(
                path,
                frame,
                spec,
                metrics,
                panels,
                levels,
                marks(stages, spec, metrics),
                labels,
                titles={p: words(p) for p in panels},
                guides=rate_guides(spec, rates, frame, lambda m, g: g if m in metrics else None),
            )
        written.append(plot)
        plot_name = "trajectory.png"

    sections = [overview_section(frame, labelled, spec, metrics, traj.metrics, levels, plot_name)]
    if measured:
        sections += [crossings_section(stages, spec, STAGES_CSV), plateaus_section(stages, spec)]
    if spec.escape is not None:
        fits = escape_fits(stages, spec, traj.fields)
        escape_name = None
        if (fits["n"] > 0).any():
            written.append(plot_escape(out_dir / "escape.png", stages, fits, spec, title))
            escape_name = "escape.png"
        sections.append(escape_section(fits, slope_ratios(fits), spec, escape_name))
    if rates is not None:
        written.append(write_csv(pd.concat([rates, trends], ignore_index=True), out_dir / RATES_CSV))
        sections.append(rates_section(rates, trends, spec))
    return [s for s in sections if s]


def chosen_metrics(spec: TrajectorySpec, traj: Trajectories) -> list[str]:
    """The metrics to draw (checked to be recorded), and the crossing and plateau metrics checked too."""
    wanted = list(spec.metrics) if spec.metrics is not None else (["loss"] if "loss" in traj.metrics else traj.metrics)
    used = wanted + [c.metric for c in spec.crossings] + [p.metric for p in spec.plateaus]
    used += [r.metric for r in spec.rates] + [t.metric for t in spec.trends]
    unknown = sorted({m for m in used if m not in traj.metrics})
    if unknown:
        raise ValueError(f"report.trajectory: metrics {unknown} are not recorded (recorded: {traj.metrics})")
    return wanted


def check_fields(spec: TrajectorySpec, traj: Trajectories, fields: list[str]) -> None:
    known = set(traj.fields) | {"lr", "seed"}
    escape = list(spec.escape.group_by) if spec.escape is not None else []
    unknown = sorted({f for f in fields + escape if f not in known})
    if unknown:
        raise ValueError(f"report.trajectory: {unknown} are not config fields (fields: {sorted(known)})")


def label_runs(runs: pd.DataFrame, group_by: list[str], color_by: list[str]) -> pd.DataFrame:
    """The runs sorted by their group_by and color_by values, seed and run_id, with `panel` and `series`
    labels."""
    keys = list(dict.fromkeys(group_by + color_by + ["seed", "run_id"]))
    ordered = runs.sort_values(keys, kind="stable")
    ordered = ordered.reset_index(drop=True)
    return ordered.assign(panel=group_labels(ordered, group_by), series=group_labels(ordered, color_by))


def panel_levels(spec: TrajectorySpec, runs: pd.DataFrame, fields: list[str]) -> list[Level]:
    """The reference lines of one panel, evaluated with the names its runs share."""
    names = common_names(runs, fields)
    levels = []
    for ref in spec.references:
        try:
            y = float(evaluate(ref.y, names))
        except ExpressionError as err:
            if not runs["point"].map(lambda v: isinstance(v, str)).any():
                continue  # only runs in flight whose config is not known yet
            raise ValueError(f"report.trajectory.references: {err} (names constant within the panel)") from None
        levels.append(Level(y=y, label=ref.label, color=ref.color, style=ref.style))
    return levels


def varying_within(traj: Trajectories, group_by: list[str], axes: list[str] | None = None) -> list[str]:
    """The default color_by: the `axes` (and lr) that vary inside some panel. An entry the experiment
    derives from them (e.g. the S, R, D a scaling sets from `size`) or one that only follows the panel
    (e.g. a batch size the model sets) would add nothing but length to the legend."""
    candidates = [c for c in varying(traj.runs, traj.fields) if c not in group_by]
    candidates = [c for c in candidates if axes is None or c in axes or c == "lr"]
    if not group_by:
        return candidates
    panels = traj.runs.astype({c: str for c in group_by}).groupby(group_by, dropna=False)
    return [c for c in candidates if (panels[c].agg(lambda v: v.astype(str).nunique()) > 1).any()]


def metric_panel(metric: str, group: str) -> str:
    """The name of the layout "metric" panel of one metric and group panel."""
    return metric if group == "all" else f"{metric} · {group}"


def words(group: str) -> str:
    """A group label as a subplot title: "optimizer = adam, d = 8"; "" for the one group of all runs."""
    return "" if group == "all" else group.replace("=", " = ")


def metric_words(metric: str, spec: TrajectorySpec) -> str:
    """A metric as the spec describes it: "loss_gap (CE − ℋ)" with a trend's label; a rate's metric
    with its law ("w_perp_norm, rate d‖P⊥W‖ / d ln t vs ‖W^mm‖"); else its name."""
    named = [t.label for t in spec.trends if t.metric == metric]
    if named:
        return f"{metric} ({named[0]})"
    rates = [r.label for r in spec.rates if r.metric == metric]
    return f"{metric}, rate {rates[0]}" if rates else metric


def panel_title(panel: str, metric: str, spec: TrajectorySpec) -> str:
    """A layout "metric" panel's title: the metric in words, then its group."""
    group = panel[len(metric) + 3 :] if panel != metric else "all"
    return ", ".join(t for t in (metric_words(metric, spec), words(group)) if t)


def metric_panels_frame(frame: pd.DataFrame, metrics: list[str], x: str) -> tuple[pd.DataFrame, dict[str, str]]:
    """The frame in long form for layout "metric": one panel per (metric, group) with the metric's
    values in column `value`; and each panel's metric (its y label)."""
    parts, panels = [], {}
    for metric in metrics:
        part = frame[["run_id", "panel", "series", x, metric]].rename(columns={metric: "value"})
        name = part["panel"].map(lambda p, m=metric: metric_panel(m, p))
        panels.update((p, metric) for p in dict.fromkeys(name))
        parts.append(part.assign(panel=name))
    return pd.concat(parts, ignore_index=True), panels


def marks(stages: pd.DataFrame, spec: TrajectorySpec, metrics: list[str]) -> pd.DataFrame:
    """The crossings of drawn metrics as points to mark: panel, series, metric, x (plot units), level."""
    rows = []
    for c in spec.crossings:
        if c.metric not in metrics or stages.empty:
            continue
        part = stages[["panel", "series", crossing_column(c.label, spec.x), crossing_column(c.label, "level")]]
        part.columns = ["panel", "series", "x", "level"]
        rows.append(part.assign(metric=c.metric))
    if not rows:
        return pd.DataFrame(columns=["panel", "series", "metric", "x", "level"])
    table = pd.concat(rows, ignore_index=True)
    return table[np.isfinite(table["x"].astype(float))]
