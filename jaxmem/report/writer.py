"""write_report: capacity.csv, capacity.png and report.md for one sweep."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from jaxmem.report.analysis import point_table, summarise, x_column
from jaxmem.report.markdown import render_report
from jaxmem.report.plots import plot_capacity


def write_report(
    out_dir: Path, report_spec: dict, searches: pd.DataFrame, runs: pd.DataFrame, meta: dict
) -> list[Path]:
    """Write the report files into out_dir and return their paths (report.md only when there are no searches)."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    summary = summarise(report_spec, searches)
    written = []
    plot_name = None
    if not searches.empty:
        csv_path = out_dir / "capacity.csv"
        point_table(searches, x_column(report_spec, searches)).to_csv(csv_path, index=False)
        written.append(csv_path)
        if summary["n_points"] > 0:
            written.append(plot_capacity(out_dir / "capacity.png", report_spec, searches, summary))
            plot_name = "capacity.png"
    md_path = out_dir / "report.md"
    md_path.write_text(render_report(report_spec, searches, runs, meta, summary, plot_name))
    written.append(md_path)
    return written
