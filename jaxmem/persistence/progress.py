"""What an output folder holds of its sweep: runs and searches done out of the planned totals, whether
it is finished, and the in-flight runs its checkpoints hold. Read without JAX: `jaxmem status`, the
resume message and the report of an unfinished sweep share it."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

PLANNED = "planned"  # meta key: planned(spec), written when a run claims the folder


def planned(points: int, seeds: int, learning_rates: int, search: bool) -> dict:
    """The sweep's totals: its grid points, its (point, seed) units and, for a grid sweep, its runs (a
    search's are not known before it runs)."""
    units = points * seeds
    return {"units": units, "points": points, "runs": None if search else units * learning_rates, "search": search}


def checkpointed(checkpoints: Path) -> dict[str, list[str]]:
    """Bucket id -> the run ids in the slots of its newest checkpoint that says which run sits where
    (the JSON saved beside the state); {} where there is none."""
    found = {}
    for bucket in sorted(p for p in Path(checkpoints).glob("*") if p.is_dir()):
        for step in sorted((p for p in bucket.glob("*") if p.name.isdigit()), key=lambda p: -int(p.name)):
            slots = slots_of(step)
            if slots is not None:
                found[bucket.name] = [s for s in slots if s]
                break
    return found


def slots_of(step: Path) -> list | None:
    """The run ids (None: empty) in the slots of a checkpoint, an orbax one's or a process-local one's
    (jaxmem.persistence.local_checkpoints); None where its JSON is missing or unreadable."""
    for meta in (step / "meta" / "metadata", step / "meta.json"):
        try:
            return json.loads(meta.read_text())["slots"]
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return None


@dataclasses.dataclass(frozen=True)
class Found:
    """Counts of a sweep's progress; `units` and `total_runs` are None where unknown."""

    runs: int
    searches: int
    units: int | None
    total_runs: int | None
    search: bool
    inflight: int = 0  # runs in checkpoints, not yet stored
    inflight_buckets: int = 0
    points: int | None = None  # grid points planned

    def work(self) -> tuple[int, int | None]:
        """(done, planned) of what finishes the sweep: its searches, or a grid sweep's runs."""
        return (self.searches, self.units) if self.search else (self.runs, self.total_runs)

    @property
    def complete(self) -> bool:
        done, total = self.work()
        return total is not None and done >= total

    @property
    def started(self) -> bool:
        return bool(self.runs or self.searches or self.inflight)

    def done(self) -> str:
        """'62 runs done, 2 of 4 searches done' or '62 of 80 runs done'."""
        total = f" of {self.total_runs}" if self.total_runs is not None and not self.search else ""
        text = f"{self.runs}{total} runs done"
        if self.search:
            text += f", {self.searches}" + (f" of {self.units}" if self.units is not None else "") + " searches done"
        return text

    def inflight_text(self) -> str:
        if not self.inflight:
            return "no in-flight runs in checkpoints"
        return f"{self.inflight} in-flight runs in checkpoints of {self.inflight_buckets} bucket(s)"

    def resume_line(self) -> str:
        """What a rerun found, or '' for a fresh sweep."""
        if self.complete:
            return f"sweep complete ({self.done()}): nothing to run, rewriting the report"
        if not self.started:
            return ""
        return f"resuming: {self.done()}; {self.inflight_text()} to restore"


def stored_progress(meta: dict[str, str], runs: int, searches: int, held: int = 0, held_buckets: int = 0) -> Found:
    """The progress of a store holding `runs` runs and `searches` searches, against the planned totals of
    its meta (none in a store that predates them); `held` runs in checkpoints of `held_buckets` buckets."""
    plan = json.loads(meta.get(PLANNED, "{}"))
    search = plan.get("search", bool(searches))
    return Found(runs, searches, plan.get("units"), plan.get("runs"), search, held, held_buckets, plan.get("points"))


def finished(found: Found, out: Path) -> bool:
    """All planned work is stored; for a store that predates the planned totals, a sweep that ran and
    left no checkpoints folder (a finished run deletes it, a stopped one keeps it)."""
    if found.units is not None:
        return found.complete
    return found.started and not (Path(out) / "checkpoints").exists()


def inflight(checkpoints: Path, stored: set[str] | dict) -> tuple[int, int]:
    """(runs, buckets) in the checkpoints under `checkpoints` whose rows are not stored yet."""
    runs = {b: [r for r in ids if r not in stored] for b, ids in checkpointed(checkpoints).items()}
    return sum(map(len, runs.values())), sum(1 for ids in runs.values() if ids)
