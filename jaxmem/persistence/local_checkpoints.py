"""In-flight checkpoints of one process of a multi-process run: the slots' state as a NumPy archive.

orbax-checkpoint (jaxmem.checkpoint) assumes that all processes of a job save the same global
arrays in lock-step: in a multi-process job it synchronises every save across processes and writes
array data from process 0 only. A jaxmem process saves its own buckets' process-local state at its
own segment ends, so it writes them itself: `<dir>/<step>/state.npz` (the state's leaves, in tree
order) and `meta.json`, written into a temporary folder and renamed into place, the newest two
kept. The archive's CRC-32 per leaf detects a damaged file; restoring falls back to the older
checkpoint, and with none usable the bucket starts afresh (its runs are recomputed).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from pathlib import Path
from typing import Any

import jax
import numpy as np

log = logging.getLogger("jaxmem")
KEEP = 2


class LocalSlotCheckpoints:
    """The interface of jaxmem.checkpoint.SlotCheckpoints, saved synchronously by this process alone."""

    def __init__(self, directory: Path):
        self.directory = Path(directory).absolute()
        self.directory.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(self.directory / "partial", ignore_errors=True)  # a save cut short by a kill

    def steps(self) -> list[int]:
        return sorted(int(p.name) for p in self.directory.iterdir() if p.name.isdigit())

    def save(self, state: Any, meta: dict) -> None:
        partial = self.directory / "partial"
        partial.mkdir()
        np.savez(partial / "state.npz", *jax.device_get(jax.tree.leaves(state)))
        (partial / "meta.json").write_text(json.dumps(meta))
        for file in partial.iterdir():
            with open(file, "rb") as handle:
                os.fsync(handle.fileno())
        steps = self.steps()
        partial.rename(self.directory / str((steps[-1] if steps else 0) + 1))
        for old in steps[: max(len(steps) + 1 - KEEP, 0)]:
            shutil.rmtree(self.directory / str(old))

    def restore(self, abstract_state: Any) -> tuple[Any, dict] | None:
        """The newest usable checkpoint as (state placed like `abstract_state`, meta), or None;
        unusable ones are deleted."""
        leaves, tree = jax.tree.flatten(abstract_state)
        for step in reversed(self.steps()):
            folder = self.directory / str(step)
            try:
                with np.load(folder / "state.npz") as archive:
                    arrays = [archive[f"arr_{i}"] for i in range(len(archive.files))]
                if len(arrays) != len(leaves) or any(
                    a.shape != b.shape or a.dtype != b.dtype for a, b in zip(arrays, leaves)
                ):
                    raise ValueError("its arrays differ from the bucket's state")
                meta = json.loads((folder / "meta.json").read_text())
                state = [jax.device_put(a, b.sharding) for a, b in zip(arrays, leaves)]
                return jax.tree.unflatten(tree, state), meta
            except Exception as err:  # noqa: BLE001 - any failure means this checkpoint is unusable
                log.warning("checkpoint %s is unusable (%s: %s); deleted it", folder, type(err).__name__, err)
                shutil.rmtree(folder, ignore_errors=True)
        return None

    def close(self, remove: bool = False) -> None:
        if remove:
            shutil.rmtree(self.directory, ignore_errors=True)
