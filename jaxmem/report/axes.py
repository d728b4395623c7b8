"""Log axes a reader can read: ticks at 1, 2 and 5 × 10^k written as plain numbers (20, 500, 1e+04),
and no minor-tick labels crowding each other; a y range set by the data, not by the curves drawn over it."""

from __future__ import annotations

import contextlib
import textwrap

from matplotlib import ticker

from jaxmem.report.text import number

LABEL_POINTS = 10  # matplotlib's default label size
CHARACTER_WIDTH = 0.6  # a character's mean width, in font sizes (generous: a label must not overflow)


def readable_log(axis) -> None:
    """Label a log-scaled matplotlib axis (ax.xaxis or ax.yaxis) at 1, 2, 5 × 10^k."""
    axis.set_major_locator(ticker.LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    axis.set_major_formatter(ticker.FuncFormatter(lambda value, _pos: number(value)))
    axis.set_minor_formatter(ticker.NullFormatter())


@contextlib.contextmanager
def data_y_range(ax):
    """Curves drawn inside the block (a law, a guide) leave the y range the data drawn before set: they run
    out of the frame rather than stretch it (set the axis scale before)."""
    ax.autoscale_view()
    limits = ax.get_ylim()
    yield
    ax.set_ylim(limits)


def along_axis(text: str, inches: float, points: float = LABEL_POINTS) -> str:
    """An axis label wrapped into lines no longer than the axis (`inches`) at a font of `points`."""
    characters = max(12, int(inches * 72 / (points * CHARACTER_WIDTH)))
    return "\n".join(textwrap.wrap(text, characters)) or text
