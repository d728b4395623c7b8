"""One `jaxmem run` per output folder: an flock on `<out>/.lock` plus a host-aware lease in that file.

flock excludes runs on one host but not reliably runs on other hosts sharing the folder over NFS, so
the lock file also holds a lease: host, pid and a heartbeat time that a daemon thread refreshes every
HEARTBEAT_SECONDS. A run refuses a folder whose lease is live: another host's with a heartbeat younger
than LEASE_TIMEOUT, or this host's with a live pid. A stale lease (heartbeat older than LEASE_TIMEOUT,
or a dead pid on this host) is taken over with a warning, and so is a lock file holding no readable
lease (damage: a crash, another program) whose flock no process on this host holds. Heartbeats compare
clocks across hosts, so their clocks must agree to well within LEASE_TIMEOUT (NTP). A run that finds its
lease taken over (it was frozen for longer than LEASE_TIMEOUT) stops at its next segment end.

A lock file deleted by hand (say while its run was stopped with SIGSTOP) does not free the folder: a run
also holds an flock on the folder itself, which a second run on this host finds held; and a run checks at
every segment end that its lock file is still the one it locked, stopping when it was deleted or replaced
(a run on another host may then have started).

Anything but a regular file in the lock file's place (a directory, a FIFO, a symbolic link) is refused with
one line naming it, and never opened for reading: a FIFO would block, a link lead elsewhere.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import fcntl
import json
import logging
import os
import socket
import stat
import threading
import time
import uuid
from pathlib import Path

from jaxmem.persistence.store import NO_SPACE, StoreError, no_space, not_writable

LEASE_TIMEOUT = 60.0  # seconds without a heartbeat after which a lease is stale
HEARTBEAT_SECONDS = 5.0
SETTLE_SECONDS = 0.1  # after writing a lease, wait this long and re-read it: two hosts may have raced
RECORD_BYTES = 512  # leases are rewritten in place at a fixed width, so a reader never sees an empty file
NEVER_BLOCKS = os.O_NOFOLLOW | os.O_NONBLOCK  # opening a link fails, opening a FIFO does not wait for a writer
UNUSABLE = "unusable lock file"  # lock_state of a folder whose lock file is no regular file

log = logging.getLogger("jaxmem")


LOCK_FILE = ".lock"  # in the output folder


def lock_path(out_dir: Path) -> Path:
    return Path(out_dir) / LOCK_FILE


class LockError(RuntimeError):
    """Another process is running a sweep in this output folder, or its lock file cannot be one."""


def not_a_lock_file(path: Path, mode: int) -> LockError:
    """The error of a lock file whose place holds something of file `mode` other than a regular file."""
    remove = "rm -r" if stat.S_ISDIR(mode) else "rm"
    return LockError(
        f"{path} is {kind_of(path, mode)}, not jaxmem's lock file; remove it (e.g. `{remove} {path}`) and rerun"
    )


def kind_of(path: Path, mode: int) -> str:
    """What a file of `mode` at `path` is, in words: "a named pipe (FIFO)", "a symbolic link to /x (missing)"."""
    if stat.S_ISLNK(mode):
        with contextlib.suppress(OSError):
            return f"a symbolic link to {os.readlink(path)}" + ("" if path.exists() else " (missing)")
    kinds = {stat.S_ISDIR: "a directory", stat.S_ISLNK: "a symbolic link", stat.S_ISFIFO: "a named pipe (FIFO)"}
    return next((name for test, name in kinds.items() if test(mode)), "a socket or device file")


def odd_lock_file(path: Path) -> LockError | None:
    """The error of anything but a regular file at `path` (read with lstat: nothing is opened), None for
    a regular file or none."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return None
    return None if stat.S_ISREG(mode) else not_a_lock_file(path, mode)


def open_lock_file(path: Path, flags: int) -> int:
    """A descriptor of the regular file at `path` opened with `flags`; LockError for anything else there."""
    if (odd := odd_lock_file(path)) is not None:
        raise odd
    fd = os.open(path, flags | NEVER_BLOCKS, 0o644)  # (something put there since the lstat: checked again)
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise not_a_lock_file(path, mode)
    return fd


@dataclasses.dataclass(frozen=True)
class Lease:
    host: str
    pid: int
    heartbeat: float  # time.time() on the holder's host
    token: str  # tells two holders apart (pids repeat across hosts)

    def describe(self, now: float) -> str:
        return f"pid {self.pid} on host {self.host}, last heartbeat {max(now - self.heartbeat, 0.0):.0f} s ago"


def parse_lease(text: str) -> Lease | None:
    """The lease a lock file holds, or None when it is empty or unreadable."""
    try:
        fields = json.loads(text)
        lease = Lease(str(fields["host"]), int(fields["pid"]), float(fields["heartbeat"]), str(fields["token"]))
    except (ValueError, TypeError, KeyError):
        return None
    return lease if lease.pid > 0 else None  # os.kill(0 or -1, 0) would signal a group: no process of its own


def read_record(path: Path, attempts: int = 5) -> tuple[Lease | None, bool]:
    """The lease in a lock file and whether the file is damaged (holds something else: random bytes, a
    record cut short); (None, False) when it is missing or blank (released). A record caught mid-write
    (e.g. on another host) is read again."""
    for _ in range(attempts):
        try:
            with os.fdopen(open_lock_file(path, os.O_RDONLY), "rb") as handle:
                text = handle.read().decode(errors="replace")
        except (OSError, LockError):  # missing, or no regular file (see lock_state)
            return None, False
        lease = parse_lease(text)
        if lease is not None or not text.strip():
            return lease, False
        time.sleep(0.01)
    return None, True


def read_lease(path: Path, attempts: int = 5) -> Lease | None:
    """The lease in a lock file; None when it is missing, blank (released) or stays unreadable."""
    return read_record(path, attempts)[0]


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, owned by another user
        return True
    return True


def stale_reason(lease: Lease, host: str, now: float, alive=pid_alive) -> str | None:
    """Why `lease` no longer holds the folder (seen from `host` at `now`), or None while it is live."""
    age = now - lease.heartbeat
    if age >= LEASE_TIMEOUT:
        return f"no heartbeat for {age:.0f} s (timeout {LEASE_TIMEOUT:.0f} s)"
    if lease.host == host and not alive(lease.pid):
        return "that process is no longer running"
    return None


class OutputLock:
    def __init__(self, out_dir: Path):
        self.path = lock_path(out_dir)
        self.fd: int | None = None
        self.folder: int | None = None  # a descriptor of the folder, flocked (see hold_folder)
        self.inode: tuple[int, int] | None = None  # the lock file's identity
        self.lease: Lease | None = None
        self.lost: str | None = None  # why this run no longer holds the folder (see loss)
        self._stop = threading.Event()
        self._beat: threading.Thread | None = None

    def __enter__(self) -> "OutputLock":
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.folder = hold_folder(self.path.parent)  # first: a refused run creates no lock file
            self.fd = open_lock_file(self.path, os.O_RDWR | os.O_CREAT)  # not O_APPEND: leases are rewritten in place
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            self.inode = identity(os.fstat(self.fd))
            self._take_lease()
        except BlockingIOError:
            self._release()
            raise self._in_use(self._read()) from None
        except OSError as err:  # the lock file's creation or the lease's write: the run's first
            self._release()
            raise self._refused(err) from None
        except BaseException:
            self._release()
            raise
        self._beat = threading.Thread(target=self._heartbeat, name="jaxmem-lease", daemon=True)
        self._beat.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._beat is not None:
            self._beat.join()
        if self.lost is None and self.fd is not None:
            with contextlib.suppress(OSError):
                self._write("")  # a finished run leaves no lease behind
        self._release()

    def _refused(self, err: OSError) -> OSError | StoreError:
        """The error of a lock file the folder refused: one naming the folder for a folder that may not be
        written or a full disk (its first write: a bare '[Errno 28] No space left on device' was shown),
        else `err`."""
        if err.errno in NO_SPACE:
            return no_space(self.path.parent, "the run stored nothing there, and anything stored before is kept")
        if err.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
            return not_writable(self.path.parent, Path(err.filename or self.path), err.strerror)
        return err

    def check(self) -> None:
        """Raise LockError if this run no longer holds its folder (see loss); at every segment end, in the
        driver's thread: it reads the lock file itself, so a takeover is seen at the first check after it."""
        self.lost = self.lost or self.loss()
        if self.lost is not None:
            raise LockError(
                f"output folder {self.path.parent} {self.lost}; stopping (stored results are kept: rerun to resume "
                "once no other run uses the folder)"
            )

    def loss(self) -> str | None:
        """Why this run no longer holds its folder: its lock file was deleted or replaced, or another run
        took its lease over (its heartbeat stalled too long); None while it holds it."""
        try:
            now = identity(os.lstat(self.path))
        except FileNotFoundError:
            now = None
        if now != self.inode:
            change = "deleted" if now is None else "replaced"
            return (
                f"lost its lock file {self.path}: it was {change} while this run held it (by hand?), so another "
                "jaxmem run may have started there"
            )
        holder = self._read()
        if holder is not None and holder.token != self.lease.token:
            return (
                f"was taken over by another jaxmem run ({holder.describe(time.time())}) after this run's lease "
                "went stale"
            )
        return None

    # -- the lease ---------------------------------------------------------------------------------
    def _take_lease(self) -> None:
        host, now = socket.gethostname(), time.time()
        held, damaged = read_record(self.path)
        if held is not None:
            reason = stale_reason(held, host, now)
            if reason is None:
                raise self._in_use(held)
            log.warning("taking over the stale lease on %s of %s: %s", self.path.parent, held.describe(now), reason)
        elif damaged:
            log.warning("taking over the damaged lock file %s: it holds no readable lease", self.path)
        self.lease = Lease(host, os.getpid(), now, uuid.uuid4().hex)
        self._write_lease()
        time.sleep(SETTLE_SECONDS)
        winner = self._read()
        if winner is None or winner.token != self.lease.token:
            raise self._in_use(winner)

    def _heartbeat(self) -> None:
        while not self._stop.wait(HEARTBEAT_SECONDS):
            if lost := self.loss():
                self.lost = lost
                log.warning("output folder %s %s", self.path.parent, lost)
                return
            self.lease = dataclasses.replace(self.lease, heartbeat=time.time())
            try:
                self._write_lease()
            except OSError as err:  # e.g. a network file system hiccup: try again at the next beat
                log.warning("could not refresh the lease on %s: %s", self.path.parent, err)

    def _write_lease(self) -> None:
        self._write(json.dumps(dataclasses.asdict(self.lease)))

    def _write(self, text: str) -> None:
        os.pwrite(self.fd, text.ljust(RECORD_BYTES).encode(), 0)  # one write, no truncation first
        os.ftruncate(self.fd, RECORD_BYTES)
        os.fsync(self.fd)  # other hosts must see it (NFS close-to-open)

    def _read(self) -> Lease | None:
        return read_lease(self.path)

    def _in_use(self, holder: Lease | None) -> LockError:
        missing = "" if os.path.lexists(self.path) else f"; its lock file {self.path} is missing"
        owner = holder.describe(time.time()) if holder else f"owner unknown{missing}"
        return LockError(
            f"output folder {self.path.parent} is in use by another jaxmem run ({owner}); wait for it to "
            f"finish or choose another --out (a lease without heartbeat for {LEASE_TIMEOUT:.0f} s is stale)"
        )

    def _release(self) -> None:
        for fd in (self.fd, self.folder):
            if fd is not None:
                os.close(fd)  # (which releases its flock)
        self.fd = self.folder = None


def hold_folder(folder: Path) -> int | None:
    """A descriptor of `folder` with an exclusive flock on it, held while the run lasts: unlike the lock
    file's, nothing but the process's end releases it. BlockingIOError while another process holds it; None
    where the file system has no such locks (NFS: the lease decides there)."""
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as err:
        os.close(fd)
        if isinstance(err, BlockingIOError):
            raise
        return None
    return fd


def identity(info: os.stat_result) -> tuple[int, int]:
    """A file's identity: its device and inode (what a lock file deleted and made again changes)."""
    return info.st_dev, info.st_ino


def lock_state(out_dir: Path) -> str:
    """'idle', 'running: <holder>', 'stale lease of <holder> (<reason>)', 'stale lease: <damage>', or for
    anything but a regular file in the lock file's place 'unusable lock file: <what it is, what to do>',
    for `jaxmem status`."""
    path = lock_path(out_dir)
    try:
        fd = open_lock_file(path, os.O_RDONLY)  # read-only (the folder may be): a run's lock refuses a shared one
    except FileNotFoundError:  # (deleted by hand, its run may still hold the folder)
        return f"running: owner unknown; its lock file {path} is missing" if folder_held(out_dir) else "idle"
    except LockError as err:
        return f"{UNUSABLE}: {err}"
    with os.fdopen(fd) as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
            fcntl.flock(handle, fcntl.LOCK_UN)
            locked_here = False
        except BlockingIOError:
            locked_here = True
    (lease, damaged), now = read_record(path), time.time()
    if lease is None and damaged and not locked_here:
        return "stale lease: the lock file holds no readable lease; the next run takes it over"
    if lease is None:
        return "running: owner unknown" if locked_here else "idle"
    reason = None if locked_here else stale_reason(lease, socket.gethostname(), now)
    return f"running: {lease.describe(now)}" if reason is None else f"stale lease of {lease.describe(now)} ({reason})"


def folder_held(folder: Path) -> bool:
    """Whether a process holds `folder`'s flock (see hold_folder)."""
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        os.close(fd)
    return False
