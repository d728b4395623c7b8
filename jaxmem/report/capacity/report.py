"""The report files of a search sweep: capacity.csv, capacity.png, with a `success_map` table
success_map.csv and success_map.png, and the report.md sections."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from jaxmem.report.capacity.fit import summarise
from jaxmem.report.capacity.markdown import (
    bits_section,
    capacity_section,
    metrics_at_capacity_section,
    slope_section,
    sorted_points,
)
from jaxmem.report.capacity.plot import CAPACITY_SECTIONS, plot_capacity, plotted_names
from jaxmem.report.capacity.linear import linear_section
from jaxmem.report.capacity.ratio import capacity_points
from jaxmem.report.capacity.searches import usable_mask, x_column
from jaxmem.report.capacity.stable import non_monotone_note
from jaxmem.report.capacity.success_map import answers, map_axes, probe_table, success_map_section
from jaxmem.report.capacity.success_map_plot import plot_success_map
from jaxmem.report.files import write_csv
from jaxmem.report.laws import figure_laws, figure_relations
from jaxmem.report.relations import section_of
from jaxmem.spec.report_tables import ReportSpec
from jaxmem.spec.sweep import SuccessRule


def write_capacity_report(
    out_dir: Path,
    report_spec: ReportSpec,
    searches: pd.DataFrame,
    runs: pd.DataFrame,
    rule: SuccessRule | None,
    train_metric: str | None,
    written: list[Path],
    planned: int | None = None,
) -> list[str]:
    """Write capacity.csv and (with a fit) capacity.png into `out_dir`, appended to `written`; return the
    report.md sections. `planned`: the searches planned per grid point of an unfinished sweep."""
    summary = summarise(report_spec, searches)
    variable = summary["variable"]
    points = sorted_points(capacity_points(report_spec, searches, variable), report_spec, searches)
    written.append(write_csv(points, Path(out_dir) / "capacity.csv"))  # in the order of report.md's table
    answered = searches[usable_mask(searches, x_column(report_spec, searches))]
    flagged = non_monotone_note(searches, runs, report_spec.search_goal, report_spec.search_answer)
    sections = [capacity_section(report_spec, searches, variable, rule, planned) + flagged, slope_section(summary)]
    sections += [linear_section(report_spec.fit_linear, answered, variable, report_spec.relations)]
    sections.append(bits_section(summary))
    if summary["n_points"] > 0:
        x, plotted = x_column(report_spec, searches), plotted_names(report_spec.fit, variable)
        laws = figure_laws(report_spec.relations, runs, searches, x, plotted)
        about = CAPACITY_SECTIONS + tuple(map(section_of, figure_relations(report_spec.relations, x, plotted)))
        written.append(plot_capacity(Path(out_dir) / "capacity.png", report_spec, searches, summary, laws, about))
        sections.append("## Plot\n\n![capacity](capacity.png)")
    if report_spec.success_map is not None and not runs.empty:
        sections.append(write_success_map(Path(out_dir), report_spec, searches, runs, variable, written))
    sections.append(metrics_at_capacity_section(report_spec, searches, runs, variable, rule, train_metric))
    return sections


def write_success_map(
    out_dir: Path, report_spec: ReportSpec, searches: pd.DataFrame, runs: pd.DataFrame, variable: str, written: list
) -> str:
    """Write success_map.csv and success_map.png (appended to `written`); return the report.md section."""
    table = probe_table(report_spec, runs)
    written.append(write_csv(table, out_dir / "success_map.csv"))
    if table.empty:
        return success_map_section(report_spec, table, searches, None, variable)
    x_label = report_spec.success_map.x_label or map_axes(report_spec)[0]
    found = answers(report_spec, searches)
    written.append(plot_success_map(out_dir / "success_map.png", report_spec, table, found, variable, x_label))
    return success_map_section(report_spec, table, searches, "success_map.png", variable)
