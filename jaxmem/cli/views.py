"""What the CLI shows: shipped sweeps, experiments, dry-run plans, the status of an output folder."""

from __future__ import annotations

import math
import os
import time
from collections import Counter
from pathlib import Path

from jaxmem.engine import device_memory
from jaxmem.driver.distributed import DistributedError
from jaxmem.experiments.registry import shipped
from jaxmem.experiments.interface import REQUIRED
from jaxmem.spec.expr import evaluate
from jaxmem.persistence.lock import LockError, lock_state, read_lease
from jaxmem.engine.device_memory import OutOfMemory
from jaxmem.plan.buckets import ladder, padded_config, padding_waste
from jaxmem.driver.progress import Progress
from jaxmem.spec.sweep import SpecError, SweepSpec, is_file, load
from jaxmem.persistence.store import FILENAME, Store, StoreError, elapsed

SWEEP_DIRS = (Path.cwd() / "sweeps", Path(__file__).resolve().parents[1] / "sweeps")

USER_ERRORS = (SpecError, LockError, StoreError, FileNotFoundError, PermissionError, DistributedError, OutOfMemory)
_EXIT_CODES = {
    SpecError: 2,
    FileNotFoundError: 2,
    LockError: 3,
    StoreError: 4,
    PermissionError: 4,  # a file of the output folder that may not be written (its message names it)
    DistributedError: 5,
    OutOfMemory: 6,
}


def exit_code(err: Exception) -> int:
    return next(code for cls, code in _EXIT_CODES.items() if isinstance(err, cls))


def shipped_sweeps() -> dict[str, Path]:
    """Sweep name (e.g. nichani24/fig1_mlp) -> file, from ./sweeps and the repository's sweeps/."""
    found = {}
    for root in SWEEP_DIRS:
        if root.is_dir():
            for path in sorted(root.rglob("*.toml")):
                found.setdefault(path.relative_to(root).with_suffix("").as_posix(), path)
    return found


def load_spec(name_or_path: str, preset: str | None) -> SweepSpec:
    """Load a spec from a path, or from a shipped sweep's name (`fig1_mlp` or `nichani24/fig1_mlp`)."""
    path = Path(name_or_path)
    if not is_file(path):
        sweeps = shipped_sweeps()
        matches = [p for n, p in sweeps.items() if n == name_or_path or n.split("/")[-1] == name_or_path]
        if len(matches) != 1:
            hint = "; shipped sweeps: " + ", ".join(sweeps) if sweeps else ""
            raise SpecError(name_or_path, [f"no such spec file or shipped sweep{hint}"])
        path = matches[0]
    return load(path, preset)


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
    lines.append("shipped sweeps (jaxmem run NAME --preset quick|paper):")
    for name, path in shipped_sweeps().items():
        lines.append(f"  {name}  ({path})")
    return "\n".join(lines)


def dry_run(spec: SweepSpec, memory_cap: float | int = device_memory.DEFAULT_CAP, compile: bool = False) -> str:
    """The plan: the buckets of the first round with their chunks, slots, padding waste, FLOPs and
    memory per chunk, and the compile count. Without `compile` nothing is compiled and the memory is
    the run state's (exact, but a lower bound: XLA's temporaries are known only after compiling)."""
    from jaxmem.driver.sweep import Sweep

    sweep = Sweep(spec, Path("."), _NoStore(), Progress(quiet=True), memory_cap=memory_cap)
    sweep.refresh()
    groups: dict = {}
    for run in sweep.pending.values():
        groups.setdefault(sweep.bucket_for(run), []).append(run)
    device, n = sweep.devices[0], len(sweep.devices)
    lines = [
        f"sweep {spec.name} [{spec.preset or 'base'}]: {len(spec.points)} points x {len(spec.seeds)} seeds x "
        f"{len(spec.train.learning_rates)} learning rates; {len(spec.skipped)} impossible points skipped",
        f"first round: {len(sweep.pending)} runs in {len(groups)} buckets on {n} {device.platform} device(s); "
        f"compiles: {len(groups)} now, at most {_compile_bound(sweep)} over the sweep",
        f"memory budget: {sweep.budget / 2**30:.2f} GiB per device ({_cap(memory_cap, device)})",
    ]
    for bucket, runs in groups.items():
        slots = sweep.slots_for(bucket, runs[0])
        try:
            if compile:
                program = sweep.compile_bucket(bucket, runs[0], slots)
                slots = program.slots
                used = f"{program.peak_bytes / 2**20:.2f} MiB per device (XLA's memory analysis)"
            else:
                slots, state = sweep.fitting_state(bucket, runs[0], slots)
                used = f">= {state / 2**20:.2f} MiB per device (estimated: the run state; --compile adds temporaries)"
        except device_memory.OutOfMemory as err:
            lines.append(f"  OVER THE MEMORY BUDGET, `jaxmem run` refuses it (exit 6): {err}")
            continue
        configs = [sweep.exp.complete(r.config) for r in runs]
        flops = (
            slots * sweep.exp.cost("flops_per_step", padded_config(sweep.exp, bucket, configs[0])) * spec.train.steps
        )
        waste = padding_waste(sweep.exp, bucket, configs)
        lines.append(
            f"  bucket {bucket.id} ({bucket.label()}): {len(runs)} runs in {math.ceil(len(runs) / slots)} chunk(s) "
            f"of {slots} slots ({slots // n} per device), padding waste {waste:.2f}x; "
            f"per chunk {flops:.2e} FLOPs (at most: runs stopping early use fewer), {used}"
        )
    for skipped in spec.skipped:
        lines.append(f"  skipped: {skipped}")
    return "\n".join(lines)


def _compile_bound(sweep) -> int | str:
    """Buckets the sweep can reach: every point's, and for a search every padded value of its variable
    inside the initial bracket (a search that expands its bracket may add more)."""
    spec, buckets = sweep.spec, set()
    for unit in sweep.units[:: len(spec.seeds)]:  # buckets do not depend on the seed
        values: set = {None}
        if spec.search is not None:
            lo, hi = (int(evaluate(b, unit.point)) for b in (spec.search.lo, spec.search.hi))
            if spec.engine.search_pad_ratio <= 1.0:
                return f"{sum(int(evaluate(spec.search.hi, u.point)) for u in sweep.units)} (one per searched value)"
            values = {lo, hi} | {v for v in ladder(spec.engine.search_pad_ratio, hi) if lo < v < hi}
        buckets.update(sweep.bucket_for(sweep._runs_for(unit, v, 0)[0]) for v in values)
    return len(buckets)


def _cap(cap: float | int, device) -> str:
    memory_kind = "host RAM" if device.platform == "cpu" else "device memory"
    if isinstance(cap, float):
        return f"{cap:g} of {device_memory.device_memory(device) / 2**30:.1f} GiB {memory_kind}; --memory-cap"
    return "--memory-cap"


class _NoStore:
    """Stands in for the store in a dry run: nothing has run yet."""

    def finished_runs(self):
        return {}

    def finished_searches(self):
        return set()

    def add_compile(self, *row):
        pass


def holds_results(out: Path) -> Path:
    """`out`, if it holds a results file."""
    if not (out / FILENAME).is_file():
        raise FileNotFoundError(f"{out} holds no jaxmem results ({FILENAME} is missing)")
    return out


def existing_output(out: Path) -> Path:
    """An output folder holding results that `jaxmem report` can write its files into."""
    if not os.access(holds_results(out), os.W_OK):
        raise StoreError(
            f"cannot write the report into {out}: the folder is not writable; copy it to a writable folder and "
            "run `jaxmem report` there"
        )
    return out


def status(out: Path) -> str:
    """Progress of the sweep in `out`, read without writing anything (the folder may be read-only)."""
    store = Store(holds_results(out), write=False)
    try:
        meta, runs, searches = store.meta(), store.table("runs"), store.table("searches")
        compiles, last_write = store.table("compiles"), store.last_write()
    finally:
        store.close()
    state = lock_state(out)
    lease = read_lease(out / ".lock")
    end = time.time() if state.startswith("running") else max(last_write or 0.0, lease.heartbeat if lease else 0.0)
    lines = [
        f"sweep {meta.get('spec', '?')} [{meta.get('preset') or 'base'}] in {out} ({state})",
        f"runs finished: {len(runs)} ({int(runs['success'].sum()) if len(runs) else 0} successful, "
        f"{int(runs['diverged'].sum()) if len(runs) else 0} diverged)",
        f"threshold searches finished: {len(searches)}",
        f"compiles: {len(compiles)} ({compiles['seconds'].sum() if len(compiles) else 0:.1f} s); "
        f"elapsed: {elapsed(meta, end):.1f} s",
    ]
    checkpoints = (
        sorted(p.name for p in (out / "checkpoints").glob("*") if p.is_dir()) if (out / "checkpoints").is_dir() else []
    )
    if checkpoints:
        lines.append(f"in-flight checkpoints: {len(checkpoints)} bucket(s); rerun `jaxmem run` to resume")
    if len(runs):
        by_bucket = Counter(runs["bucket"])
        lines.append("runs per bucket: " + ", ".join(f"{b}: {n}" for b, n in by_bucket.most_common()))
    return "\n".join(lines)
