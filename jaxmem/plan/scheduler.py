"""Threshold searches without a round barrier: which probes to launch, and which to freeze, at a
segment boundary.

A search's state is a pure function of its outcomes known so far (value -> success, each with the
logical step, in program steps, at which it became known) and of the logical clock: the outcomes
known by `now` are replayed through plan/search.py's rounds, a round being applied as soon as the
outcomes that decide it are known (`search.deciding`), not when its slowest probe ends. So a search
gives the answers the round scheduler gives on the same outcomes, whatever the timing, and a sweep
resumed from the outcomes it stored (on any device) continues with the same decisions.

While the current round waits for its slow probes (a probe above the capacity runs its whole step
budget), the scheduler speculates: it guesses that the round's pending probes fail (a success comes
early or not at all; a guess from monotonicity, success below a known success, is led astray for a
whole budget by one non-monotone success) and wants the probes of the round that guess leads to,
and of the round after, up to `depth` rounds ahead. A running probe no round wants any more (a
success above it, a failure below it, a guess that changed) is frozen. `paper` mode keeps the
authors' binary search: one probe at a time.
"""

from __future__ import annotations

import dataclasses
from typing import Hashable, Mapping, Set

from jaxmem.plan import search as searching
from jaxmem.plan.search import Bracket
from jaxmem.spec.sweep import SearchSpec


@dataclasses.dataclass(frozen=True)
class Outcome:
    success: bool
    at: int  # the logical step (program steps since the sweep began) at which it became known


@dataclasses.dataclass(frozen=True)
class SearchState:
    bracket: Bracket  # every round the known outcomes decide, applied
    wanted: tuple[tuple[int, ...], ...]  # values to run, by level: 0 the current round, k the k-th guessed round

    @property
    def done(self) -> bool:
        return self.bracket.done


@dataclasses.dataclass(frozen=True)
class Decision:
    launch: tuple[tuple[Hashable, int], ...]  # (search, value), most wanted first, as many as the slots hold
    freeze: tuple[tuple[Hashable, int], ...]  # (search, value) running that no round wants any more


def known_by(outcomes: Mapping[int, Outcome], now: int) -> dict[int, bool]:
    """The outcomes known at logical step `now`."""
    return {v: o.success for v, o in outcomes.items() if o.at <= now}


def state(spec: SearchSpec, first: Bracket, outcomes: Mapping[int, Outcome], now: int, depth: int) -> SearchState:
    """The search from its first bracket, at logical step `now`, speculating `depth` rounds ahead."""
    return state_of(spec, first, known_by(outcomes, now), depth)


def state_of(spec: SearchSpec, first: Bracket, known: Mapping[int, bool], depth: int) -> SearchState:
    """The search from its first bracket with the outcomes `known` (value -> success), speculating
    `depth` rounds ahead: a function of those outcomes only."""
    b = first
    while not b.done:
        decided, pending = searching.deciding(spec, b, known.get)
        if pending:
            break
        b = searching.update(spec, b, decided)
    return SearchState(b, wanted_rounds(spec, b, known, 0 if spec.mode == "paper" else depth))


def wanted_rounds(spec: SearchSpec, b: Bracket, known: Mapping[int, bool], depth: int) -> tuple[tuple[int, ...], ...]:
    """The values still to run of the current round and of the `depth` rounds guessed after it, each
    guessed with its pending outcomes as failures."""
    levels = []
    while not b.done and len(levels) <= depth:
        _, pending = searching.deciding(spec, b, known.get)
        levels.append(tuple(pending))
        b = searching.update(spec, b, {v: known.get(v, False) for v in searching.probes(spec, b)})
    return tuple(levels)


def decide(states: Mapping[Hashable, SearchState], running: Mapping[Hashable, Set[int]], free: int) -> Decision:
    """At a segment boundary: freeze the running probes no search wants, then launch the most wanted
    (by level, then in the order of `states`, then by value) into the `free` slots and those frozen.
    A search's levels hold distinct values: a guessed round probes inside its parent's bracket."""
    keys = list(states)
    wanted = {key: {v for level in s.wanted for v in level} for key, s in states.items()}
    freeze = tuple((key, v) for key, values in running.items() for v in sorted(values) if v not in wanted.get(key, ()))
    queue = sorted(
        (level, order, v)
        for order, s in enumerate(states.values())
        for level, values in enumerate(s.wanted)
        for v in values
        if v not in running.get(keys[order], ())
    )
    launch = tuple((keys[order], v) for _, order, v in queue[: max(0, free + len(freeze))])
    return Decision(launch, freeze)
