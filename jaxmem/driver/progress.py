"""Live progress (rich, on a terminal): runs and searches done, steps/s and ETA; `quiet`, or output that is no
terminal (a log file, a pipe), gets plain log lines instead, unwrapped."""

from __future__ import annotations

import sys
import time

from rich.console import Console
from rich.progress import BarColumn, Progress as RichProgress, TextColumn, TimeElapsedColumn


class Progress:
    def __init__(self, quiet: bool = False, title: str = "sweep", log_every: float = 10.0):
        self.quiet, self.title, self.log_every = quiet, title, log_every
        self.console = Console(stderr=True, log_path=False)  # (log_path: rich's source location of each line)
        self.started = time.perf_counter()
        self.steps = 0
        self.done = self.pending = 0
        self.searches = (0, 0)
        self.runs_this_session = 0
        self.last_log = 0.0
        self.stopping = False  # a stop was noted: from then on only what concerns it is shown
        self.bar = (
            None
            if quiet or not self.console.is_terminal
            else RichProgress(
                TextColumn("[bold]{task.description}"),
                BarColumn(),
                TextColumn("{task.fields[info]}"),
                TimeElapsedColumn(),
                console=self.console,
                transient=False,
            )
        )
        self.task = None

    def __enter__(self) -> "Progress":
        if self.bar is not None:
            self.bar.start()
            self.task = self.bar.add_task(self.title, total=1, info="starting")
        else:
            self.note(f"{self.title}: starting")
        return self

    def __exit__(self, *exc) -> None:
        self._render(force=True)
        if self.bar is not None:
            self.bar.stop()

    def note(self, message: str, stopping: bool = False) -> None:
        """Show `message`; once a note concerning a stop (`stopping`) was shown, only such notes are: a
        stop ends in a few lines, not in notes of the work it abandons (a compile, a restore) racing in."""
        self.stopping |= stopping
        if self.stopping and not stopping:
            return
        if self.bar is not None:
            self.bar.console.log(message)
        else:
            print(f"[jaxmem] {message}", file=sys.stderr, flush=True)

    def update(self, done: int, pending: int, searches: tuple[int, int]) -> None:
        self.done, self.pending, self.searches = done, pending, searches
        self._render()

    def advance(self, steps: int, runs: int) -> None:
        self.steps += steps
        self.runs_this_session += runs

    def info(self) -> str:
        elapsed = max(time.perf_counter() - self.started, 1e-9)
        rate = self.runs_this_session / elapsed
        queued = "queued runs; searches add more" if self.searches[0] < self.searches[1] else "queued runs"
        eta = f"{self.pending / rate:.0f}s ({queued})" if rate > 0 and self.pending else "-"
        searches = f" | searches {self.searches[0]}/{self.searches[1]}" if self.searches[1] else ""
        return (
            f"runs {self.done} done, {self.pending} queued{searches} | {self.steps / elapsed:,.0f} steps/s | ETA {eta}"
        )

    def _render(self, force: bool = False) -> None:
        if self.bar is not None:
            self.bar.update(self.task, total=max(self.done + self.pending, 1), completed=self.done, info=self.info())
        elif force or time.perf_counter() - self.last_log >= self.log_every:
            self.last_log = time.perf_counter()
            self.note(f"{self.title}: {self.info()}")
