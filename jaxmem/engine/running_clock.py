"""A clock of the time this process ran: the monotonic clock less the time the process was stopped
(SIGSTOP, Ctrl-Z), for timing a compile. No clock of the OS leaves that out: the monotonic clock counts
it, and CPU-time clocks leave out what a compile waits for (a GPU's autotuning runs, the disk) and
count other threads' work (a bucket running beside a compile).

A daemon thread ticks every TICK_S. A gap between two ticks over TICK_S + LATE_S is the process
stopped (a thread merely slow to be scheduled or to get the GIL is late by far less), and all of it
but TICK_S is left out; stops shorter than LATE_S count as running."""

from __future__ import annotations

import os
import threading
import time

TICK_S = 0.1
LATE_S = 1.0

_ticks: tuple[float, float] | None = None  # (monotonic time of the latest tick, seconds stopped before it)
_starting = threading.Lock()


def stopped_for(gap: float) -> float:
    """The seconds of a gap between ticks that the process was stopped for."""
    return gap - TICK_S if gap > TICK_S + LATE_S else 0.0


def running() -> float:
    """Seconds on the monotonic clock less those the process was stopped for since the clock started (at
    the first call); only differences mean anything."""
    global _ticks
    with _starting:
        if _ticks is None:
            _ticks = (time.monotonic(), 0.0)
            threading.Thread(target=_tick, name="jaxmem-running-clock", daemon=True).start()
    last, stopped = _ticks
    now = time.monotonic()
    return now - stopped - stopped_for(now - last)  # a stop the thread has not ticked after yet counts too


def _tick() -> None:
    global _ticks
    while True:
        time.sleep(TICK_S)
        last, stopped = _ticks
        now = time.monotonic()
        _ticks = (now, stopped + stopped_for(now - last))


def _forget() -> None:
    """In a forked child, which has no ticking thread: the clock starts again at its first call."""
    global _ticks
    _ticks = None


os.register_at_fork(after_in_child=_forget)
