"""Stopping a sweep: SIGINT / SIGTERM ask the driver to stop at the next segment end, after the finished
runs are stored and the slots checkpointed; a wait past its grace is abandoned (jaxmem.driver.watchdog);
another run taking the output folder (the lease) stops it too."""

from __future__ import annotations

import signal

from jaxmem.driver.progress import Progress
from jaxmem.driver.watchdog import Watch
from jaxmem.engine.executor import BucketRunner
from jaxmem.persistence.lock import LockError, OutputLock

EXIT_INTERRUPTED = 130
EXIT_TERMINATED = 143


class Interrupted(RuntimeError):
    """The sweep was stopped by a signal after saving everything; rerun to resume. With `abandoned`,
    the stop cut short a wait (a segment past its grace, a compile): that work goes on in a background
    thread, so a command line tool should exit without waiting for it (os._exit)."""

    def __init__(self, signum: int, abandoned: str = ""):
        self.signum, self.abandoned = signum, abandoned
        saved = (
            f"abandoned the {abandoned}; stored results and earlier checkpoints are kept"
            if abandoned
            else "results and checkpoints are saved"
        )
        super().__init__(f"stopped by {signal.Signals(signum).name}; {saved}, rerun the same command to resume")


class Stopper:
    """The stop requests of one sweep: its signal handler (`request_stop`), its watch on waits, and its
    lease on the output folder (checked at segment ends: stop if another run took the folder)."""

    def __init__(self, progress: Progress, lease: OutputLock | None, hard_exit: bool):
        self.progress, self.lease = progress, lease
        self.stop_signal: int | None = None
        self.watch = Watch(lambda message: self.progress.note(message, self.stop_signal is not None), hard_exit)

    def request_stop(self, signum, _frame=None) -> None:
        """The SIGINT/SIGTERM handler (main thread). A signal asks the driver to stop after the current
        wait (a repeated SIGTERM too, as a pre-emptor may send it); a wait past its grace (see
        driver.watchdog) is abandoned, and so is any wait on a second Ctrl-C. A second Ctrl-C outside a
        wait is ignored: the stop it asks for is under way (saving checkpoints, which an exception raised
        here would break). The watch thread's own resending of the signal is otherwise ignored."""
        wait = self.watch.past_grace()
        if wait is None and signum == signal.SIGINT and self.stop_signal is not None and not self.watch.resent:
            wait = self.watch.current
            if wait is None:
                return
        if wait is not None:
            raise self.watch.abandon(self.stop_signal or signum, wait)
        if self.watch.resent:
            return
        self.stop_signal = self.stop_signal or signum
        self.watch.stop_requested(self.stop_signal)
        self.progress.note(f"{signal.Signals(signum).name} received: finishing the current segment and saving", True)

    def check(self, runners: list[BucketRunner], compiling: bool = False) -> None:
        """Stop (Interrupted) if a signal asked for it, after checkpointing every runner; `compiling`:
        a compile is still running in its thread."""
        if self.lease is not None:
            try:
                self.lease.check()
            except LockError:  # another run may use the folder: no new checkpoint; those under way finish
                for runner in runners:  # (orbax's threads would fail at exit: a screen of tracebacks)
                    runner.close()
                raise
        if self.stop_signal is not None:
            save_runners(runners)
            raise Interrupted(self.stop_signal, "compile of the next bucket" if compiling else "")


def save_runners(runners: list[BucketRunner], skip: BucketRunner | None = None) -> None:
    """Checkpoint the segments since each runner's last checkpoint (not `skip`'s: its state is in a
    program that has not returned) and close them."""
    for runner in runners:
        if runner is not skip:
            runner.checkpoint(force=True)
        runner.close()
