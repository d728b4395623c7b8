"""The planner: the engine settings of a sweep (`Knobs`: padding, probes per round, slots, segment
length) chosen from the device kind and count, the sweep's size and the stated costs of
jaxmem/plan/costs.py. Settings the spec gives itself are kept (overrides).

- On a CPU: the spec's settings (their defaults where it gives none), as before the planner. (Its padding
  too: a coarser ladder that the estimate favoured ran 0.75-0.92x on three quick presets and 1.09-1.17x on
  another, which the estimate could not tell apart: benchmarks/RESULTS_padding_cpu_ab.md.)
- On an accelerator a program step costs its work at the device's measured (else stated) rate, and at
  least the device's step floor however little it computes; a compile costs its measured (else stated)
  seconds (jaxmem.plan.throughput). The planner compares the spec's padding ladders with "few programs"
  (every size that varies over the grid padded to its largest value, every probe of a search to at
  least its point's initial upper bound), and for each the number of probes per round K, by the
  estimated time of the searches: compiles + rounds × the time of one round (`estimate`), or where the
  searches speculate (costs.SPECULATION), compiles + the step budgets of their critical path × the time of
  one round (the critical path of jaxmem.plan.search_timeline's outcome model; the dry-run's expected time
  charges each program its own busy steps on the same timelines instead), and takes the fastest. More
  probes per round mean fewer rounds (a (K+1)-ary search) and, while the step costs its floor, no slower
  rounds; once the slots' work exceeds the floor, each probe lengthens every round
  (on an H200 the Fig 1 grids' programs are there: benchmarks/README.md).
- A folder keeps the plan of its first run (`pinned`): a resumed search replays its rounds with the
  probes they were planned with, and its runs keep their padding (float rounding), on any device.
"""

from __future__ import annotations

import dataclasses
import math

from jaxmem.experiments.interface import SIZE, Experiment
from jaxmem.plan import search as searching
from jaxmem.plan import search_timeline, throughput
from jaxmem.plan.costs import ACCELERATORS, DECISIONS_PER_BUDGET, SPECULATION
from jaxmem.plan.layout import Knobs, Layout
from jaxmem.plan.sweep_time import ProgramTime
from jaxmem.plan.target import Target
from jaxmem.spec.expr import evaluate
from jaxmem.spec.sweep import SweepSpec

PROBE_CHOICES = (1, 2, 3, 5, 7, 11, 15, 23, 31, 47, 63)
ACCELERATOR_SEGMENT_SECONDS = 20.0  # host syncs cost an accelerator a step's latency each: fewer of them
PINNED = (  # what results (and, for a resumed search, its timeline: jaxmem.plan.scheduler) depend on
    "pad_ratio",
    "search_pad_ratio",
    "search_pad_floor",
    "pad_to_max",
    "probes",
    "speculation",
    "segment_steps",
)
THRESHOLDS = 12  # answers tried (geometrically over a bracket) when counting a search's rounds
MEMORY_SHARE = 0.8  # of a device's memory, what the estimates assume a program may use (--memory-cap's default)


@dataclasses.dataclass(frozen=True)
class Estimate:
    compiles: int  # programs of the first round
    rounds: int  # rounds of the longest search (no expansion)
    round_seconds: float  # device time of the first round's steps
    seconds: float  # compiles and every round, or with speculation the critical path's step budgets
    path_budgets: float = 0.0  # speculating: the searches' critical path in step budgets (search_timeline)

    @property
    def every_round_seconds(self) -> float:
        """Compiles and every round of the longest search, each run to its step budget, under a round barrier:
        the upper bound a speculating plan's `seconds` improves on."""
        return self.seconds + (self.rounds - (self.path_budgets or self.rounds)) * self.round_seconds

    def describe(self) -> str:
        per_search = f"{self.rounds} round(s) per search"
        if self.path_budgets:
            per_search = f"a critical path of {self.path_budgets:.2f} step budgets (speculating; {per_search} at most)"
        return (
            f"{self.compiles} compile(s), {per_search}, about {self.round_seconds:.3g} s of device time per round: "
            f"{self.seconds:.3g} s in all"
        )


@dataclasses.dataclass(frozen=True)
class Plan:
    knobs: Knobs
    target: Target
    estimate: Estimate
    notes: tuple[str, ...]  # the decisions, in words

    def describe(self) -> list[str]:
        return [f"plan for {self.target.describe()}: {self.estimate.describe()}", *(f"  {n}" for n in self.notes)]


def plan(spec: SweepSpec, exp: Experiment, target: Target, pinned: dict | None = None) -> Plan:
    """The plan of `spec` on `target`; `pinned`: the result-deciding settings of the folder's first run."""
    base = Knobs.of_spec(spec)
    given = base.given_by(spec)
    if pinned:
        knobs = dataclasses.replace(base, **{k: _as_field(k, v) for k, v in pinned.items() if k in PINNED})
        note = "padding, probes and speculation pinned by this folder's first run"
        return Plan(knobs, target, estimate(spec, exp, knobs, target), (note,))
    if target.platform not in ACCELERATORS:
        knobs, notes = speculating(spec, base, given, target.platform)
        note = f"{target.platform}: the spec's engine settings"
        return Plan(knobs, target, estimate(spec, exp, knobs, target), (note, *notes))
    return _accelerator_plan(spec, exp, target, base, given)


def speculating(spec: SweepSpec, knobs: Knobs, given: frozenset[str], platform: str) -> tuple[Knobs, tuple[str, ...]]:
    """`knobs` with the searches' speculation depth (the spec's, else the device's: costs.SPECULATION)
    and, where it speculates, the segment length in program steps (the spec's, else a step budget /
    DECISIONS_PER_BUDGET, in whole evaluations); the decisions in words. Only a verified search on a
    linear evaluation schedule speculates: `paper` mode keeps the authors' binary search, and a log
    schedule's evaluation blocks have no common length to count a logical clock in."""
    depth = knobs.speculation if "speculation" in given else SPECULATION.get(platform, 0)
    if depth and (spec.search is None or spec.search.mode == "paper" or spec.train.eval_schedule == "log"):
        why = "no search" if spec.search is None else "paper mode" if spec.search.mode == "paper" else "log schedule"
        return dataclasses.replace(knobs, speculation=0, segment_steps=0), (f"no speculation ({why}): round barrier",)
    if not depth:
        return dataclasses.replace(knobs, speculation=0, segment_steps=0), ()
    every = spec.train.eval_every
    steps = (
        knobs.segment_steps if "segment_steps" in given else spec.train.steps // DECISIONS_PER_BUDGET // every * every
    )
    if steps % every:
        raise ValueError(f"engine.segment_steps: {steps} is not a multiple of train.eval_every = {every}")
    steps = max(every, steps)
    words = f"searches speculate {depth} round(s) ahead, no round barrier; segments of {steps:,} program steps"
    return dataclasses.replace(knobs, speculation=depth, segment_steps=steps), (words,)


def _accelerator_plan(spec: SweepSpec, exp: Experiment, target: Target, base: Knobs, given: frozenset[str]) -> Plan:
    fewer_syncs = dataclasses.replace(base, segment_seconds=ACCELERATOR_SEGMENT_SECONDS)
    segment = base if "segment_seconds" in given else fewer_syncs
    paddings = {"the spec's padding ladders": segment}
    few = few_programs(spec, exp, segment, given)
    if few != segment:
        paddings["few programs (" + _few_words(few, spec) + ")"] = few
    options = []
    for words, knobs in paddings.items():
        for k in _probe_choices(spec, knobs, given):
            candidate, _ = speculating(spec, dataclasses.replace(knobs, probes=k), given, target.platform)
            options.append((estimate(spec, exp, candidate, target), words, candidate))
    best, words, knobs = min(options, key=lambda o: (o[0].seconds, o[2].probes))
    knobs, speculation = speculating(spec, knobs, given, target.platform)
    notes = [f"padding: {words}{_padding_reason(options, words)}", *speculation]
    if spec.search and "probes" not in given and spec.search.mode != "paper":
        notes.append(f"{knobs.probes} probes per round (the fastest of {', '.join(map(str, PROBE_CHOICES))})")
    if "segment_seconds" not in given:
        notes.append(f"segments of {knobs.segment_seconds:g} s")
    notes += [f"{name} = {getattr(knobs, name)!r} as the spec sets it" for name in sorted(given)]
    return Plan(knobs, target, best, tuple(notes))


def few_programs(spec: SweepSpec, exp: Experiment, knobs: Knobs, given: frozenset[str]) -> Knobs:
    """`knobs` with every size that varies over the grid padded to its largest value and every probe to
    at least its point's initial upper bound (where the spec does not say otherwise)."""
    changes = {}
    if "pad_to_max" not in given:
        varying = sorted(n for n in varying_sizes(spec, exp) if n not in knobs.pad_to_max)
        changes["pad_to_max"] = tuple(knobs.pad_to_max) + tuple(varying)
    if spec.search and "search_pad_floor" not in given:
        changes["search_pad_floor"] = 1.0
    return dataclasses.replace(knobs, **changes)


def varying_sizes(spec: SweepSpec, exp: Experiment) -> set[str]:
    """The size fields other than the searched one whose value differs between grid points."""
    searched = spec.search.variable if spec.search else None
    configs = [exp.complete(p) for p in spec.points]
    sizes = {n for n, f in exp.fields.items() if f.kind == SIZE and n != searched}
    return {n for n in sizes if len({c.get(n) for c in configs}) > 1}


def estimate(spec: SweepSpec, exp: Experiment, knobs: Knobs, target: Target) -> Estimate:
    """What the searches (or the grid) would cost under `knobs`: the first round's programs and device
    time (every run to its step budget, waves where a bucket holds fewer slots than runs), and the
    rounds of the longest search."""
    budget = MEMORY_SHARE * target.memory_bytes
    layout = Layout(spec, exp, knobs, target.platform, target.count, budget, throughput.device_key(target))
    runs_per_config = len(spec.seeds) * len(spec.train.learning_rates)
    buckets: dict = {}
    rounds = 1
    for point in spec.points:
        values, point_rounds = first_round(spec, exp, layout, point)
        rounds = max(rounds, point_rounds)
        for value in values:
            config = point if value is None else {**point, spec.search.variable: value}
            bucket = layout.bucket_for(config)
            runs, _ = buckets.get(bucket, (0, config))
            buckets[bucket] = (runs + runs_per_config, config)
    seconds, compile_s = programs_seconds(spec, exp, layout, target, buckets)
    if not knobs.speculation or not spec.train.steps:  # no step budget (an eval-only search): nothing to overlap
        return Estimate(len(buckets), rounds, seconds, compile_s + rounds * seconds)
    first_runs = sum(runs for runs, _ in buckets.values()) // runs_per_config
    path = critical_path_budgets(spec, exp, layout, knobs, first_runs)
    return Estimate(len(buckets), rounds, seconds, compile_s + path * seconds, path)


def critical_path_budgets(spec: SweepSpec, exp: Experiment, layout: Layout, knobs: Knobs, slots: int) -> float:
    """The searches' critical path in step budgets when they speculate `knobs.speculation` rounds ahead, on
    search_timeline's outcome model (one search per point: every seed and learning rate of a point searches
    alike there), in the first round's `slots` per seed and learning rate, deciding every segment."""
    first = {i: first_bracket(exp, layout, point) for i, point in enumerate(spec.points)}
    steps, every = spec.train.steps, spec.train.eval_every
    timelines = search_timeline.modelled(
        layout.search, first, knobs.speculation, knobs.segment_steps, slots, steps, every, spec.train.give_up
    )
    path = search_timeline.summary(timelines, slots)
    return path.path / steps


def programs_seconds(spec: SweepSpec, exp: Experiment, layout: Layout, target: Target, buckets: dict):
    """(device seconds, compile seconds) of `buckets` ({bucket: (runs, a run's config)}): every run to the
    step budget, in waves of the bucket's slots, each program step at its family's measured (else stated)
    rate and at least the device's step floor; one compile per bucket."""
    times = program_times(exp, layout, target, buckets)
    return sum(t.round_seconds(spec.train.steps) for t in times), sum(t.compile_seconds for t in times)


def program_times(exp: Experiment, layout: Layout, target: Target, buckets: dict) -> list[ProgramTime]:
    """Each bucket of `buckets` ({bucket: (runs, a run's config)}) as the planner times it: its slots,
    a program step at its family's measured (else stated) rate and at least the device's step floor."""
    times = []
    for bucket, (runs, config) in buckets.items():
        slots, flops = layout.slots_for(bucket, config), layout.padded_flops(bucket, config)
        rate = throughput.rate(target, exp.name, flops)
        times.append(ProgramTime(runs, slots, rate.seconds(slots // target.count, flops), rate.compile_seconds))
    return times


def first_round(spec: SweepSpec, exp: Experiment, layout: Layout, point: dict) -> tuple[list, int]:
    """The values the first round of the point's search probes ([None] without a search), and the
    most rounds its search takes over answers spread geometrically across its first bracket."""
    if layout.search is None:
        return [None], 1
    bracket = first_bracket(exp, layout, point)
    lo, hi = search_bounds(exp, layout, point)
    answers = {lo - 1, hi} | {round(lo * (hi / lo) ** (i / THRESHOLDS)) for i in range(THRESHOLDS)}
    rounds = max(rounds_until_done(layout.search, bracket, t) for t in answers)
    return searching.probes(layout.search, bracket), rounds


def search_bounds(exp: Experiment, layout: Layout, point: dict) -> tuple[int, int]:
    """The spec's first bracket of the point's search, [lo, hi], evaluated at the point."""
    config = exp.complete(point)
    lo, hi = (int(evaluate(b, config)) for b in (layout.search.lo, layout.search.hi))
    return lo, hi


def first_bracket(exp: Experiment, layout: Layout, point: dict) -> searching.Bracket:
    """The point's search as it starts (search.start: its bounds, capped at the variable's maximum)."""
    return searching.start(
        layout.search, *search_bounds(exp, layout, point), exp.fields[layout.search.variable].maximum
    )


def rounds_until_done(search, bracket: searching.Bracket, answer: int) -> int:
    """Rounds of a search whose runs succeed up to `answer` (monotone outcomes)."""
    b = bracket
    while not b.done:
        b = searching.update(search, b, {v: v <= answer for v in searching.probes(search, b)})
    return b.rounds


def _padding_reason(options: list, chosen: str) -> str:
    """Why the chosen padding: the estimated time of each padding at its fastest probes per round."""
    fastest: dict = {}
    for found, words, _ in options:
        fastest[words] = min(fastest.get(words, math.inf), found.seconds)
    others = [f"{seconds:.3g} s for {words}" for words, seconds in fastest.items() if words != chosen]
    if not others:
        return " (the accelerator's alternative, few programs, is the same plan here)"
    return f" (estimated {fastest[chosen]:.3g} s, the fastest, against {', '.join(others)})"


def _probe_choices(spec: SweepSpec, knobs: Knobs, given: frozenset[str]) -> tuple[int, ...]:
    if spec.search is None or spec.search.mode == "paper" or "probes" in given:
        return (knobs.probes,)
    return PROBE_CHOICES


def _few_words(knobs: Knobs, spec: SweepSpec) -> str:
    parts = [f"{', '.join(knobs.pad_to_max)} padded to their largest value"] if knobs.pad_to_max else []
    if spec.search:
        parts.append(f"every {spec.search.variable} padded to at least its point's initial upper bound")
    return "; ".join(parts)


def _as_field(name: str, value):
    return tuple(value) if name == "pad_to_max" else value


def pinned_knobs(knobs: Knobs) -> dict:
    """What a folder keeps of its first run's plan (see `plan`)."""
    return {name: list(v) if isinstance(v := getattr(knobs, name), tuple) else v for name in PINNED}
