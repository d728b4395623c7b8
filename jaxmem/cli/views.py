"""What the CLI shows: shipped sweeps, experiments, dry-run plans."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

from jaxmem.cli import estimate, overrides
from jaxmem.cli.errors import UsageError
from jaxmem.cli.paths import shipped_matches, shipped_name, shipped_sweeps
from jaxmem.cli.status import holds_results
from jaxmem.driver.folder import spec_changes
from jaxmem.driver.compiles import slots_text
from jaxmem.engine import device_memory
from jaxmem.experiments.registry import searching, shipped
from jaxmem.experiments.interface import REQUIRED
from jaxmem.spec.expr import evaluate
from jaxmem.spec.tables import suggest
from jaxmem.plan.buckets import ladder, padded_config, padding_waste
from jaxmem.plan import search_timeline, throughput
from jaxmem.plan.planner import programs_seconds
from jaxmem.plan.target import Target
from jaxmem.driver.progress import Progress
from jaxmem.spec.sweep import SpecError, SweepSpec, is_file, parse, read_toml
from jaxmem.persistence.store import FILENAME, Store, StoreError, load_results


def spec_path(name_or_path: str) -> Path:
    """A spec file's path, or a shipped sweep's (`fig1_mlp` or `nichani24/fig1_mlp`), with the closest
    shipped name suggested for a typo."""
    path = Path(name_or_path)
    if is_file(path):
        return path
    matches = shipped_matches(name_or_path)
    if len(matches) == 1:
        return matches[0]
    sweeps = shipped_sweeps()
    names = list(sweeps) + sorted({n.split("/")[-1] for n in sweeps})
    close = suggest(name_or_path, names)
    hint = close or ("; shipped sweeps: " + ", ".join(sweeps) if sweeps else "")
    raise SpecError(name_or_path, [f"no such spec file or shipped sweep{hint}; `jaxmem list` shows them"])


def origin(name_or_path: str, changes: list[str] = ()) -> dict:
    """How `jaxmem run` was given a sweep, as `jaxmem status` suggests rerunning it from any folder: a
    shipped sweep's full name or the spec file's absolute path, and the `--set` overrides."""
    path = spec_path(name_or_path)
    return {"spec": shipped_name(path) or str(path.resolve()), "set": list(changes)}


def load_spec(name_or_path: str, preset: str | None, changes: list[str] = ()) -> SweepSpec:
    """Load a spec from a path or a shipped sweep's name, with `--set` overrides applied to its raw
    values before they are validated. An experiment named `module:ATTRIBUTE` is also looked up in the
    spec's own folder."""
    path = spec_path(name_or_path)
    raw = overrides.apply(read_toml(path), list(changes))
    source = str(path) + (f" with --set {' '.join(changes)}" if changes else "")
    with searching(path.parent):
        return parse(raw, name=path.stem, preset=preset, source=source)


def sweep_summary(path: Path) -> tuple[str, list[str]]:
    """A shipped sweep's one-line description and its presets ('' and [] where it cannot be read)."""
    try:
        raw = read_toml(path)
    except SpecError:
        return "", []
    lines = str(raw.get("description", "")).strip().splitlines()
    presets = raw.get("presets", {})
    return (lines[0] if lines else ""), (sorted(presets) if isinstance(presets, dict) else [])


def listing() -> str:
    lines = [
        "experiments (field kinds: size = padded to its bucket, static = one program per value, "
        "traced = read at run time, host = never in the program):"
    ]
    for exp in shipped().values():
        lines.append(f"  {exp.name}: {exp.doc}")
        for name, field in exp.fields.items():
            extra = f" one of {list(field.choices)}" if field.choices else ""
            default = "" if field.default is REQUIRED else f" (default {field.default!r})"
            lines.append(f"      {name} [{field.type.__name__}, {field.kind}]{default}: {field.doc}{extra}")
        lines.append(f"      metrics (each run's evaluations; final_<name> in runs.csv): {', '.join(exp.metrics)}")
    lines.append("shipped sweeps, with their presets (jaxmem run NAME [--preset P]; the default is quick):")
    for name, path in shipped_sweeps().items():
        description, presets = sweep_summary(path)
        lines.append(f"  {name}  [{', '.join(presets) or 'no presets'}]  {description}".rstrip())
    return "\n".join(lines)


def dry_run(
    spec: SweepSpec,
    memory_cap: float | int = device_memory.DEFAULT_CAP,
    compile: bool = False,
    out: Path | None = None,
    target: Target | None = None,
) -> str:
    """The plan: the buckets of the first round with their chunks, slots, padding waste, FLOPs and
    memory per chunk, and the totals: runs, FLOPs, compiles, peak memory per device and the time at a
    stated throughput (jaxmem.cli.estimate), for the first round and, where a search can go on, a bound
    over the sweep. Without `compile` nothing is compiled and the memory is the run state's (exact, but
    a lower bound: XLA's temporaries are known only after compiling). `out`: the folder `jaxmem run`
    would use, checked for another sweep. A float64 sweep is sized in float64, as it runs. `target`:
    plan for these devices instead of this machine's (`--plan-for`; nothing can be compiled for them)."""
    from jaxmem.driver.sweep import precision

    if compile and target is not None:
        raise UsageError("--compile needs the devices it compiles for: it cannot be combined with --plan-for")
    with precision(spec.train.precision):
        return _plan(spec, memory_cap, compile, out, target)


def _plan(spec: SweepSpec, memory_cap: float | int, compile: bool, out: Path | None, target: Target | None) -> str:
    from jaxmem.driver.sweep import Sweep

    sweep = Sweep(spec, Path("."), _NoStore(), Progress(quiet=True), memory_cap=memory_cap, target=target)
    sweep.refresh()
    groups: dict = {}
    for run in sweep.pending.values():
        groups.setdefault(sweep.bucket_for(run), []).append(run)
    n = sweep.target.count
    lines = [
        f"sweep {spec.name} [{spec.preset or 'base'}]: {len(spec.points)} points x {len(spec.seeds)} seeds x "
        f"{len(spec.train.learning_rates)} learning rates; {len(spec.skipped)} impossible points skipped",
        *sweep.plan.describe(),
        f"first round: {len(sweep.pending)} runs in {len(groups)} buckets on {n} {sweep.target.platform} device(s); "
        f"compiles: {len(groups)} now, at most {_compile_bound(sweep)} over the sweep",
        f"memory budget: {estimate.size_text(sweep.budget)} per device ({_cap(memory_cap, sweep.target)})",
    ]
    peak, over = 0, 0
    for bucket, runs in groups.items():
        slots = sweep.layout.slots_for(bucket, runs[0].config)
        try:
            if compile:
                program = sweep.programs.compile_bucket(bucket, runs[0], slots)
                slots, used_bytes = program.slots, program.peak_bytes
                used = f"{used_bytes / 2**20:.2f} MiB per device (XLA's memory analysis)"
            else:
                slots, used_bytes = sweep.programs.fitting_state(bucket, runs[0], slots)
                used = (
                    f">= {used_bytes / 2**20:.2f} MiB per device (the run state and the temporaries the experiment "
                    "states; --compile: XLA's memory analysis)"
                )
        except device_memory.OutOfMemory as err:
            lines.append(f"  OVER THE MEMORY BUDGET, `jaxmem run` refuses it (exit 6): {err}")
            over += 1
            continue
        peak = max(peak, used_bytes)
        configs = [sweep.exp.complete(r.config) for r in runs]
        flops = slots * _padded_flops(sweep, bucket, configs[0]) * spec.train.steps
        waste = padding_waste(sweep.exp, bucket, configs)
        lines.append(
            f"  bucket {bucket.id} ({bucket.label()}): {len(runs)} runs in {math.ceil(len(runs) / slots)} chunk(s) "
            f"of {slots_text(slots)} ({slots // n} per device), padding waste {waste:.2f}x; "
            f"per chunk {flops:.2e} FLOPs (at most: runs stopping early use fewer), {used}"
        )
    for skipped in spec.skipped:
        lines.append(f"  skipped: {skipped}")
    return "\n".join(lines + _totals(sweep, groups, peak, over) + _folder_check(spec, out))


def _padded_flops(sweep, bucket, config: dict) -> float:
    """FLOPs per step of one run in `bucket` (its padded sizes: what the program computes)."""
    return sweep.exp.cost("flops_per_step", padded_config(sweep.exp, bucket, config))


def _run_flops(sweep, run) -> float:
    """At most the FLOPs of one run: its bucket's padded sizes over the whole step budget."""
    return _padded_flops(sweep, sweep.bucket_for(run), sweep.exp.complete(run.config)) * sweep.spec.train.steps


def _totals(sweep, groups: dict, peak: int, over: int) -> list[str]:
    """The totals of the first round and, for a search, the bound over the sweep; the time the planner's
    model gives them (planner.programs_seconds); whether the sweep suits this machine."""
    platform, n = sweep.target.platform, sweep.target.count
    first = sum(_run_flops(sweep, r) for r in sweep.pending.values())
    rate = _rate(sweep, groups)
    buckets = {bucket: (len(runs), sweep.exp.complete(runs[0].config)) for bucket, runs in groups.items()}
    device_s, compile_s = programs_seconds(sweep.spec, sweep.exp, sweep.layout, sweep.target, buckets)
    secs = device_s + compile_s
    lines = [
        "totals (FLOPs at most: padded sizes, every run to its step budget; early stops use fewer), timed as the "
        f"planner does: each program step at its family's rate ({rate.flops_per_second * n:.3g} FLOP/s for {n} "
        f"{platform} device(s) at the costliest program) and at least {rate.step_seconds * 1e3:.2g} ms, "
        f"{rate.compile_seconds:.3g} s per compile, {rate.source}:",
        f"  first round: {len(sweep.pending)} runs, {first:.2e} FLOPs, {len(groups)} compiles: "
        f"{estimate.duration(secs)}",
    ]
    if sweep.spec.search is not None:
        runs, flops = _search_bound(sweep)
        bound = _compile_bound(sweep)
        compiles = bound if isinstance(bound, int) else len(groups)
        secs = sweep.plan.estimate.rounds * device_s + compile_s * compiles / max(len(groups), 1)
        lines.append(
            f"  whole sweep, if no search expands its bracket: at most {runs} runs, {flops:.2e} FLOPs, {bound} "
            f"compiles, {sweep.plan.estimate.rounds} rounds of the first round's programs: {estimate.duration(secs)}"
        )
        lines.append("  " + _logical(sweep, groups))
    lines += [
        "  " + estimate.peak_line(peak, over, sweep.budget),
        "  " + estimate.sized_line(secs, over, platform),
    ]
    return lines


def _logical(sweep, groups: dict) -> str:
    """The searches' critical path, run-steps and occupancy in the first round's programs, on the model of
    jaxmem.plan.search_timeline.estimate (benchmarks/search_latency.py's simulation)."""
    knobs, train = sweep.plan.knobs, sweep.spec.train
    first = {unit.id: sweep.searches.bracket(unit) for unit in sweep.mine}
    slots = sum(sweep.layout.slots_for(bucket, runs[0].config) for bucket, runs in groups.items())
    segment = knobs.segment_steps or train.eval_every
    found = search_timeline.estimate(
        sweep.layout.search, first, knobs.speculation, segment, slots, train.steps, train.eval_every
    )
    schedule = f"speculating {knobs.speculation} round(s)" if knobs.speculation else "round barrier"
    share = search_timeline.SUCCESS_SHARE
    return f"searches ({schedule}, {share:g} of a budget per success): {found.describe(train.steps)}"


def _rate(sweep, groups: dict) -> throughput.Rate:
    """The device's throughput (jaxmem.plan.throughput) for the sweep's family at the size of its
    first round's costliest program."""
    sizes = [_padded_flops(sweep, bucket, sweep.exp.complete(runs[0].config)) for bucket, runs in groups.items()]
    return throughput.rate(sweep.target, sweep.exp.name, max(sizes, default=math.nan))


def _search_bound(sweep) -> tuple[int, float]:
    """Runs and FLOPs of the sweep's searches, each at its costliest monotone outcome (estimate.worst_probes)."""
    spec, runs, flops = sweep.spec, 0, 0.0
    for unit in sweep.units[:: len(spec.seeds)]:  # a search's plan does not depend on the seed
        bracket = sweep.searches.bracket(unit)
        cost = lambda v, u=unit: sum(_run_flops(sweep, r) for r in sweep.searches.runs_for(u, v, 0))  # noqa: E731
        values = estimate.worst_probes(sweep.layout.search, bracket, cost)
        runs += len(values) * len(spec.train.learning_rates) * len(spec.seeds)
        flops += sum(map(cost, values)) * len(spec.seeds)
    return runs, flops


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
        buckets.update(sweep.bucket_for(sweep.searches.runs_for(unit, v, 0)[0]) for v in values)
    return len(buckets)


def _cap(cap: float | int, target: Target) -> str:
    memory_kind = "host RAM" if target.platform == "cpu" else "device memory"
    if isinstance(cap, float):
        return f"{cap:g} of {target.memory_bytes / 2**30:.1f} GiB {memory_kind}; --memory-cap"
    return "--memory-cap"


class _NoStore:
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


def edited_report_table(name_or_path: str, preset: str | None, out: Path) -> dict:
    """The `[report]` table of a spec file (with `preset`, by default the folder's own) for re-rendering
    the report of the sweep in `out`; SpecError when the file describes another sweep (anything that
    changes results differs: only [report], [engine] layout and the description may)."""
    meta = load_results(out, "meta").set_index("key")["value"].to_dict()
    stored, stored_spec = meta.get("preset") or None, json.loads(meta.get("resolved_spec", "{}"))
    spec = load_spec(name_or_path, preset if preset is not None else stored)
    if meta.get("fingerprint") != spec.fingerprint:
        results = [
            {k: v for k, v in r.items() if k not in ("report", "description")} for r in (stored_spec, spec.resolved)
        ]
        changes = spec_changes(*results)
        raise SpecError(
            name_or_path,
            [
                f"describes another sweep than {out} ({meta.get('spec', '?')}, preset {stored or 'none'}{changes}); "
                "--spec may change the [report] table only"
            ],
        )
    return spec.resolved.get("report", {})


def existing_output(out: Path) -> Path:
    """An output folder holding results that `jaxmem report` can write its files into."""
    if not os.access(holds_results(out), os.W_OK):
        raise StoreError(
            f"cannot write the report into {out}: the folder is not writable; copy it to a writable folder and "
            "run `jaxmem report` there"
        )
    return out
