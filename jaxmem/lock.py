"""One `jaxmem run` per output folder: an exclusive advisory lock on `<out>/.lock`."""

from __future__ import annotations

import fcntl
import os
import socket
from pathlib import Path


class LockError(RuntimeError):
    """Another process is running a sweep in this output folder."""


class OutputLock:
    def __init__(self, out_dir: Path):
        self.path = Path(out_dir) / ".lock"
        self.handle = None

    def __enter__(self) -> "OutputLock":
        self.path.parent.mkdir(parents=True, exist_ok=True)
        handle = open(self.path, "a+")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            owner = handle.read().strip() or "unknown process"
            handle.close()
            raise LockError(
                f"output folder {self.path.parent} is in use by another jaxmem run ({owner}); "
                "wait for it to finish or choose another --out"
            ) from None
        handle.seek(0)
        handle.truncate()
        handle.write(f"pid {os.getpid()} on {socket.gethostname()}")
        handle.flush()
        self.handle = handle
        return self

    def __exit__(self, *exc) -> None:
        if self.handle is not None:
            fcntl.flock(self.handle, fcntl.LOCK_UN)
            self.handle.close()
            self.handle = None
