"""Log axes a reader can read: ticks at 1, 2 and 5 × 10^k written as plain numbers (20, 500, 1e+04),
and no minor-tick labels crowding each other."""

from __future__ import annotations

from matplotlib import ticker

from jaxmem.report.text import number


def readable_log(axis) -> None:
    """Label a log-scaled matplotlib axis (ax.xaxis or ax.yaxis) at 1, 2, 5 × 10^k."""
    axis.set_major_locator(ticker.LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    axis.set_major_formatter(ticker.FuncFormatter(lambda value, _pos: number(value)))
    axis.set_minor_formatter(ticker.NullFormatter())
