"""Several `jaxmem run` processes on one sweep, through JAX's multi-controller runtime (`jax.distributed`).

Each process computes on its own local devices only and owns a disjoint slice of the sweep's
(point, seed) units, so a threshold search never leaves its process. The processes talk only
through the distributed runtime's key-value store: each publishes its status at a named step and
reads everyone's, so an error in one process (a folder in use, a different sweep) reaches every
other as a clear message instead of a hang. A process that dies (killed, crashed) or hangs is caught
by jaxmem's own beat through that store (`peers_watched`), which ends the others with a message
within PEER_TIMEOUT_S, before the runtime's health check would abort them with a C++ stack trace
(their stored results stay; rerunning the job resumes). The death of process 0, which hosts the
runtime's service, still aborts the others at once: the runtime does that before any beat is missed, and
the `jaxmem` command's supervisor (jaxmem.cli.supervise) turns that abort into the same one line.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import os
import socket
import threading
import time
from typing import Callable

import jax

from jaxmem.driver import COORDINATOR_ENV, COUNT_ENV, INDEX_ENV

AUTO = "auto"  # let jax.distributed detect the cluster (Slurm, Open MPI, Cloud TPU pods, Kubernetes)
OK = "ok"
FOREVER_MS = 2**31 - 1  # the longest wait the runtime accepts (24.8 days): peers may work for hours
BEATS = "jaxmem/beat/"  # each process's beat (a counter), then LEFT
LEFT = "left"  # a process's last beat: done with the job, so its silence is no loss
BEAT_S = 1.0
PEER_TIMEOUT_S = 20.0  # a peer whose beat has not changed for this long is lost
RUNTIME_HEARTBEAT_S = 100  # the runtime's own check, which aborts the process: well after PEER_TIMEOUT_S
SURVIVORS_S = 5.0  # how long process 0 (the runtime's service) waits for the other survivors to exit first
NO_BEAT = f"no beat for {PEER_TIMEOUT_S:g} s: killed, crashed or hung"  # how `peers_watched` finds a peer lost
DISCONNECTED = "JAX's runtime lost its connection: killed, crashed or unreachable"  # how the others find process 0 lost


class DistributedError(RuntimeError):
    """A multi-process run was misconfigured, could not start, or one of its processes failed."""


@dataclasses.dataclass(frozen=True)
class Cluster:
    coordinator: str  # "host:port" of process 0's coordinator service, or AUTO
    num_processes: int | None  # None: detected (AUTO)
    process_id: int | None


def cluster_from(coordinator=None, num_processes=None, process_id=None, environ=os.environ) -> Cluster | None:
    """The multi-process setting from the flags, falling back to JAXMEM_COORDINATOR,
    JAXMEM_NUM_PROCESSES and JAXMEM_PROCESS_ID; None for an ordinary single-process run.
    `coordinator="auto"` leaves whatever is not given to jax.distributed's cluster detection."""
    coordinator = coordinator or environ.get(COORDINATOR_ENV) or None
    count = num_processes if num_processes is not None else _env_int(environ, COUNT_ENV)
    index = process_id if process_id is not None else _env_int(environ, INDEX_ENV)
    if coordinator is None and count is None and index is None:
        return None
    if count is not None and count < 1:
        raise DistributedError(f"--num-processes must be >= 1, got {count}")
    if index is not None and count is not None and not 0 <= index < count:
        raise DistributedError(f"--process-id {index} is out of range for --num-processes {count} (0 to {count - 1})")
    if coordinator == AUTO:
        return Cluster(AUTO, count, index)
    missing = [
        flag
        for flag, v in (("--coordinator", coordinator), ("--num-processes", count), ("--process-id", index))
        if v is None
    ]
    if missing:
        raise DistributedError(
            f"a multi-process run needs --coordinator HOST:PORT, --num-processes and --process-id "
            f"(or {COORDINATOR_ENV}, {COUNT_ENV}, {INDEX_ENV}; --coordinator auto detects Slurm, Open MPI "
            f"and TPU pods); missing: {', '.join(missing)}"
        )
    host, _, port = coordinator.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise DistributedError(f"--coordinator must be HOST:PORT (e.g. 10.0.0.1:7777), got {coordinator!r}")
    return None if count == 1 else Cluster(coordinator, count, index)


def _env_int(environ, name: str) -> int | None:
    value = environ.get(name, "").strip()
    if not value:
        return None
    try:
        return int(value)
    except ValueError:
        raise DistributedError(f"{name} must be an integer, got {value!r}") from None


def initialize(cluster: Cluster, timeout_s: float) -> tuple[int, int]:
    """Join the job (before anything touches a device); returns (process id, process count)."""
    if cluster.coordinator != AUTO and cluster.process_id != 0:
        wait_reachable(cluster.coordinator, timeout_s)
    auto = cluster.coordinator == AUTO
    try:
        jax.distributed.initialize(
            coordinator_address=None if auto else cluster.coordinator,
            num_processes=cluster.num_processes,
            process_id=cluster.process_id,
            initialization_timeout=max(1, int(timeout_s)),
            heartbeat_timeout_seconds=RUNTIME_HEARTBEAT_S,
        )
    except (RuntimeError, ValueError) as err:
        where = "the detected cluster" if auto else f"coordinator {cluster.coordinator}"
        hint = " (is the port in use?)" if cluster.process_id == 0 else ""
        raise DistributedError(f"could not start the distributed runtime with {where}{hint}: {err}") from None
    return jax.process_index(), jax.process_count()


def wait_reachable(address: str, timeout_s: float) -> None:
    """Wait until something listens at `address` (process 0's coordinator), or raise after `timeout_s`:
    JAX itself aborts the process, without a Python error, when it cannot reach the coordinator."""
    host, _, port = address.rpartition(":")
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            socket.create_connection((host.strip("[]"), int(port)), timeout=2.0).close()
            return
        except OSError as err:
            if time.monotonic() >= deadline:
                raise DistributedError(
                    f"cannot reach the coordinator {address} within {timeout_s:g} s ({err}); start process 0 "
                    "(--process-id 0) with the same --coordinator, and check the host name and that the port is open"
                ) from None
            time.sleep(0.5)


def leave() -> None:
    """Leave the job through JAX's shutdown barrier. Python's exit does it; a process that ends by
    `os._exit` (a stop that abandoned a compile) must do it first, or every other process aborts at
    that barrier when this one's heartbeats stop."""
    jax.distributed.shutdown()


def _client():
    from jax._src import distributed  # the runtime's key-value store; JAX has no public API for it

    return distributed.global_state.client


def publish(step: str, status: str = OK) -> None:
    """Tell every process this one's status at `step` (OK, or an error message)."""
    _client().key_value_set(f"jaxmem/{step}/{jax.process_index()}", status)


def statuses(step: str, timeout_s: float | None = None, processes=None) -> dict[int, str]:
    """Every process's status at `step` (waiting for each, up to `timeout_s`; None: no limit)."""
    wait = FOREVER_MS if timeout_s is None else min(int(timeout_s * 1000), FOREVER_MS)
    ids = range(jax.process_count()) if processes is None else processes
    return {i: _client().blocking_key_value_get(f"jaxmem/{step}/{i}", wait) for i in ids}


def agree(step: str, status: str = OK, timeout_s: float | None = None) -> None:
    """Publish this process's status, wait for all, and raise DistributedError if any is not OK."""
    publish(step, status)
    failed = {i: s for i, s in statuses(step, timeout_s).items() if s != OK}
    if failed:
        raise DistributedError("; ".join(f"process {i}: {s}" for i, s in sorted(failed.items())))


def seen_at(seen: dict[int, tuple[str | None, float]], beats: dict[int, str], now: float) -> dict:
    """Each peer's latest beat and when it changed (this process's clock: hosts' clocks need not agree),
    after reading `beats` (process -> beat) at `now`."""
    return {k: (beat, since) if beats.get(k) == beat else (beats.get(k), now) for k, (beat, since) in seen.items()}


def silent(seen: dict[int, tuple[str | None, float]], now: float, timeout_s: float = PEER_TIMEOUT_S) -> list[int]:
    """The peers whose beat has not changed for `timeout_s`, but for those that left the job."""
    return sorted(k for k, (beat, since) in seen.items() if beat != LEFT and now - since >= timeout_s)


def lost_text(lost: list[int], count: int, how: str = NO_BEAT) -> str:
    """'process 1 of 2 stopped answering (how)' for the lost processes (those `silent` found, by default)."""
    who = f"process {lost[0]}" if len(lost) == 1 else f"processes {', '.join(map(str, lost))}"
    return f"{who} of {count}{' (the coordinator)' if lost == [0] else ''} stopped answering ({how})"


@contextlib.contextmanager
def peers_watched(on_lost: Callable[[list[int]], None]):
    """Beat, and watch every other process's beat, while the body runs; then beat LEFT. Peers silent for
    PEER_TIMEOUT_S are passed to `on_lost` from the watch thread, which is to end this process at once
    (the runtime aborts it otherwise): the other survivors exit first, process 0 (the runtime's service,
    whose exit aborts them) last."""
    stop = threading.Event()
    thread = threading.Thread(target=_watch, args=(on_lost, stop), name="jaxmem-peers", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
        with contextlib.suppress(jax.errors.JaxRuntimeError):  # the runtime is going down: nobody waits
            _beat(LEFT)


def _watch(on_lost: Callable[[list[int]], None], stop: threading.Event) -> None:
    me = jax.process_index()
    seen = {k: (None, time.monotonic()) for k in range(jax.process_count()) if k != me}
    try:
        for beat in itertools.count():
            _beat(str(beat))
            seen = seen_at(seen, _beats(), time.monotonic())
            lost = silent(seen, time.monotonic())
            if lost:
                _beat(LEFT)
                if me == 0:
                    _await_left(set(seen) - set(lost), SURVIVORS_S)
                on_lost(lost)
                return
            if stop.wait(BEAT_S):
                return
    except jax.errors.JaxRuntimeError:  # the runtime is going down: its own check ends this process
        return


def _await_left(processes: set[int], timeout_s: float) -> None:
    """Wait until every one of `processes` has beaten LEFT, up to `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and any(_beats().get(k) != LEFT for k in processes):
        time.sleep(BEAT_S / 4)


def _beat(beat: str) -> None:
    _client().key_value_set(f"{BEATS}{jax.process_index()}", beat, allow_overwrite=True)


def _beats() -> dict[int, str]:
    return {int(key.rsplit("/", 1)[1]): beat for key, beat in _client().key_value_dir_get(BEATS)}


def owned(items: list, index: int, count: int) -> list:
    """Process `index`'s share of `items` (every count-th, from its index): deterministic, disjoint and
    balanced in count; neighbours in a sweep's point-major order (seeds of a point, similar sizes) go
    to different processes, which balances the work too."""
    return items[index::count]
