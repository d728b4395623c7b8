"""The report files of a grid sweep: with a `[report.heatmap]` table heatmap.csv, heatmap.png, the floor
and the boundary (and with `levels` the phase diagram of the success rate); always one row of metrics per
grid point in report.md. The floor, boundary and phase lines need two ordered axes: with a categorical
axis (a field of text values) the heatmap and its values are shown without them."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from jaxmem.persistence.untrained import UNTRAINED
from jaxmem.report.files import write_csv
from jaxmem.report.grid.cells import heatmap_cells, is_categorical, point_cells
from jaxmem.report.grid.markdown import heatmap_section, points_section
from jaxmem.report.grid.phase import phase_boundaries, phase_section, with_rate
from jaxmem.report.grid.plot import HEATMAP_SECTIONS, plot_heatmap, profile_axis
from jaxmem.report.grid.tradeoff import analyse
from jaxmem.report.laws import Law, figure_laws, figure_relations
from jaxmem.report.relations import section_of
from jaxmem.report.runs import shown_metric
from jaxmem.report.success import better, judged_metric, metric_label
from jaxmem.spec.report_tables import ReportSpec
from jaxmem.spec.sweep import SuccessRule


def is_grid_sweep(runs: pd.DataFrame) -> bool:
    """Runs of a plain grid: none probes a searched value (a search sweep before its first search
    finishes has runs but no searches, and is not one)."""
    return not runs.empty and ("value" not in runs or bool(runs["value"].isna().all()))


def write_grid_report(
    out_dir: Path,
    report_spec: ReportSpec,
    runs: pd.DataFrame,
    rule: SuccessRule | None,
    train_metric: str | None,
    written: list[Path],
) -> list[str]:
    """Write the heatmap files into `out_dir` (appended to `written`); return the report.md sections."""
    spec = report_spec.heatmap
    points = point_cells(runs, spec, better(rule))
    sections = []
    if spec is not None:
        cells = heatmap_cells(points, spec)
        rated = spec.levels or spec.shade == "success_rate"
        cells = with_rate(cells) if rated else cells
        ordered = not cells.empty and not (is_categorical(cells["x"]) or is_categorical(cells["y"]))
        phases = phase_boundaries(cells, spec.levels) if spec.levels and ordered else None
        written.append(write_csv(cells, Path(out_dir) / "heatmap.csv"))
        analysis = analyse(cells) if ordered else {}
        label = metric_label(spec.metric, rule, train_metric)
        plot_name = None
        if cells[spec.metric].notna().any():
            title = report_spec.title or "Heatmap"
            path = Path(out_dir) / "heatmap.png"
            boundary = analysis.get("boundary", [])
            laws, about = profile_laws(report_spec, spec, cells, runs)
            written.append(plot_heatmap(path, spec, cells, boundary, title, label, phases, laws, about))
            plot_name = "heatmap.png"
        judged = judged_metric(rule, train_metric)
        baseline = shown_metric(spec.metric, judged)
        untrained = UNTRAINED + baseline if baseline else None
        sections.append(heatmap_section(spec, cells, analysis, label, plot_name, untrained))
        if phases:
            sections.append(phase_section(spec.x_label, spec.y_label, cells, phases))
    sections.append(points_section(points, spec, rule, train_metric))
    return sections


def profile_laws(report_spec: ReportSpec, spec, cells: pd.DataFrame, runs: pd.DataFrame) -> tuple[list[Law], tuple]:
    """A grid of one row or column (jaxmem.report.grid.plot.profile_axis): the claimed laws of the relations
    of its metric along the axis that varies, and the sections of the claims its figure shows."""
    along = profile_axis(cells)
    if along is None:
        return [], HEATMAP_SECTIONS
    axis, metric = spec.x if along == "x" else spec.y, {spec.metric}
    relations = figure_relations(report_spec.relations, axis, metric)
    laws = figure_laws(report_spec.relations, runs, pd.DataFrame(), axis, metric)
    return laws, HEATMAP_SECTIONS + tuple(map(section_of, relations))
