"""Reports of finished (or running) sweeps: tables, fits, plots and report.md.

capacity/    search sweeps: capacity per grid point over seeds, fits, ratios, collapse, capacity.png,
             the success map of the probes
grid/        grid sweeps: per-point metrics, heatmap, floor and boundary, phase diagram, heatmap.png
trajectory/  recorded trajectories: stages, crossings, escape-time law, rates, trends, plots
checks/      host reference checks and rejected instances
text         the one number formatter and markdown tables
expressions  the report tables' expressions evaluated on table rows
runs         the runs table: final metrics, config fields, the best run per (point, seed)
success      the success rule in the report's words
overview     sweep metadata, runs and buckets sections
files        CSV and Parquet tables, report.md written atomically
export       the effective config of runs and searches (every table shows it); runs.csv: named metrics, ISO times
columns      what every column of every table means (`jaxmem list --columns`)
writer       write_report: every file of one report
from_store   `jaxmem report DIR`
"""

from jaxmem.report.capacity.fit import collapse_stats, fit_power_law, summarise
from jaxmem.report.capacity.points import point_table
from jaxmem.report.writer import write_report

__all__ = ["collapse_stats", "fit_power_law", "point_table", "summarise", "write_report"]
