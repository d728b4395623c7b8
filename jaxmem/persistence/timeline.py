"""What a sweep's logical timeline (the store's `timeline` table: program steps since the sweep began)
says: its critical path, in program steps and in step budgets, the run-steps its runs took (frozen ones
up to their freezing) and how full its programs' slots were."""

from __future__ import annotations

import dataclasses
import json

import pandas as pd


@dataclasses.dataclass(frozen=True)
class Summary:
    path: int  # the critical path: the logical step the last search (or run) ended at
    search_mean: float  # the searches' mean end (NaN without searches)
    budget: int  # a run's step budget (train.steps)
    run_steps: int
    runs: int  # runs launched, frozen ones included
    frozen: int
    slots: int  # the programs' slots (the last compile of each bucket)

    @property
    def occupancy(self) -> float:
        """Run-steps over what the slots could hold along the critical path."""
        return self.run_steps / (self.slots * self.path) if self.slots and self.path else float("nan")

    def describe(self) -> str:
        searches = (
            f", searches end at {self.search_mean / self.budget:.2f} on average"
            if self.search_mean == self.search_mean
            else ""
        )
        return (
            f"critical path: {self.path:,} program steps ({self.path / self.budget:.2f} step budgets{searches}); "
            f"run-steps: {self.run_steps:,} over {self.runs} runs ({self.frozen} frozen); slots' occupancy: "
            f"{self.occupancy:.0%} of {self.slots} slots"
        )


def budget_of(meta: dict) -> int | None:
    """The sweep's step budget (train.steps of its resolved spec), or None if the store does not say."""
    resolved = json.loads(meta.get("resolved_spec", "null")) or {}
    steps = (resolved.get("train") or {}).get("steps")
    return steps if isinstance(steps, int) and steps > 0 else None


def summary(timeline: pd.DataFrame, compiles: pd.DataFrame, budget: int | None) -> Summary | None:
    """The summary of a store's timeline rows and compiles; None without rows (a store older than the
    timeline) or a budget."""
    runs = timeline[timeline.kind == "run"]
    if runs.empty or not budget:
        return None
    searches = timeline[timeline.kind == "search"]
    path = int(max(timeline.known_at.max(), timeline.end.max()))
    slots = int(compiles.groupby("bucket").slots.last().sum()) if len(compiles) else 0
    return Summary(
        path=path,
        search_mean=float(searches.end.mean()) if len(searches) else float("nan"),
        budget=budget,
        run_steps=int((runs.end - runs.start).sum()),
        runs=len(runs),
        frozen=int((runs.status == "frozen").sum()),
        slots=slots,
    )


def speculated(meta) -> bool:
    """Whether a sweep ran without a round barrier (its pinned plan's speculation > 0, from its meta mapping):
    then its timeline counts fixed segments of program steps and is a result; a round barrier's counts wall-time
    segments and differs from run to run."""
    return json.loads(meta.get("plan") or "{}").get("speculation", 0) > 0
