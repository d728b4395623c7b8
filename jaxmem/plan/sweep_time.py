"""A sweep's time on the planner's model, twice: the bound (every run to its step budget, every search at
its costliest round count without expanding its bracket) and the expected time (the searches' critical
path on the outcome model of jaxmem.plan.search_timeline.modelled: successes known after a quarter of
the budget, failures after all of it, answers spread across each bracket).

Both take the first round's programs as the sweep's (later rounds probe other values, in programs of
about the same cost): a program step costs its family's rate over its slots' work, at least the
device's step floor (jaxmem.plan.throughput), and a compile its stated or measured seconds.
"""

from __future__ import annotations

import dataclasses
import math


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


@dataclasses.dataclass(frozen=True)
class SweepTime:
    programs: tuple[ProgramTime, ...]
    budget: int  # program steps of a run's step budget
    rounds: int  # of the longest search without expansion (1 without a search)
    compiles: int  # at most over the sweep (the first round's where unknown)
    path_steps: float | None  # the searches' mean critical path in program steps (None: no search model)
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
        """The compiles the modelled searches reach, and one first round's device time for each step
        budget of the searches' critical path (simulated with a slot for each of the first round's runs:
        its waves are in the round's time); at most the bound. Without a search model: the bound (runs
        stopping early are not predicted)."""
        if self.path_steps is None:
            return self.bound
        compiles = len(self.programs) if self.expected_compiles is None else self.expected_compiles
        return min(self.bound, self.compile_seconds(compiles) + self.path_steps / self.budget * self.round_seconds)
