"""In-flight checkpoints of a bucket's slots (orbax-checkpoint), saved asynchronously at segment ends.

A checkpoint holds the slots' full run state (parameters, optimizer state, problem, counters) and,
as JSON, which run sits in which slot. Restoring tries the newest checkpoint first and falls back to
older ones when a checkpoint is truncated or corrupted; if none is readable the bucket starts afresh
(its runs are recomputed, never silently taken from a bad file).
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path
from typing import Any

import jax
import orbax.checkpoint as ocp

log = logging.getLogger("jaxmem")


class SlotCheckpoints:
    def __init__(self, directory: Path):
        self.directory = Path(directory).absolute()
        self.manager = ocp.CheckpointManager(
            self.directory,
            options=ocp.CheckpointManagerOptions(max_to_keep=2, enable_async_checkpointing=True, create=True),
        )
        self.next_step = (self.manager.latest_step() or 0) + 1

    def save(self, state: Any, meta: dict) -> None:
        """Start an asynchronous save; the previous one is finished first."""
        self.manager.save(
            self.next_step, args=ocp.args.Composite(state=ocp.args.StandardSave(state), meta=ocp.args.JsonSave(meta))
        )
        self.next_step += 1

    def restore(self, abstract_state: Any) -> tuple[Any, dict] | None:
        """The newest readable checkpoint as (state, meta), or None."""
        for step in sorted(self.manager.all_steps(), reverse=True):
            try:
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
                    "checkpoint %s step %d is unreadable (%s: %s); trying an older one",
                    self.directory,
                    step,
                    type(err).__name__,
                    str(err).splitlines()[0][:200],
                )
        return None

    def wait(self) -> None:
        self.manager.wait_until_finished()

    def close(self, remove: bool = False) -> None:
        self.manager.wait_until_finished()
        self.manager.close()
        if remove:
            shutil.rmtree(self.directory, ignore_errors=True)


def _check_structure(state, abstract_state) -> None:
    expected = jax.tree.structure(abstract_state)
    if jax.tree.structure(state) != expected:
        raise ValueError("checkpoint tree structure differs from the bucket's state")
    for got, want in zip(jax.tree.leaves(state), jax.tree.leaves(abstract_state)):
        if got.shape != want.shape or got.dtype != want.dtype:
            raise ValueError(f"checkpoint leaf {got.shape}/{got.dtype} differs from {want.shape}/{want.dtype}")
