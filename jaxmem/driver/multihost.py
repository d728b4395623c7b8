"""One process's part of a multi-process `jaxmem run` (see jaxmem.distributed and jaxmem.shards).

Process 0 holds the output folder's lock for the whole job: it binds the folder to the sweep and
merges the shards a stopped job left. Every other process k locks its own shard (`shards/p<k>`),
which refuses a stray process of another job. Each process then runs its share of the units into
its shard, with its own checkpoints, counting what the folder's store already holds as done. When
every process is done, process 0 merges the shards into the folder's store and writes the report.
Each step ends with every process publishing its status, so a failure in one process stops the
others with its message instead of leaving them waiting; a process that dies or hangs stops the others
through its missing beat (jaxmem.driver.distributed.peers_watched).
"""

from __future__ import annotations

import contextlib
import time
from pathlib import Path
from typing import Callable

import jax

from jaxmem.driver import distributed
from jaxmem.engine import device_memory
from jaxmem.driver.distributed import OK, DistributedError
from jaxmem.driver.sweep import execute, open_store
from jaxmem.persistence.lock import OutputLock
from jaxmem.report.from_store import report
from jaxmem.persistence.shards import finished, merge_shards, shard_dir
from jaxmem.spec.sweep import SweepSpec
from jaxmem.persistence.store import Store


def run_process(
    spec: SweepSpec,
    out_dir: Path,
    process_id: int,
    count: int,
    on_peer_lost: Callable[[str], None],
    quiet: bool = False,
    devices=None,
    memory_cap: float | int = device_memory.DEFAULT_CAP,
    noted: dict | None = None,
) -> Path | None:
    """Run process `process_id`'s share of the sweep into `out_dir`; process 0 returns the report path
    once every process is done and the results are merged, the others return None. `on_peer_lost(what)`:
    called from another thread when a peer dies or hangs, with what happened and what this process keeps,
    to end the process at once (see jaxmem.driver.distributed.peers_watched). `noted`: more meta entries
    process 0 keeps with the sweep (see jaxmem.driver.sweep.claim)."""
    out_dir = Path(out_dir)
    started = time.time()
    with distributed.peers_watched(lambda lost: on_peer_lost(peers_lost(out_dir, process_id, count, lost))):
        with contextlib.ExitStack() as held:
            lock = _start(spec, out_dir, process_id, held, noted)
            error = _run_share(spec, out_dir, process_id, count, lock, quiet, devices, memory_cap)
            if process_id == 0:
                return _finish(out_dir, count, started, error)
        distributed.publish("done", _status(error))  # after releasing the shard: process 0 may delete it
        distributed.statuses("merged", processes=[0])
    if error is not None:
        raise error
    return None


def peers_lost(out_dir: Path, process_id: int, count: int, lost: list[int], how: str = distributed.NO_BEAT) -> str:
    """What process `process_id` says when it stops for the processes `lost` (found so: `how`): who, and where
    it keeps its finished runs."""
    kept = f"process {process_id} stops too, keeping its finished runs in {shard_dir(out_dir, process_id)}"
    return f"{distributed.lost_text(lost, count, how)}; {kept}"


def _start(
    spec: SweepSpec, out_dir: Path, process_id: int, held: contextlib.ExitStack, noted: dict | None
) -> OutputLock:
    """Take this process's lock (process 0: the folder's, after which it prepares the folder), then
    wait until every process has; raises the first failure of any process."""
    try:
        lock = held.enter_context(OutputLock(out_dir if process_id == 0 else shard_dir(out_dir, process_id)))
        if process_id == 0:
            open_store(out_dir, spec, noted=noted).close()  # claims the folder, merges what a stopped job left
    except Exception as err:
        distributed.publish("start", _status(err))
        raise
    distributed.agree("start")
    return lock


def _run_share(spec, out_dir, process_id, count, lock, quiet, devices, memory_cap) -> Exception | None:
    """Run this process's units into its shard; returns what stopped it (Interrupted, an error) or None."""
    work = shard_dir(out_dir, process_id)
    work.mkdir(parents=True, exist_ok=True)
    try:
        store = open_store(work, spec)
    except Exception as err:
        return err
    try:
        execute(
            spec,
            work,
            store,
            quiet,
            devices,
            prior=finished(out_dir),
            lease=lock,
            part=(process_id, count),
            memory_cap=memory_cap,
        )
    except Exception as err:
        return err
    finally:
        store.close()
    return None


def _finish(out_dir: Path, count: int, started: float, error: Exception | None) -> Path:
    """Process 0: wait for every process, merge the shards (deleted only if all finished: a stopped
    process keeps its checkpoints there), tell the others, then write the report."""
    distributed.publish("done", _status(error))
    failed = {i: s for i, s in distributed.statuses("done").items() if s != OK}
    store = Store(out_dir)
    try:
        merge_shards(store, out_dir, remove=not failed)
        device = jax.local_devices()[0]
        store.set_meta(
            {
                "elapsed_s": str(float(store.meta().get("elapsed_s", 0.0)) + time.time() - started),
                "device": f"{device.platform} x{jax.local_device_count()} ({device.device_kind}) in each of "
                f"{count} processes",
            }
        )
    finally:
        store.close()
    distributed.publish("merged")
    if error is not None:
        raise error
    if failed:
        raise DistributedError("; ".join(f"process {i}: {s}" for i, s in sorted(failed.items())))
    return report(out_dir)


def _status(err: Exception | None) -> str:
    return OK if err is None else f"{type(err).__name__}: {err}"
