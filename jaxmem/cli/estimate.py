"""What a sweep will cost, for `jaxmem run --dry-run`: the most probes a threshold search can make, a
duration in words, and whether the sweep suits the machine (the times are the planner's model:
jaxmem.plan.planner.programs_seconds)."""

from __future__ import annotations

import functools
from typing import Callable

from jaxmem.plan import search as searching

SIZED_HOURS = 2.0  # a preset estimated to take longer is not sized for this machine
THRESHOLDS = 48  # success thresholds tried when bounding a search's probes


def duration(secs: float) -> str:
    """'40 s', '12 min', '3.5 h', '2.1 days'."""
    if secs < 90:
        return f"{secs:.0f} s"
    if secs < 5400:
        return f"{secs / 60:.0f} min"
    return f"{secs / 3600:.1f} h" if secs < 172800 else f"{secs / 86400:.1f} days"


def probed(spec, bracket: searching.Bracket, succeeds: Callable[[int], bool]) -> list[int]:
    """Every value a search probes (one entry per probe) when `succeeds` answers it."""
    values, b = [], bracket
    while not b.done:
        round_ = searching.probes(spec, b)
        values += round_
        b = searching.update(spec, b, {v: succeeds(v) for v in round_})
    return values


def worst_probes(spec, bracket: searching.Bracket, cost: Callable[[int], float]) -> list[int]:
    """The probes of the costliest search over monotone outcomes whose answer lies in the initial
    bracket (success up to a threshold t, lo - 1 <= t <= hi): one search's work when its bracket does
    not expand (each expansion doubles the bracket and adds rounds). `cost` is asked once per value."""
    cost, top = functools.cache(cost), bracket.hi
    ladder = {bracket.lo - 1, top} | {
        round(bracket.lo * (top / bracket.lo) ** (i / THRESHOLDS)) for i in range(THRESHOLDS)
    }
    runs = [probed(spec, bracket, lambda v, t=t: v <= t) for t in sorted(ladder)]
    return max(runs, key=lambda values: (sum(map(cost, values)), len(values)))


def sized_line(secs: float, over_budget: int, platform: str) -> str:
    """Whether the sweep suits this machine: its estimated time and the buckets over the memory budget."""
    if over_budget:
        return f"NOT sized for this machine: {over_budget} bucket(s) do not fit in its memory (exit 6)"
    if secs > SIZED_HOURS * 3600:
        kind = "an accelerator or more devices" if platform == "cpu" else "more devices"
        return f"NOT sized for this machine: about {duration(secs)} here (over {SIZED_HOURS:g} h); it wants {kind}"
    return f"sized for this machine: at most about {duration(secs)} here"


def peak_line(peak: float, over_budget: int, budget: float) -> str:
    """The dry run's peak memory per device: the largest bucket's, or, when buckets are over the memory
    budget (their sizes are in their lines), the budget they exceed and the largest bucket that fits (it
    said 0.0 MiB, the largest of none, when no bucket fit)."""
    if not over_budget:
        return f"peak memory per device: {size_text(peak)} (the largest bucket's)"
    fitting = f"; the largest bucket that fits: {size_text(peak)}" if peak else ""
    return f"peak memory per device: over the budget of {size_text(budget)} in {over_budget} bucket(s){fitting}"


def size_text(nbytes: float) -> str:
    """'1.50 GiB', '12.0 MiB', '9.8 KiB' (a tiny bucket's state, which was '0.0 MiB')."""
    if nbytes >= 2**30:
        return f"{nbytes / 2**30:.2f} GiB"
    return f"{nbytes / 2**20:.1f} MiB" if nbytes >= 2**20 else f"{nbytes / 2**10:.1f} KiB"
