"""A sweep's time on the planner's model, twice: the bound (every run to its step budget, every search at
its costliest round count without expanding its bracket, the first round's programs for every round:
later rounds probe other values, in programs of about the same cost) and the expected time (the
searches' timelines on the outcome model of jaxmem.plan.search_timeline.modelled: successes known after
a quarter of the budget, failures after all of it, answers spread across each bracket).

The expected time charges each program for the steps during which it holds a live probe (it steps all
its slots then, vacant ones too), at least its runs' steps over its slots where they queue for them,
and adds the programs' times: the driver runs one program's segment at a time and waits for its results
(jaxmem.driver.sweep), on a CPU and on accelerators alike. A program step costs its family's rate over
its slots' work, at least the device's step floor (jaxmem.plan.throughput), and a compile its stated
or measured seconds.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Hashable, Mapping


@dataclasses.dataclass(frozen=True)
class ProgramTime:
    """One program of the first round, as the planner times it."""

    runs: int
    slots: int  # of every device together
    step_seconds: float  # one program step of its slots (vacant slots compute too)
    compile_seconds: float

    @property
    def waves(self) -> int:
        """Times its slots fill to hold the first round's runs."""
        return math.ceil(self.runs / self.slots)

    def round_seconds(self, budget: int) -> float:
        """Device time of its runs, each to a budget of `budget` program steps, in waves."""
        return self.waves * budget * self.step_seconds

    def busy_seconds(self, live: int, run_steps: float) -> float:
        """Device time while it holds a live run for `live` program steps, its runs taking `run_steps`
        steps in all: at least run_steps / slots program steps where they queue for its slots."""
        return max(live, run_steps / self.slots) * self.step_seconds


def in_turn(times: Mapping[Hashable, ProgramTime], occupancy: Mapping[Hashable, tuple[int, float]]) -> float:
    """Device time of programs run one after another, each (`occupancy`: program -> (steps it holds a live
    run, its runs' steps)) busy as ProgramTime.busy_seconds."""
    return sum(times[p].busy_seconds(live, run_steps) for p, (live, run_steps) in occupancy.items())


@dataclasses.dataclass(frozen=True)
class SweepTime:
    programs: tuple[ProgramTime, ...]
    budget: int  # program steps of a run's step budget
    rounds: int  # of the longest search without expansion (1 without a search)
    compiles: int  # at most over the sweep (the first round's where unknown)
    busy_seconds: float | None  # the modelled searches' device time (`in_turn`, mean; None: no search model)
    expected_compiles: float | None = None  # programs the modelled searches reach (None: the first round's)

    @property
    def first_round(self) -> float:
        """Compiles and device time of the first round, every run to its budget."""
        return self.compile_seconds(len(self.programs)) + self.round_seconds

    @property
    def round_seconds(self) -> float:
        """Device time of one round of the first round's programs, every run to its budget, in waves."""
        return sum(p.round_seconds(self.budget) for p in self.programs)

    def compile_seconds(self, count: float) -> float:
        """`count` compiles at the first round's mean compile time."""
        one = sum(p.compile_seconds for p in self.programs) / max(len(self.programs), 1)
        return one * count

    @property
    def bound(self) -> float:
        """Every compile the sweep can reach and `rounds` rounds, every run to its budget."""
        return self.compile_seconds(self.compiles) + self.rounds * self.round_seconds

    @property
    def expected(self) -> float:
        """The compiles the modelled searches reach and their device time; at most the bound. Without a
        search model: the bound (runs stopping early are not predicted)."""
        if self.busy_seconds is None:
            return self.bound
        compiles = len(self.programs) if self.expected_compiles is None else self.expected_compiles
        return min(self.bound, self.compile_seconds(compiles) + self.busy_seconds)
