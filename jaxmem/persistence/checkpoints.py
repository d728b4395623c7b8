"""In-flight checkpoints of a bucket's slots (orbax-checkpoint), saved asynchronously at segment ends.

A checkpoint holds the slots' full run state (parameters, optimizer state, problem, counters) and,
as JSON, which run sits in which slot. A save is sealed as soon as it finishes, by a background
thread: a manifest records a hash of each of its files, so a kill loses at most the work since the
bucket's last finished save. Restoring tries the newest checkpoint first and deletes, with a warning,
every checkpoint that is unsealed (its save was interrupted), differs from its manifest (truncated or
corrupted: a flipped bit in array data would otherwise restore silently) or fails to restore; if none
is usable the bucket starts afresh. Its runs are recomputed, never taken from a bad file.
"""

from __future__ import annotations

import concurrent.futures
import hashlib
import json
import logging
import os
import shutil
from pathlib import Path
from typing import Any

import jax
import orbax.checkpoint as ocp

log = logging.getLogger("jaxmem")
MANIFEST = "jaxmem_manifest.json"


class SlotCheckpoints:
    def __init__(self, directory: Path):
        self.directory = Path(directory).absolute()
        self.manager = ocp.CheckpointManager(
            self.directory,
            options=ocp.CheckpointManagerOptions(max_to_keep=2, enable_async_checkpointing=True, create=True),
        )
        self.next_step = (self.manager.latest_step() or 0) + 1
        self.sealer = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="jaxmem-seal")
        self.sealing: concurrent.futures.Future | None = None  # waits for the pending save, then seals it

    def save(self, state: Any, meta: dict) -> None:
        """Start an asynchronous save, sealed in the background once it finishes; the previous save is
        finished and sealed first."""
        self._seal()
        self.manager.save(
            self.next_step, args=ocp.args.Composite(state=ocp.args.StandardSave(state), meta=ocp.args.JsonSave(meta))
        )
        self.sealing = self.sealer.submit(self._finish, self.directory / str(self.next_step))
        self.next_step += 1

    def restore(self, abstract_state: Any) -> tuple[Any, dict] | None:
        """The newest usable checkpoint as (state, meta), or None; unusable ones are deleted."""
        for step in sorted(self.manager.all_steps(), reverse=True):
            try:
                verify(self.directory / str(step))
                restored = self.manager.restore(
                    step,
                    args=ocp.args.Composite(
                        state=ocp.args.StandardRestore(abstract_state), meta=ocp.args.JsonRestore()
                    ),
                )
                state, meta = restored["state"], restored["meta"]
                _check_structure(state, abstract_state)
                return state, meta
            except Exception as err:  # noqa: BLE001 - any failure means this checkpoint is unusable
                log.warning(
                    "checkpoint %s step %d is unusable (%s: %s); deleted it, trying an older one",
                    self.directory,
                    step,
                    type(err).__name__,
                    str(err).splitlines()[0][:200] if str(err) else "",
                )
                self.manager.delete(step)
        return None

    def close(self, remove: bool = False) -> None:
        self._seal()
        self.sealer.shutdown()
        self.manager.close()
        if remove:
            shutil.rmtree(self.directory, ignore_errors=True)

    def _finish(self, step_dir: Path) -> None:
        """In the sealing thread: wait for the pending save, then seal it."""
        self.manager.wait_until_finished()
        seal(step_dir)

    def _seal(self) -> None:
        """Wait until the pending save is sealed (raising what made it fail)."""
        sealing, self.sealing = self.sealing, None
        if sealing is not None:
            sealing.result()


def seal(step_dir: Path) -> None:
    """Write a finished save's manifest, atomically: a kill leaves none or all of it."""
    partial = step_dir / f"{MANIFEST}.partial"
    partial.write_text(json.dumps(file_hashes(step_dir)))
    os.replace(partial, step_dir / MANIFEST)


def file_hashes(step_dir: Path) -> dict[str, str]:
    """sha256 of every file of a checkpoint step (its manifest aside), by relative path."""
    return {
        str(path.relative_to(step_dir)): _sha256(path)
        for path in sorted(step_dir.rglob("*"))
        if path.is_file() and not path.name.startswith(MANIFEST)
    }


def _sha256(path: Path) -> str:
    with open(path, "rb") as file:
        return hashlib.file_digest(file, "sha256").hexdigest()  # streamed: array files may be large


def verify(step_dir: Path) -> None:
    """Raise ValueError unless every file the step's manifest lists is present and unchanged."""
    try:
        expected = json.loads((step_dir / MANIFEST).read_text())
    except (OSError, ValueError):
        raise ValueError("no readable manifest: its save never finished") from None
    found = file_hashes(step_dir)
    bad = sorted(name for name, digest in expected.items() if found.get(name) != digest)
    if bad:
        raise ValueError(f"{len(bad)} file(s) missing or changed since it was saved, e.g. {bad[0]}")


def _check_structure(state, abstract_state) -> None:
    expected = jax.tree.structure(abstract_state)
    if jax.tree.structure(state) != expected:
        raise ValueError("checkpoint tree structure differs from the bucket's state")
    for got, want in zip(jax.tree.leaves(state), jax.tree.leaves(abstract_state)):
        if got.shape != want.shape or got.dtype != want.dtype:
            raise ValueError(f"checkpoint leaf {got.shape}/{got.dtype} differs from {want.shape}/{want.dtype}")
