"""`jaxmem run --dry-run`: the plan of a sweep without running it. One table of its first round's
programs (jaxmem.cli.plan_table), the notes that qualify its numbers stated once, the planner's
decisions with their reasons, the expected time beside the bound (jaxmem.plan.sweep_time), and memory
lines that name the programs over the budget. `verbose` adds one line per program (the old view)."""

from __future__ import annotations

import dataclasses
import functools
import json
import math
from pathlib import Path

from jaxmem.cli import estimate, plan_table
from jaxmem.cli.errors import UsageError
from jaxmem.driver.compiles import slots_text
from jaxmem.driver.folder import spec_changes
from jaxmem.driver.progress import Progress
from jaxmem.engine import device_memory
from jaxmem.persistence.store import FILENAME, Store, StoreError
from jaxmem.plan import planner, search_timeline, throughput
from jaxmem.plan.buckets import Bucket, covers, ladder, padded_config, padding_waste
from jaxmem.plan.runs import Run, point_id
from jaxmem.plan.sweep_time import ProgramTime, SweepTime, in_turn
from jaxmem.plan.target import Target
from jaxmem.spec.expr import evaluate
from jaxmem.spec.sweep import SweepSpec

NOTES = (
    "FLOPs and times at most: padded sizes, every run to its step budget (runs stopping early use fewer)",
    "memory: {memory}",
    "step: one program step of all its slots (vacant ones too); round: the programs' runs in chunks of their slots, "
    "each to its budget",
)
STATE_MEMORY = (
    "the run state and the temporaries the experiment states (a lower bound; --compile: XLA's memory analysis)"
)
COMPILED_MEMORY = "XLA's memory analysis of the compiled program"


@dataclasses.dataclass(frozen=True)
class Program:
    """One program (bucket) of the first round, as the dry run shows it."""

    bucket: Bucket
    template: Run  # its first run: what its memory is traced (or compiled) for
    runs: int
    slots: int  # of every device together
    devices: int
    waste: float  # its FLOPs over its runs' true FLOPs
    flops: float  # per run-step, padded
    rate: throughput.Rate
    memory: int | None = None  # bytes per device; None: over the memory budget, or not `checked`
    refusal: str = ""  # why it does not fit
    checked: bool = False  # its memory traced (or compiled), its slots fewer where the budget asks

    @property
    def over(self) -> bool:
        """Whether it is over the memory budget (`jaxmem run` refuses it)."""
        return bool(self.refusal)

    @property
    def step_seconds(self) -> float:
        return self.rate.seconds(self.slots // self.devices, self.flops)

    @property
    def compile_seconds(self) -> float:
        return self.rate.compile_seconds

    @property
    def chunks(self) -> int:
        return self.time().waves

    def time(self) -> ProgramTime:
        return ProgramTime(self.runs, self.slots, self.step_seconds, self.compile_seconds)


def dry_run(
    spec: SweepSpec,
    memory_cap: float | int = device_memory.DEFAULT_CAP,
    compile: bool = False,
    out: Path | None = None,
    target: Target | None = None,
    verbose: bool = False,
) -> str:
    """The plan of `spec` in words (see the module). Without `compile` nothing is compiled and the memory
    is the run state's (exact, but a lower bound: XLA's temporaries are known only after compiling).
    `out`: the folder `jaxmem run` would use, checked for another sweep. A float64 sweep is sized in
    float64, as it runs. `target`: plan for these devices instead of this machine's (`--plan-for`;
    nothing can be compiled for them)."""
    from jaxmem.driver.sweep import precision

    if compile and target is not None:
        raise UsageError("--compile needs the devices it compiles for: it cannot be combined with --plan-for")
    with precision(spec.train.precision):
        return "\n".join(_plan(spec, memory_cap, compile, out, target, verbose))


def _plan(spec, memory_cap, compile: bool, out: Path | None, target: Target | None, verbose: bool) -> list[str]:
    from jaxmem.driver.sweep import Sweep

    sweep = Sweep(spec, Path("."), NoStore(), Progress(quiet=True), memory_cap=memory_cap, target=target)
    sweep.refresh()
    groups: dict = {}
    for run in sweep.pending.values():
        groups.setdefault(sweep.bucket_for(run), []).append(run)
    planned = [program(sweep, bucket, runs) for bucket, runs in groups.items()]
    programs = checked_programs(sweep, planned, verbose or compile, compile)
    reachable = _compile_bound(sweep)
    time = sweep_time(sweep, programs, reachable)
    memory = (COMPILED_MEMORY if compile else STATE_MEMORY) + _checked_note(programs)
    lines = [
        f"sweep {spec.name} [{spec.preset or 'base'}]: {len(spec.points)} points x {len(spec.seeds)} seeds x "
        f"{len(spec.train.learning_rates)} learning rates; {len(spec.skipped)} impossible points skipped",
        f"plan for {sweep.target.describe()}; memory budget {estimate.size_text(sweep.budget)} per device "
        f"({_cap(memory_cap, sweep.target)})",
        "decisions:",
        *(f"  {note}" for note in decisions(sweep, programs)),
        f"first round: {len(sweep.pending)} runs in {len(groups)} buckets; compiles: {len(groups)} now, at most "
        f"{reachable} over the sweep",
        *plan_table.table(programs, sweep.target.count, spec.train.steps),
        "notes: " + "; ".join(n.format(memory=memory) for n in NOTES),
    ]
    if verbose:
        lines += [_bucket_line(sweep, p, memory) for p in programs]
    lines += [f"  skipped: {skipped}" for skipped in spec.skipped[: None if verbose else 3]]
    if len(spec.skipped) > 3 and not verbose:
        lines.append(f"  ... {len(spec.skipped) - 3} more skipped points (--verbose lists them)")
    return (
        lines
        + _totals(sweep, programs, time, reachable)
        + memory_lines(programs, sweep.budget)
        + _folder_check(spec, out)
    )


def program(sweep, bucket: Bucket, runs: list) -> Program:
    """The bucket's program at its planned slots, padding, timing; its memory not yet `checked`."""
    config = sweep.exp.complete(runs[0].config)
    slots = sweep.layout.slots_for(bucket, runs[0].config)
    flops = sweep.exp.cost("flops_per_step", padded_config(sweep.exp, bucket, config))
    rate = throughput.rate(sweep.target, sweep.exp.name, flops)
    waste = padding_waste(sweep.exp, bucket, [sweep.exp.complete(r.config) for r in runs])
    return Program(bucket, runs[0], len(runs), slots, sweep.target.count, waste, flops, rate)


def checked(sweep, p: Program, compile: bool) -> Program:
    """`p` with its memory per device: its run state traced (or with `compile`, XLA's analysis of its
    program), its slots fewer where the memory budget asks; over the budget, the refusal."""
    try:
        if compile:
            compiled = sweep.programs.compile_bucket(p.bucket, p.template, p.slots)
            slots, used = compiled.slots, compiled.peak_bytes
        else:
            slots, used = sweep.programs.fitting_state(p.bucket, p.template, p.slots)
    except device_memory.OutOfMemory as err:
        return dataclasses.replace(p, refusal=str(err), checked=True)
    return dataclasses.replace(p, slots=slots, memory=used, checked=True)


def checked_programs(sweep, planned: list[Program], every: bool, compile: bool) -> list[Program]:
    """The programs, their memory checked (`checked`): every one with `every`, else `dominant`'s first,
    and the rest too where one of those is over the memory budget or needs fewer slots."""
    first = {p.bucket for p in (planned if every else dominant(sweep.exp, planned))}
    programs = [checked(sweep, p, compile) if p.bucket in first else p for p in planned]
    if all(p.slots == q.slots and not p.over for p, q in zip(programs, planned)):
        return programs
    return [p if p.checked else checked(sweep, p, compile) for p in programs]


def dominant(exp, programs: list[Program]) -> list[Program]:
    """In each row of the table, the programs no other of the row holds in as many slots or more and
    in sizes as large or larger (jaxmem.plan.buckets.covers): where memory grows with sizes and slots,
    each row's largest is among them, and where they fit, so does every program at its planned slots."""
    return [
        p
        for row in plan_table.rows(programs)
        for p in row
        if not any(q is not p and q.slots >= p.slots and covers(exp, q.bucket, p.bucket) for q in row)
    ]


def sweep_time(sweep, programs: list[Program], reachable: int | str) -> SweepTime:
    """The bound and the expected time (jaxmem.plan.sweep_time) of the sweep's searches, or of its grid;
    `reachable`: the compiles it can reach (`_compile_bound`)."""
    compiles = reachable if isinstance(reachable, int) else len(programs)
    times = tuple(p.time() for p in programs)
    if sweep.spec.search is None:
        return SweepTime(times, sweep.spec.train.steps, 1, len(programs), None)
    points = {unit.id: point_id(unit.point) for unit in sweep.mine}
    timelines = _timelines(sweep, programs, points)
    probed = _probed(sweep, timelines, points)
    buckets = _bucket_times(sweep, programs, dict(probed.values()))
    runs = len(sweep.spec.train.learning_rates)  # a probe's
    where = lambda key, value: probed[points[key], value][0]  # noqa: E731  (the bucket of a search's probe)
    busy, reached = [], []
    for modelled in timelines:
        occupancy = search_timeline.occupancy(modelled, where)
        busy.append(in_turn(buckets, {b: (live, steps * runs) for b, (live, steps) in occupancy.items()}))
        reached.append(len({where(key, v) for key, t in modelled.items() for v in t.outcomes}))
    rounds = sweep.plan.estimate.rounds
    n = len(timelines)
    return SweepTime(times, sweep.spec.train.steps, rounds, compiles, sum(busy) / n, sum(reached) / n)


def _timelines(sweep, programs: list[Program], points: dict[str, str]) -> list[dict]:
    """The searches on the outcome model of jaxmem.plan.search_timeline.modelled; `points`: each unit's
    point id. A search's first bracket is its point's (no search has answers to seed another's yet)."""
    knobs, train = sweep.plan.knobs, sweep.spec.train
    brackets: dict = {}
    for unit in sweep.mine:
        if points[unit.id] not in brackets:
            brackets[points[unit.id]] = sweep.searches.bracket(unit)
    first = {unit.id: brackets[points[unit.id]] for unit in sweep.mine}
    slots = sum(p.runs for p in programs)  # a slot for each run of the first round: queues are in its programs' time
    segment = knobs.segment_steps or train.eval_every
    return search_timeline.modelled(
        sweep.layout.search, first, knobs.speculation, segment, slots, train.steps, train.eval_every, train.give_up
    )


def _probed(sweep, timelines: list[dict], points: dict[str, str]) -> dict[tuple[str, int], tuple[Bucket, dict]]:
    """(point id, value) -> the bucket and config of the probes the searches of `timelines` launched, each
    point's value looked up once (`points`: each unit's point id)."""
    units, variable = {unit.id: unit for unit in sweep.mine}, sweep.spec.search.variable
    configs = {
        (points[key], v): {**units[key].point, variable: v}
        for modelled in timelines
        for key, t in modelled.items()
        for v, _, _ in t.spans
    }
    return {probe: (sweep.layout.bucket_for(config), config) for probe, config in configs.items()}


def _bucket_times(sweep, programs: list[Program], configs: dict[Bucket, dict]) -> dict[Bucket, ProgramTime]:
    """Each bucket of `configs` (bucket -> a config of it) as it is timed: the first round's program (its
    memory checked) where it is one, else the planner's program at its planned slots (a probe's runs)."""
    first = {p.bucket: p.time() for p in programs}
    runs = len(sweep.spec.train.learning_rates)
    others = {b: (runs, config) for b, config in configs.items() if b not in first}
    return {**first, **dict(zip(others, planner.program_times(sweep.exp, sweep.layout, sweep.target, others)))}


def _bucket_at(sweep, point: dict, value: int | None) -> Bucket:
    """The bucket of the point's runs at `value` of the searched variable (None: the point's own runs)."""
    return sweep.layout.bucket_for(point if value is None else {**point, sweep.spec.search.variable: value})


def decisions(sweep, programs: list[Program]) -> list[str]:
    """The planner's decisions with their reasons, and the padding the table's programs accepted."""
    notes = list(sweep.plan.notes)
    worst = max(programs, key=lambda p: p.waste, default=None)
    if worst is not None and worst.waste > 1.5:
        _, why = sweep.layout.choice(
            next(r for r in sweep.pending.values() if sweep.bucket_for(r) == worst.bucket).config
        )
        notes.append(f"padding waste up to {worst.waste:.3g}x (bucket {worst.bucket.id}): {why}")
    floor = sweep.plan.knobs.search_pad_floor
    if sweep.spec.search is not None and floor > 0:
        notes.append(
            f"every {sweep.spec.search.variable} probe padded to at least {floor:g} x its point's initial upper "
            "bound: a search's small early probes share the programs of its larger ones instead of each compiling"
        )
    return notes


def _totals(sweep, programs: list[Program], time: SweepTime, reachable: int | str) -> list[str]:
    """The first round, the bound over the sweep (`reachable`: its compiles), the expected time, and
    whether the sweep suits the machine."""
    platform, n = sweep.target.platform, sweep.target.count
    rate = throughput.rate(sweep.target, sweep.exp.name, max((p.flops for p in programs), default=math.nan))
    first = sum(p.runs * p.flops for p in programs) * sweep.spec.train.steps
    lines = [
        f"time, as the planner models it: each program step at its family's rate ({rate.flops_per_second * n:.3g} "
        f"FLOP/s for {n} {platform} device(s) at the costliest program) and at least {rate.step_seconds * 1e3:.2g} "
        f"ms, {rate.compile_seconds:.3g} s per compile, {rate.source}:",
        f"  first round: {len(sweep.pending)} runs, {first:.2e} FLOPs, {len(programs)} compiles: "
        f"{estimate.duration(time.first_round)}",
    ]
    if sweep.spec.search is not None:
        runs, flops = _search_bound(sweep)
        lines += [
            f"  whole sweep (the bound), if no search expands its bracket: at most {runs} runs, {flops:.2e} FLOPs, "
            f"{reachable} compiles, {time.rounds} rounds of the first round's programs: "
            f"{estimate.duration(time.bound)}",
            f"  expected: about {estimate.duration(time.expected)}: about {time.expected_compiles:.0f} compiles and "
            f"{estimate.duration(time.busy_seconds)} of device time, each program's steps while it holds a live "
            f"probe (at least its runs' steps over its slots), the programs in turn ({_model_words(sweep)})",
        ]
    else:
        lines.append(
            f"  expected: at most the bound, {estimate.duration(time.bound)} (no search: runs stopping early are "
            "not modelled)"
        )
    over = sum(p.over for p in programs)
    return lines + ["  " + estimate.sized_line(time.bound, over, platform)]


def _model_words(sweep) -> str:
    schedule = (
        f"speculating {sweep.plan.knobs.speculation} round(s)" if sweep.plan.knobs.speculation else "round barrier"
    )
    share, train = search_timeline.SUCCESS_SHARE, sweep.spec.train
    failure = search_timeline.failure_step(train.steps, train.eval_every, train.give_up)
    when = "all of it" if failure == train.steps else f"{failure:,} steps (its give_up window)"
    return (
        f"{schedule}; answers spread across each bracket, a success known after {share:g} of a budget, a failure "
        f"after {when}: jaxmem.plan.search_timeline"
    )


def _checked_note(programs: list[Program]) -> str:
    """Which programs' memory the dry run checked, where it did not check them all (`dominant`)."""
    count = sum(p.checked for p in programs)
    if count == len(programs):
        return ""
    return (
        f"; checked for {count} of the {len(programs)} programs, in each row those no other exceeds in every size "
        "and in slots (where memory grows with them: each row's largest, and the others fit; --verbose: every "
        "program)"
    )


def memory_lines(programs: list[Program], budget: float) -> list[str]:
    """The peak memory per device among the checked programs that fit, and the programs that do not, by name."""
    fitting = [p for p in programs if p.memory is not None]
    over = [p for p in programs if p.over]
    peak = max(fitting, key=lambda p: p.memory, default=None)
    largest = f"{estimate.size_text(peak.memory)} (bucket {peak.bucket.id})" if peak else ""
    checked = sum(p.checked for p in programs)
    among = f"; {checked} of {len(programs)} programs checked (--verbose: every one)" if checked < len(programs) else ""
    if not programs:
        return ["peak memory per device: none (no program in the first round)"]
    if not over:
        return [f"peak memory per device: {largest}, within the budget of {estimate.size_text(budget)}{among}"]
    names = ", ".join(p.bucket.id for p in over[:6]) + (f" and {len(over) - 6} more" if len(over) > 6 else "")
    fits = f"; the largest that fits: {largest}" if peak else "; none fits"
    return [
        f"peak memory per device: over the budget of {estimate.size_text(budget)} in {len(over)} bucket(s) "
        f"({names}: `jaxmem run` refuses them, exit 6){fits}{among}",
        *(f"  OVER THE MEMORY BUDGET: {p.refusal}" for p in over[:3]),
    ]


def _bucket_line(sweep, p: Program, memory: str) -> str:
    """One program in full (--verbose)."""
    n = sweep.target.count
    used = "over the memory budget" if p.memory is None else f"{p.memory / 2**20:.2f} MiB per device"
    return (
        f"  bucket {p.bucket.id} ({p.bucket.label()}): {p.runs} runs in {p.chunks} chunk(s) of {slots_text(p.slots)} "
        f"({p.slots // n} per device), padding waste {p.waste:.2f}x; per chunk "
        f"{p.slots * p.flops * sweep.spec.train.steps:.2e} FLOPs, {used}"
    )


def _search_bound(sweep) -> tuple[int, float]:
    """Runs and FLOPs of the sweep's searches, each at its costliest monotone outcome (estimate.worst_probes)."""
    spec, runs, flops = sweep.spec, 0, 0.0
    for unit in sweep.units[:: len(spec.seeds)]:  # a search's plan does not depend on the seed
        bracket = sweep.searches.bracket(unit)
        cost = functools.cache(lambda v, p=unit.point: _probe_flops(sweep, p, v))
        values = estimate.worst_probes(sweep.layout.search, bracket, cost)
        runs += len(values) * len(spec.train.learning_rates) * len(spec.seeds)
        flops += sum(map(cost, values)) * len(spec.seeds)
    return runs, flops


def _probe_flops(sweep, point: dict, value: int) -> float:
    """At most the FLOPs of the point's runs at `value` (one per learning rate): their bucket's padded
    sizes over the whole step budget."""
    config = {**point, sweep.spec.search.variable: value}
    padded = padded_config(sweep.exp, sweep.layout.bucket_for(config), sweep.exp.complete(config))
    return sweep.exp.cost("flops_per_step", padded) * sweep.spec.train.steps * len(sweep.spec.train.learning_rates)


def _compile_bound(sweep) -> int | str:
    """Buckets the sweep can reach: every point's, and for a search every padded value of its variable
    inside the initial bracket (a search that expands its bracket may add more)."""
    spec, buckets = sweep.spec, set()
    for unit in sweep.units[:: len(spec.seeds)]:  # buckets do not depend on the seed
        values: set = {None}
        if spec.search is not None:
            lo, hi = (int(evaluate(b, unit.point)) for b in (spec.search.lo, spec.search.hi))
            ratio = sweep.plan.knobs.search_pad_ratio
            if ratio <= 1.0:
                return f"{sum(int(evaluate(spec.search.hi, u.point)) for u in sweep.units)} (one per searched value)"
            values = {lo, hi} | {v for v in ladder(ratio, hi) if lo < v < hi}
        buckets.update(_bucket_at(sweep, unit.point, v) for v in values)
    return len(buckets)


def _cap(cap: float | int, target: Target) -> str:
    memory_kind = "host RAM" if target.platform == "cpu" else "device memory"
    if isinstance(cap, float):
        return f"{cap:g} of {target.memory_bytes / 2**30:.1f} GiB {memory_kind}; --memory-cap"
    return "--memory-cap"


def _folder_check(spec: SweepSpec, out: Path | None) -> list[str]:
    """A line on the output folder: free, this sweep's (resumed), or another's (the run would exit 4)."""
    if out is None or not (out / FILENAME).is_file():
        return [f"output folder: {out} (new)"] if out is not None else []
    try:
        store = Store(out, verify=("meta",), write=False)
        try:
            meta = store.meta()
        finally:
            store.close()
    except StoreError as err:
        return [f"WARNING: output folder {out}: {err}"]
    if meta.get("fingerprint") in (None, spec.fingerprint):
        return [f"output folder: {out} holds this sweep already; `jaxmem run` resumes it"]
    changes = spec_changes(json.loads(meta.get("resolved_spec", "{}")), spec.resolved)
    return [
        f"WARNING: output folder {out} holds a different sweep ({meta.get('spec', '?')}, preset "
        f"{meta.get('preset') or 'none'}{changes}): `jaxmem run` would refuse it (exit 4); choose another --out"
    ]


class NoStore:
    """Stands in for the store in a dry run: nothing has run yet."""

    def meta(self):
        return {}

    def known_at(self, kind="run"):
        return {}

    def probed(self):
        return {}

    def finished_runs(self):
        return {}

    def finished_searches(self):
        return set()

    def search_answers(self):
        return {}

    def add_compile(self, *row):
        pass
