"""Capacity reports for finished sweeps: tables, power-law fits, plots and report.md."""

from jaxmem.report.analysis import collapse_stats, fit_power_law, point_table, summarise
from jaxmem.report.writer import write_report

__all__ = ["collapse_stats", "fit_power_law", "point_table", "summarise", "write_report"]
