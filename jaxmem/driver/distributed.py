"""Several `jaxmem run` processes on one sweep, through JAX's multi-controller runtime (`jax.distributed`).

Each process computes on its own local devices only and owns a disjoint slice of the sweep's
(point, seed) units, so a threshold search never leaves its process. The processes talk only
through the distributed runtime's key-value store: each publishes its status at a named step and
reads everyone's, so an error in one process (a folder in use, a different sweep) reaches every
other as a clear message instead of a hang. A process that dies is caught by the runtime's health
check, which ends the others (their stored results stay; rerunning the job resumes).
"""

from __future__ import annotations

import dataclasses
import os
import socket
import time

import jax

COORDINATOR_ENV, COUNT_ENV, INDEX_ENV = "JAXMEM_COORDINATOR", "JAXMEM_NUM_PROCESSES", "JAXMEM_PROCESS_ID"
AUTO = "auto"  # let jax.distributed detect the cluster (Slurm, Open MPI, Cloud TPU pods, Kubernetes)
OK = "ok"
FOREVER_MS = 2**31 - 1  # the longest wait the runtime accepts (24.8 days): peers may work for hours


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


def owned(items: list, index: int, count: int) -> list:
    """Process `index`'s share of `items` (every count-th, from its index): deterministic, disjoint and
    balanced in count; neighbours in a sweep's point-major order (seeds of a point, similar sizes) go
    to different processes, which balances the work too."""
    return items[index::count]
