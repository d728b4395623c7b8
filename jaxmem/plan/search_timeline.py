"""Searches on a logical timeline, without training: a scheduler driven segment by segment against a
model of its probes (`Trial`: success, and the program steps until the outcome is known), in a
program of a fixed number of slots. It measures what a schedule costs: each search's critical path
(the logical step it ends at), its probes (the steps each held a slot), the ones frozen and the run-steps
they took, and (`occupancy`) the steps during which a program holds a live probe.

A probe launched at a boundary and known within a segment is seen at the next boundary (the engine
refills slots between segments); a frozen probe's steps so far count, its slot is free at once.
"""

from __future__ import annotations

import collections
import dataclasses
from typing import Callable, Hashable, Iterable, Mapping, Sequence, TypeVar

from jaxmem.plan import scheduler
from jaxmem.plan import search as searching
from jaxmem.plan.scheduler import Outcome, SearchState
from jaxmem.plan.search import Bracket
from jaxmem.spec.sweep import SearchSpec

Policy = Callable[[Hashable, Mapping[int, Outcome], int], SearchState]  # (search, its outcomes, now) -> state
P = TypeVar("P", bound=Hashable)


@dataclasses.dataclass(frozen=True)
class Trial:
    success: bool
    steps: int  # program steps until the outcome is known: the step it succeeds at, or its whole budget


@dataclasses.dataclass(frozen=True)
class Timeline:
    bracket: Bracket  # the search's end
    done_at: int  # the logical step it ended at: its critical path
    frozen: int  # probes stopped before their outcome was known
    outcomes: dict  # value -> Outcome, as the search saw them
    spans: tuple[tuple[int, int, int], ...]  # (value, start, end): each probe launched, in a slot over [start, end)

    @property
    def probes(self) -> int:
        """Probes launched."""
        return len(self.spans)

    @property
    def run_steps(self) -> int:
        """Program steps its probes ran: to their outcome, or until frozen."""
        return sum(end - start for _, start, end in self.spans)


def speculative(spec: SearchSpec, first: Mapping[Hashable, Bracket], depth: int) -> Policy:
    """The scheduler without a round barrier (jaxmem.plan.scheduler), `depth` rounds of speculation."""
    return by_known(lambda key, known: scheduler.state_of(spec, first[key], known, depth))


def rounds(spec: SearchSpec, first: Mapping[Hashable, Bracket]) -> Policy:
    """The round scheduler (search.replay): a round's probes all end before the next round starts."""

    def state(key, known):
        b, pending = searching.replay(spec, first[key], known.get)
        return SearchState(b, (tuple(pending),) if pending else ())

    return by_known(state)


def by_known(state: Callable[[Hashable, dict[int, bool]], SearchState]) -> Policy:
    """The policy of `state` (a search's state from its known outcomes, value -> success), computed once
    for each search and set of known outcomes: `simulate` asks at every boundary, most searches unchanged."""
    states: dict = {}

    def policy(key, outcomes, now):
        known = scheduler.known_by(outcomes, now)
        memo = (key, frozenset(known.items()))
        if memo not in states:
            states[memo] = state(key, known)
        return states[memo]

    return policy


def simulate(
    policy: Policy, keys: Sequence[Hashable], trial: Callable[[Hashable, int], Trial], segment: int, slots: int
) -> dict[Hashable, Timeline]:
    """Every search of `keys` to its end under `policy`, decisions every `segment` steps, `slots` probes
    at most running at once; `trial(key, value)`: the probe's outcome and duration."""
    outcomes: dict = {k: {} for k in keys}
    running: dict = {k: {} for k in keys}  # value -> the step it was launched at
    spans: dict = {k: [] for k in keys}
    frozen = dict.fromkeys(keys, 0)
    ended: dict = {}
    now = 0
    while True:
        for key, values in running.items():
            for v, start in list(values.items()):
                t = trial(key, v)
                if start + t.steps <= now:
                    outcomes[key][v] = Outcome(t.success, now)
                    spans[key].append((v, start, start + t.steps))
                    del values[v]
        states = {k: policy(k, outcomes[k], now) for k in keys if k not in ended}
        ended.update((k, (s.bracket, now)) for k, s in states.items() if s.done)
        open_states = {k: s for k, s in states.items() if not s.done}
        busy = sum(len(values) for values in running.values())
        decision = scheduler.decide(open_states, {k: set(values) for k, values in running.items()}, slots - busy)
        for key, v in decision.freeze:
            spans[key].append((v, running[key].pop(v), now))
            frozen[key] += 1
        for key, v in decision.launch:
            running[key][v] = now
        if not open_states:
            break
        if not any(running.values()):
            raise RuntimeError(f"searches wait on no probe at step {now}: {sorted(open_states)}")
        now = next_boundary(
            now, segment, [start + trial(k, v).steps for k, values in running.items() for v, start in values.items()]
        )
    return {k: Timeline(ended[k][0], ended[k][1], frozen[k], outcomes[k], tuple(spans[k])) for k in keys}


def next_boundary(now: int, segment: int, ends: list[int]) -> int:
    """The first boundary after `now` at which a running probe's outcome is known: nothing changes at
    the ones before it (no outcome arrives, so no state, and no decision, does)."""
    return max(now + segment, -(-min(ends) // segment) * segment)


def occupancy(
    timelines: Mapping[Hashable, Timeline], program: Callable[[Hashable, int], P]
) -> dict[P, tuple[int, int]]:
    """program -> (steps it holds a live probe: the union of its probes' spans, its probes' steps summed);
    `program(search, value)`: the program the search's probe at `value` runs in."""
    spans = collections.defaultdict(list)
    for key, t in timelines.items():
        for value, start, end in t.spans:
            spans[program(key, value)].append((start, end))
    return {p: (live_steps(s), sum(end - start for start, end in s)) for p, s in spans.items()}


def live_steps(spans: Iterable[tuple[int, int]]) -> int:
    """Steps in the union of the [start, end) intervals `spans`."""
    total, reach = 0, 0
    for start, end in sorted(spans):
        total += max(0, end - max(start, reach))
        reach = max(reach, end)
    return total


POSITIONS = (0.2, 0.4, 0.6, 0.8)  # where, between a bracket's ends (geometrically), `modelled` puts the answers
SUCCESS_SHARE = 0.25  # of the step budget, a success takes in `modelled` (failures: see `failure_step`)


def failure_step(budget: int, every: int, give_up: int) -> int:
    """When a failing probe's outcome is known in `modelled`: the end of its `budget`, or with the
    early-failure rule (`train.give_up` = K evaluations of `every` steps) its first chance to give up,
    after K evaluations (on the Fig 1 linear quick grid the rule with a half-budget window stopped the
    failing runs at 0.54 of the budget on average: benchmarks/RESULTS_give_up.md)."""
    return min(budget, give_up * every) if give_up else budget


@dataclasses.dataclass(frozen=True)
class Estimate:
    path: float  # the critical path, program steps: the last search's end, averaged over POSITIONS
    search_mean: float  # the searches' mean end, likewise
    run_steps: float
    slots: int

    def describe(self, budget: int) -> str:
        occupancy = self.run_steps / (self.slots * self.path) if self.slots and self.path else float("nan")
        return (
            f"critical path about {self.path:,.0f} program steps ({self.path / budget:.2f} step budgets, searches "
            f"end at {self.search_mean / budget:.2f} on average); run-steps about {self.run_steps:,.0f}; slots' "
            f"occupancy about {occupancy:.0%} of {self.slots} slots"
        )


def modelled(
    spec: SearchSpec,
    first: Mapping[Hashable, Bracket],
    depth: int,
    segment: int,
    slots: int,
    budget: int,
    every: int,
    give_up: int = 0,
) -> list[dict[Hashable, Timeline]]:
    """The searches' timelines (`simulate`) for each of POSITIONS, as the planner and the dry run model them
    (`summary`: their critical path, run-steps and occupancy): every search's answer at that position
    across its first bracket (geometrically), outcomes monotone, a success known after SUCCESS_SHARE of
    the `budget` (in whole evaluations of `every` steps), a failure at `failure_step` (`give_up`: the
    early-failure rule's window in evaluations, 0 without it)."""
    policy = speculative(spec, first, depth) if depth else rounds(spec, first)
    success = max(every, -(-int(SUCCESS_SHARE * budget) // every) * every)
    failure = failure_step(budget, every, give_up)
    timelines = []
    for position in POSITIONS:
        answer = {k: b.lo * (b.hi / b.lo) ** position for k, b in first.items()}
        trial = lambda key, v, answer=answer: Trial(True, success) if v <= answer[key] else Trial(False, failure)  # noqa: E731
        timelines.append(simulate(policy, list(first), trial, segment, slots))
    return timelines


def summary(timelines: list[dict[Hashable, Timeline]], slots: int) -> Estimate:
    """The critical path, mean end and run-steps of `modelled` timelines, averaged over its positions: the
    searches under the round barrier (depth 0) or the scheduler speculating, as benchmarks/search_latency.py
    runs them."""
    paths = [max(t.done_at for t in runs.values()) for runs in timelines]
    means = [sum(t.done_at for t in runs.values()) / len(runs) for runs in timelines]
    steps = [sum(t.run_steps for t in runs.values()) for runs in timelines]
    n = len(timelines)
    return Estimate(sum(paths) / n, sum(means) / n, sum(steps) / n, slots)
