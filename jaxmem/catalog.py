"""What the CLI shows: shipped sweeps, experiments, dry-run plans, the status of an output folder."""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path

import jax
import numpy as np

from jaxmem.experiments import EXPERIMENTS
from jaxmem.experiments.base import REQUIRED
from jaxmem.lock import LockError, lock_state
from jaxmem.spec import SpecError, SweepSpec, is_file, load
from jaxmem.store import FILENAME, StoreError, load_results

SWEEP_DIRS = (Path.cwd() / "sweeps", Path(__file__).resolve().parents[1] / "sweeps")

USER_ERRORS = (SpecError, LockError, StoreError, FileNotFoundError)
_EXIT_CODES = {SpecError: 2, FileNotFoundError: 2, LockError: 3, StoreError: 4}


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
    lines = ["experiments:"]
    for exp in EXPERIMENTS.values():
        lines.append(f"  {exp.name}: {exp.doc}")
        for name, field in exp.fields.items():
            extra = f" one of {list(field.choices)}" if field.choices else ""
            default = "" if field.default is REQUIRED else f" (default {field.default!r})"
            lines.append(f"      {name} [{field.type.__name__}]{default}: {field.doc}{extra}")
    lines.append("shipped sweeps (jaxmem run NAME --preset quick|paper):")
    for name, path in shipped_sweeps().items():
        lines.append(f"  {name}  ({path})")
    return "\n".join(lines)


def dry_run(spec: SweepSpec) -> str:
    """The plan of the first round: buckets, runs, slots, padding waste, FLOPs and memory per chunk."""
    from jaxmem.driver import Sweep
    from jaxmem.plan import padding_waste
    from jaxmem.program import make_segment

    sweep = Sweep(spec, Path("."), _NoStore(), None)
    sweep.refresh()
    exp, groups = sweep.exp, {}
    for run in sweep.pending.values():
        groups.setdefault(sweep.bucket_for(run), []).append(exp.complete(run.config))
    devices = jax.local_devices()
    lines = [
        f"sweep {spec.name} [{spec.preset or 'base'}]: {len(spec.points)} points x {len(spec.seeds)} seeds x "
        f"{len(spec.train.learning_rates)} learning rates; {len(spec.skipped)} impossible points skipped",
        f"first round: {len(sweep.pending)} runs in {len(groups)} buckets (one compile each) on "
        f"{len(devices)} {devices[0].platform} device(s)",
    ]
    for bucket, configs in groups.items():
        flops = [exp.flops_per_step(c) for c in configs]
        slots = sweep.slots_for(bucket, next(r for r in sweep.pending.values() if sweep.bucket_for(r) == bucket))
        segment, init_all = make_segment(exp, bucket.shape_dict, sweep.settings)
        state = jax.eval_shape(
            init_all, np.zeros(slots, np.int32), np.zeros(slots, np.int32), _dyn(exp, configs[0], slots)
        )
        state_bytes = sum(math.prod(a.shape) * a.dtype.itemsize for a in jax.tree.leaves(state))
        lines.append(
            f"  bucket {bucket.id} ({bucket.label()}): {len(configs)} runs, {slots} slots, padding waste "
            f"{padding_waste(exp, bucket, configs):.2f}x, {sum(flops) * spec.train.steps:.2e} FLOPs, "
            f"state {state_bytes / 2**20:.1f} MiB per chunk"
        )
    for skipped in spec.skipped:
        lines.append(f"  skipped: {skipped}")
    return "\n".join(lines)


def _dyn(exp, config, slots):
    from jaxmem.program import dyn_arrays

    return dyn_arrays([exp.dynamic(config)] * slots, [1.0] * slots)


class _NoStore:
    """Stands in for the store in a dry run: nothing has run yet."""

    def finished_runs(self):
        return {}

    def finished_searches(self):
        return set()


def existing_output(out: Path) -> Path:
    if not (out / FILENAME).is_file():
        raise FileNotFoundError(f"{out} holds no jaxmem results ({FILENAME} is missing)")
    return out


def status(out: Path) -> str:
    existing_output(out)
    meta = load_results(out, "meta").set_index("key")["value"].to_dict()
    runs, searches = load_results(out, "runs"), load_results(out, "searches")
    compiles = load_results(out, "compiles")
    lines = [
        f"sweep {meta.get('spec', '?')} [{meta.get('preset') or 'base'}] in {out} ({lock_state(out)})",
        f"runs finished: {len(runs)} ({int(runs['success'].sum()) if len(runs) else 0} successful, "
        f"{int(runs['diverged'].sum()) if len(runs) else 0} diverged)",
        f"threshold searches finished: {len(searches)}",
        f"compiles: {len(compiles)} ({compiles['seconds'].sum() if len(compiles) else 0:.1f} s); "
        f"elapsed: {float(meta.get('elapsed_s', 0)):.1f} s",
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
