"""The `jaxmem` command of a multi-process run: a light supervisor (no JAX) of a child doing the work.

JAX's runtime ends every process of a job whose process 0, the host of its coordination service, dies: at
once, from one of its threads, with an absl fatal log and a C++ stack trace (SIGABRT, exit 134). Nothing in
jaxlib 0.10.2 lets a process outlive or catch that (jax_enable_recoverability, shutdown_on_destruction=False
and a client of one's own still abort; a missed_heartbeat_callback fails with std::bad_cast). So a
multi-process `jaxmem run` runs the same command in a child and, should the runtime abort it, prints one
line in place of that log: the child's last words (`bequeath`: the lost process, where this one keeps its
runs, the resume command), exit 5 (DistributedError's code).

The child keeps stdout and, for Python's own output, the stream the command was given (a terminal: the live
progress bar); only native code's stderr (the runtime's logs) passes through the supervisor, line by line,
up to the runtime's fatal log. The child runs in its own process group: a Ctrl-C at the terminal reaches the
supervisor only, which forwards it, as it does SIGTERM; the child's exit code is the command's. The child
dies with its supervisor (kill -9 of `jaxmem` ends its work, as before).
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import threading
from typing import Callable, Iterable

from jaxmem.cli.errors import EXIT_CODES
from jaxmem.driver import COORDINATOR_ENV

CHILD_ENV = "JAXMEM_SUPERVISOR"  # in the child: "<fd of the command's stderr>,<fd of the channel to the supervisor>"
RUNTIME_ABORT = re.compile(r"F\d{4} .*Terminating process because")  # absl's fatal log line of the runtime's abort
RUNTIME_LOG = re.compile(r"[WE]\d{4} .* (coordination_service_agent|preemption_sync_manager)\.cc:\d+\] ")
LOG = re.compile(r"[IWEF]\d{4} ")  # an absl log line; the lines that follow one, up to the next, continue it
FORWARDED = (signal.SIGINT, signal.SIGTERM)
EXIT_DISTRIBUTED = next(code for _, name, code in EXIT_CODES if name == "DistributedError")

_channel: socket.socket | None = None  # in a supervised child: to its supervisor


def as_command(argv: list[str], command: Callable[[list[str]], int]) -> int:
    """`command(argv)`'s exit code: in a supervised child if `argv` is a multi-process run (and attached to
    its supervisor in that child)."""
    child = os.environ.pop(CHILD_ENV, None)
    if child is not None:
        attach(child)
    elif multi_process(argv, os.environ):
        return supervise(argv)
    return command(argv)


def multi_process(argv: list[str], environ) -> bool:
    """Whether `jaxmem argv` is a multi-process run: `run` with a coordinator, given or from the environment."""
    named = any(arg == "--coordinator" or arg.startswith("--coordinator=") for arg in argv)
    return argv[:1] == ["run"] and (named or bool(environ.get(COORDINATOR_ENV)))


def supervise(argv: list[str]) -> int:
    """Run `jaxmem argv` in a child; its exit code, or EXIT_DISTRIBUTED with one line if JAX's runtime aborted it."""
    ours, theirs = socket.socketpair()
    stream = os.dup(sys.stderr.fileno())
    child = subprocess.Popen(
        [sys.executable, "-m", "jaxmem.cli", *argv],
        stderr=subprocess.PIPE,
        env={**os.environ, CHILD_ENV: f"{stream},{theirs.fileno()}"},
        pass_fds=(stream, theirs.fileno()),
        process_group=0,
        errors="backslashreplace",
        text=True,
    )
    os.close(stream)
    theirs.close()
    for signum in FORWARDED:
        signal.signal(signum, lambda signum, frame: child.send_signal(signum))
    abort = forwarded(child.stderr, sys.stderr.write)
    child.stderr.read()  # the abort's stack trace
    code, line = outcome(child.wait(), abort, last_words(ours))
    if line:
        print(line, file=sys.stderr)
    return code


def forwarded(lines: Iterable[str], write: Callable[[str], object]) -> str | None:
    """Write `lines` up to JAX's runtime's abort; its fatal log line (its stack trace follows), or None. The
    runtime's logs of its coordination service, which come just before (the lost connection), are held back
    (with the lines continuing them) until another log line or the end: the abort drops them."""
    held = ""
    for line in lines:
        if RUNTIME_ABORT.match(line):
            return line
        if RUNTIME_LOG.match(line) or (held and not LOG.match(line)):
            held += line
        else:
            write(held + line)
            held = ""
    write(held)
    return None


def outcome(returncode: int, abort: str | None, will: str) -> tuple[int, str]:
    """The supervisor's exit code and its line from how the child ended: killed by JAX's runtime after its
    fatal log line `abort`: EXIT_DISTRIBUTED and the child's last words `will` (else the log's message); its
    exit code otherwise (128 + N for signal N, as a shell has it)."""
    if returncode < 0 and abort is not None:
        logged = abort.split("] ", 1)[-1].strip()
        return EXIT_DISTRIBUTED, will or f"jaxmem: error: JAX's runtime ended this process: {logged}"
    return (returncode if returncode >= 0 else 128 - returncode), ""


def last_words(channel: socket.socket) -> str:
    """The last line the ended child bequeathed through `channel`."""
    with channel:
        received = b"".join(iter(lambda: channel.recv(4096), b""))
    return received.decode().strip().rpartition("\n")[2]


def attach(child: str) -> None:
    """In the child: Python's stderr back on the command's (native code's stays on the supervisor's pipe); the
    channel to the supervisor kept for `bequeath`, and watched: the child dies with its supervisor."""
    global _channel
    stream, channel = map(int, child.split(","))
    sys.stderr = open(stream, "w", buffering=1, encoding=sys.stderr.encoding, errors=sys.stderr.errors)
    _channel = socket.socket(fileno=channel)
    _channel.set_inheritable(False)
    threading.Thread(target=_die_with_supervisor, name="jaxmem-supervisor", daemon=True).start()


def bequeath(line: str) -> None:
    """The line the supervisor is to print should JAX's runtime abort this process (nothing unsupervised)."""
    if _channel is not None:
        _channel.sendall(f"{line}\n".encode())


def _die_with_supervisor() -> None:
    with contextlib.suppress(OSError):
        _channel.recv(1)  # nothing comes: returns at the supervisor's end
    os.kill(os.getpid(), signal.SIGKILL)
