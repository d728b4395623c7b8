"""A watch over what the driver waits for (a segment on the device, a compile): the driver never waits
forever without saying so, and a stop signal ends the wait even when the program never returns.

A wait that outlasts `STALL_FACTOR` times its expected time (or `stall_after_s` when there is no
timing yet) is reported, then again each time its age doubles. After SIGINT/SIGTERM the driver lets
the wait finish for a grace period (twice its expected time, at least `GRACE_S`; `GRACE_S` without
timing), then the watch thread sends the signal again, to the main thread, whose handler (run even
while JAX blocks that thread) raises `Abandoned` since the wait is past its grace. What the abandoned
program computed since its bucket's last checkpoint is lost; everything stored stays. A main thread
that does not even run the handler (a program hung in native code that never checks for signals) is,
with `hard_exit`, ended from the watch thread after `UNRESPONSIVE_S`: `os._exit` with the signal's
exit code, as safe as kill -9 for the store (committed rows are on disk) and the lock (a dead pid's
lease is stale at once).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import threading
import time
from typing import Callable

STALL_FACTOR = 10.0
STALL_AFTER_ENV = "JAXMEM_STALL_AFTER_S"  # seconds before a wait with no timing is reported (default 60)
GRACE_S = 5.0
UNRESPONSIVE_S = 5.0
POLL_S = 0.25
EXIT_CODES = {2: 130, 15: 143}  # SIGINT, SIGTERM


@dataclasses.dataclass
class Wait:
    what: str  # "segment of bucket 1a2b (d=16, N=512) with 32 slots"
    expected_s: float | None
    started: float = dataclasses.field(default_factory=time.monotonic)
    reported_at: float = 0.0  # age at the latest stall report

    def age(self) -> float:
        return time.monotonic() - self.started

    def grace(self) -> float:
        return GRACE_S if self.expected_s is None else max(2.0 * self.expected_s, GRACE_S)

    def stalled_after(self, stall_after_s: float) -> float:
        return stall_after_s if self.expected_s is None else max(STALL_FACTOR * self.expected_s, stall_after_s / 6)

    def stall_message(self) -> str:
        expected = "no timing yet" if self.expected_s is None else f"expected ≈ {self.expected_s:.3g} s"
        return (
            f"{self.what} has not returned after {self.age():.0f} s ({expected}); still waiting. "
            "Ctrl-C or SIGTERM stops the sweep: stored results stay, in-flight runs resume from their last checkpoint"
        )


class Abandoned(Exception):
    """Raised in the main thread when a stop signal arrives and the current wait is past its grace."""

    def __init__(self, signum: int, wait: Wait):
        self.signum, self.wait = signum, wait
        super().__init__(f"abandoned the {wait.what} after {wait.age():.1f} s")


def stall_after_s(environ=os.environ) -> float:
    text = environ.get(STALL_AFTER_ENV, "").strip()
    try:
        return float(text) if text else 60.0
    except ValueError:
        raise ValueError(f"{STALL_AFTER_ENV} must be a number of seconds, got {text!r}") from None


class Watch:
    """Watches one wait at a time from a daemon thread; `note` reports stalls (from that thread)."""

    def __init__(self, note: Callable[[str], None], hard_exit: bool = False):
        self.note, self.hard_exit = note, hard_exit
        self.stall_after = stall_after_s()
        self.current: Wait | None = None
        self.stop_signal: int | None = None
        self.interrupted = 0.0  # when the main thread was interrupted for the current wait (0: not)
        self.resent = False  # the watch has sent the stop signal to the main thread
        self.abandoned: Abandoned | None = None  # raised in the main thread (JAX may wrap it: a callback)
        self._closed = threading.Event()
        self._thread: threading.Thread | None = None  # started by the first wait

    @contextlib.contextmanager
    def waiting(self, what: str, expected_s: float | None = None):
        if self._thread is None:
            self._thread = threading.Thread(target=self._watch, name="jaxmem-watch", daemon=True)
            self._thread.start()
        self.current, self.interrupted = Wait(what, expected_s), 0.0
        try:
            yield self.current
        finally:
            self.current = None

    def past_grace(self) -> Wait | None:
        """The current wait if it has run past its grace (a stop signal then abandons it)."""
        wait = self.current
        return wait if wait is not None and wait.age() >= wait.grace() else None

    def stop_requested(self, signum: int) -> None:
        """From the signal handler: interrupt the current wait once it is past its grace."""
        self.stop_signal = signum

    def abandon(self, signum: int, wait: Wait) -> Abandoned:
        """From the signal handler: the exception that abandons `wait` (remembered)."""
        self.abandoned = Abandoned(signum, wait)
        return self.abandoned

    def close(self) -> None:
        self._closed.set()

    def _watch(self) -> None:
        while not self._closed.wait(POLL_S):
            wait = self.current
            if wait is None:
                continue
            age = wait.age()
            if age >= max(wait.stalled_after(self.stall_after), 2 * wait.reported_at):
                wait.reported_at = age
                self.note(wait.stall_message())
            if self.stop_signal is None or age < wait.grace():
                continue
            if not self.interrupted:
                self.interrupted, self.resent = time.monotonic(), True
                signal.pthread_kill(threading.main_thread().ident, self.stop_signal)  # its handler raises
            elif self.hard_exit and time.monotonic() - self.interrupted >= UNRESPONSIVE_S:
                self.note(
                    f"the {wait.what} does not return and the main thread does not respond; exiting now "
                    "(stored results are safe; in-flight runs resume from their last checkpoint)"
                )
                os._exit(EXIT_CODES.get(self.stop_signal, 143))
