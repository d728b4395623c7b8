"""write_report: the report files for one sweep.

Search sweeps: capacity.csv, capacity.png and report.md (with every metric at capacity). Grid sweeps
(no searches): report.md with one row of metrics per grid point and, when the report spec has a
`heatmap` table (see jaxmem.spec.report_tables), heatmap.csv, heatmap.png, the floor and the boundary.
Sweeps with recorded trajectories also get trajectories.csv, trajectory.png and, as the report spec's
`trajectory` table asks (see jaxmem.spec.report_tables), stages.csv and escape.png.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from jaxmem.report.analysis import point_table, summarise, x_column
from jaxmem.report.final_metrics import expand_final_metrics
from jaxmem.report.grid_markdown import capacity_metrics_section, heatmap_section, metric_label, points_section
from jaxmem.report.heatmap import heatmap_cells, point_cells
from jaxmem.report.heatmap_plot import plot_heatmap
from jaxmem.report.markdown import render_report
from jaxmem.report.plots import plot_capacity
from jaxmem.report.tradeoff import analyse
from jaxmem.report.trajectory_report import write_trajectory_report
from jaxmem.spec.report_tables import ReportSpec


def write_report(
    out_dir: Path,
    report_spec: ReportSpec,
    searches: pd.DataFrame,
    runs: pd.DataFrame,
    meta: dict,
    train_spec: dict | None = None,
    trajectories: pd.DataFrame | None = None,
    planned: pd.DataFrame | None = None,
) -> list[Path]:
    """Write the report files into out_dir and return their paths, report.md last.

    `train_spec` (the sweep's [train] table) names the train metric. `trajectories` is the store's
    trajectories table and `planned` the configs of runs in flight
    (jaxmem.report.trajectory_data.planned_runs), both optional.
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    runs = expand_final_metrics(runs)
    train_metric = (train_spec or {}).get("metric")
    summary = summarise(report_spec, searches)
    written, extra = [], []
    plot_name = None
    if not searches.empty:
        csv_path = out_dir / "capacity.csv"
        point_table(searches, x_column(report_spec, searches)).to_csv(csv_path, index=False)
        written.append(csv_path)
        if summary["n_points"] > 0:
            written.append(plot_capacity(out_dir / "capacity.png", report_spec, searches, summary))
            plot_name = "capacity.png"
        extra.append(capacity_metrics_section(report_spec, searches, runs, summary["variable"], train_metric))
    elif is_grid_sweep(runs):
        extra += write_grid(out_dir, report_spec, runs, train_spec, written)
    extra += write_trajectory_report(out_dir, report_spec, trajectories, runs, planned, written)
    md_path = out_dir / "report.md"
    md_path.write_text(render_report(report_spec, searches, runs, meta, summary, plot_name, extra))
    written.append(md_path)
    return written


def is_grid_sweep(runs: pd.DataFrame) -> bool:
    """Runs of a plain grid: none probes a searched value (a search sweep before its first search
    finishes has runs but no searches, and is not one)."""
    return not runs.empty and ("value" not in runs or bool(runs["value"].isna().all()))


def write_grid(
    out_dir: Path, report_spec: ReportSpec, runs: pd.DataFrame, train_spec: dict | None, written: list[Path]
) -> list[str]:
    """Grid-sweep files (appended to `written`) and report.md sections."""
    spec = report_spec.heatmap
    train_metric = (train_spec or {}).get("metric")
    points = point_cells(runs, spec)
    sections = []
    if spec is not None:
        cells = heatmap_cells(points, spec)
        csv_path = out_dir / "heatmap.csv"
        cells.to_csv(csv_path, index=False)
        written.append(csv_path)
        analysis = analyse(cells)
        plot_name = None
        if cells[spec.metric].notna().any():
            title = report_spec.title or "Heatmap"
            label = metric_label(spec.metric, train_metric)
            written.append(plot_heatmap(out_dir / "heatmap.png", spec, cells, analysis["boundary"], title, label))
            plot_name = "heatmap.png"
        sections.append(heatmap_section(spec, cells, analysis, train_metric, plot_name))
    sections.append(points_section(points, spec, train_metric))
    return sections
