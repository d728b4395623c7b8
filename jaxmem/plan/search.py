"""Threshold searches on the host: the largest value of an integer variable at which a run succeeds.

The search is a pure function of probe outcomes, so it is replayed from the results store on resume
(nothing is redone). Every round tests several values of every open (point, seed) at once, all in
the same vmapped programs.

- `verified` (default): the first round tests both bracket ends and K interior points; a bracket
  whose upper end succeeds is doubled (at most `max_expand` times, then censored "above"); a lower
  end that fails ends the search, censored "below". Later rounds test K geometrically spaced interior
  points: a (K+1)-ary search, log_{K+1} rounds instead of log_2.
- seeded (verified mode with `law_axis`): the first bracket is a prediction's neighbourhood inside
  the spec's bounds (`start(..., within=(lo, hi))`); a failing lower end then halves the bracket down
  to the spec's lower bound before the search is censored "below", and doublings up to the spec's
  upper bound do not count against `max_expand`.
- `paper`: the authors' binary search (Nichani et al., spec §4.2–4.3): probe ⌊(lo+hi)/2⌋, the lower
  end is assumed feasible and the upper end is never tested; stop at hi/lo ≤ 1 + resolution or
  hi − lo ≤ 1; the answer is lo.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Callable

from jaxmem.spec.sweep import SearchSpec


@dataclasses.dataclass(frozen=True)
class Bracket:
    lo: int
    hi: int
    lo_ok: bool  # lo succeeded (or, in paper mode, is assumed to)
    hi_bad: bool  # hi failed (or, in paper mode, is assumed to)
    rounds: int = 0
    probes: int = 0
    expansions: int = 0
    censored: str = ""  # "below": even lo failed; "above": hi still succeeded after max_expand doublings
    non_monotone: bool = False  # a success was seen above a failure
    done: bool = False
    ceiling: int | None = None  # the largest value the variable may take: no doubling past it
    floor: int | None = None  # a seeded bracket: the spec's lower bound, which a failing lower end halves toward
    free_up_to: int | None = None  # a seeded bracket: the spec's upper bound, doublings below it are free

    @property
    def capacity(self) -> float:
        """Largest value known (or, in paper mode, assumed) to succeed; NaN if none."""
        return math.nan if self.censored == "below" else float(self.lo if self.censored != "above" else self.hi)

    @property
    def first_failure(self) -> float:
        """Smallest value above the capacity known to fail; NaN if none."""
        if self.censored == "below":
            return float(self.lo)
        return float(self.hi) if self.hi_bad and self.censored != "above" else math.nan


def start(spec: SearchSpec, lo: int, hi: int, ceiling: int | None = None, within: tuple[int, int] | None = None):
    """The first bracket [lo, hi]; `within`: the spec's bounds around a seeded [lo, hi] (verified mode)."""
    paper = spec.mode == "paper"
    floor, free = within if within is not None else (None, None)
    return _settle(spec, Bracket(lo, hi, lo_ok=paper, hi_bad=paper, ceiling=ceiling, floor=floor, free_up_to=free))


def seeded(lo: int, hi: int, prediction: float, margin: float) -> tuple[int, int] | None:
    """[prediction / (1 + margin), prediction · (1 + margin)] clipped to [lo, hi], or None when the
    prediction is not finite or the clipped bracket is no narrower than [lo, hi]."""
    if not math.isfinite(prediction) or prediction <= 0:
        return None
    low = max(lo, math.floor(prediction / (1 + margin)))
    high = min(hi, max(low + 1, math.ceil(prediction * (1 + margin))))
    return (low, high) if (low, high) != (lo, hi) and low < high else None


def converged(spec: SearchSpec, lo: int, hi: int) -> bool:
    return hi - lo <= 1 or hi / lo <= 1 + spec.resolution


def interior(spec: SearchSpec, lo: int, hi: int) -> list[int]:
    """Values strictly inside (lo, hi) to probe this round."""
    if hi - lo <= 1:
        return []
    if spec.mode == "paper":
        return [(lo + hi) // 2]
    k = spec.probes
    if hi - lo - 1 <= k:
        return list(range(lo + 1, hi))
    ratio = hi / lo
    values = {min(hi - 1, max(lo + 1, round(lo * ratio ** (i / (k + 1))))) for i in range(1, k + 1)}
    return sorted(values)


def probes(spec: SearchSpec, b: Bracket) -> list[int]:
    """The values this round tests (empty once done)."""
    if b.done:
        return []
    ends = ([] if b.lo_ok else [b.lo]) + ([] if b.hi_bad else [b.hi])
    return sorted(set(ends + interior(spec, b.lo, b.hi)))


def update(spec: SearchSpec, b: Bracket, outcome: dict[int, bool]) -> Bracket:
    """Advance the bracket with this round's outcomes (value -> success)."""
    values = sorted(outcome)
    above_a_failure = any(outcome[v] for i, v in enumerate(values) if not all(outcome[u] for u in values[:i]))
    counted = dict(rounds=b.rounds + 1, probes=b.probes + len(outcome), non_monotone=b.non_monotone or above_a_failure)
    if not b.lo_ok and not outcome[b.lo]:
        if b.floor is not None and b.lo > b.floor:  # a seeded bracket: halve toward the spec's bound
            lower = max(b.floor, b.lo // 2)
            return _settle(spec, b, **counted, lo=lower, hi=b.lo, lo_ok=False, hi_bad=True)
        return dataclasses.replace(b, **counted, censored="below", done=True)
    if not b.hi_bad and outcome[b.hi]:
        free = b.free_up_to is not None and b.hi < b.free_up_to  # still inside the spec's bounds
        if not free and (b.expansions >= spec.max_expand or (b.ceiling is not None and 2 * b.hi > b.ceiling)):
            return dataclasses.replace(b, **counted, lo_ok=True, censored="above", done=True)
        hi, expansions = (min(2 * b.hi, b.free_up_to), b.expansions) if free else (2 * b.hi, b.expansions + 1)
        return _settle(spec, b, **counted, lo=b.hi, hi=hi, lo_ok=True, hi_bad=False, expansions=expansions)
    lo, hi = b.lo, b.hi
    tested = sorted(v for v in outcome if b.lo < v < b.hi)
    first_fail = next((v for v in tested if not outcome[v]), None)
    if first_fail is not None:
        hi = first_fail
    lo = max([lo] + [v for v in tested if v < hi and outcome[v]])
    return _settle(spec, b, **counted, lo=lo, hi=hi, lo_ok=True, hi_bad=True)


def deciding(
    spec: SearchSpec, b: Bracket, outcome_of: Callable[[int], bool | None]
) -> tuple[dict[int, bool], list[int]]:
    """This round's known outcomes (value -> success) and the values whose outcomes `update` still
    depends on; once none is left, `update` on the known ones gives the bracket the whole round would.
    An unverified lower end that fails decides alone; an upper end that succeeds above a lower end
    that did decides without the interior; an interior value above a known failure changes nothing."""
    values = probes(spec, b)
    known = {v: o for v in values if (o := outcome_of(v)) is not None}
    if not b.lo_ok and known.get(b.lo) is False:
        return known, []
    lower_end = [] if b.lo_ok or b.lo in known else [b.lo]
    if not b.hi_bad and known.get(b.hi) is True:
        return known, lower_end
    inside = [v for v in values if b.lo < v < b.hi]
    first_failure = min((v for v in inside if known.get(v) is False), default=b.hi)
    upper_end = [] if b.hi_bad or b.hi in known else [b.hi]
    return known, lower_end + [v for v in inside if v < first_failure and v not in known] + upper_end


def _settle(spec: SearchSpec, b: Bracket, **changes) -> Bracket:
    """`b` with `changes`, done once both its ends are verified and they have converged (one replace:
    a search's replays update brackets by the tens of thousands)."""
    lo, hi, lo_ok, hi_bad = (changes.get(name, getattr(b, name)) for name in ("lo", "hi", "lo_ok", "hi_bad"))
    return dataclasses.replace(b, **changes, done=lo_ok and hi_bad and converged(spec, lo, hi))


def replay(spec: SearchSpec, b: Bracket, outcome_of: Callable[[int], bool | None]) -> tuple[Bracket, list[int]]:
    """Advance through every round whose outcomes are all known; return the state and the values
    still to run (the current round's unfinished probes)."""
    while not b.done:
        values = probes(spec, b)
        outcomes = {v: outcome_of(v) for v in values}
        pending = [v for v, o in outcomes.items() if o is None]
        if pending:
            return b, pending
        b = update(spec, b, outcomes)
    return b, []
