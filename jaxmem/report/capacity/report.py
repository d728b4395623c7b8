"""The report files of a search sweep: capacity.csv, capacity.png and the report.md sections."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from jaxmem.report.capacity.fit import summarise
from jaxmem.report.capacity.markdown import bits_section, capacity_section, metrics_at_capacity_section, slope_section
from jaxmem.report.capacity.plot import plot_capacity
from jaxmem.report.capacity.points import point_table
from jaxmem.report.capacity.searches import x_column
from jaxmem.report.files import write_csv
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
) -> list[str]:
    """Write capacity.csv and (with a fit) capacity.png into `out_dir`, appended to `written`; return the
    report.md sections."""
    summary = summarise(report_spec, searches)
    variable = summary["variable"]
    written.append(write_csv(point_table(searches, x_column(report_spec, searches)), Path(out_dir) / "capacity.csv"))
    sections = [capacity_section(report_spec, searches, variable, rule), slope_section(summary), bits_section(summary)]
    if summary["n_points"] > 0:
        written.append(plot_capacity(Path(out_dir) / "capacity.png", report_spec, searches, summary))
        sections.append("## Plot\n\n![capacity](capacity.png)")
    sections.append(metrics_at_capacity_section(report_spec, searches, runs, variable, rule, train_metric))
    return sections
