"""The device campaign: every shipped sweep's `gpu` preset (the size at which its claims undecided on a CPU can
show: benchmarks/GPU_PRESETS.md) run within one call of at most 9 minutes on one H100 or H200, in a stated order
(PRIORITY first: the seeds' headline figures and the claims undecided at quick size; then the others, cheapest
first), each under its own time cap, its results written in the shipped form (`jaxmem export`). On the device:

    PYTHONPATH=$PWD python benchmarks/device_campaign.py --out $OUT

Each preset is a child process `python -m jaxmem.cli run SPEC --preset gpu --out STORE --quiet` under a cap
(CAP_FACTOR × the planner's estimate + CAP_SLACK, at most what is left of --budget); a capped run is stopped with
SIGTERM (its runs checkpointed), exported as it is, and marked `capped`: the next call imports it and resumes it.
The stores live in a scratch folder (--work); --out receives only what comes back from a device call: one tar of
exports per family (`<family>.tar`, each `<sweep>-gpu/` a `jaxmem export` folder: at most 8 files, 16 MiB each)
and `campaign.json` (per preset: status, seconds, cap, estimate, exit code, device), both rewritten after every
preset, so a call cut short still leaves what it finished. A second call continues with the presets not yet done,
reading what --out holds (`--from DIR`: first copy a previous call's output there).

    python benchmarks/device_campaign.py --plan [--device h200] [--budget 510]   # order, estimates, what fits
    python benchmarks/device_campaign.py --smoke      # the same path on this CPU, two presets shrunk (--set)
    python benchmarks/device_campaign.py --import DIR # a campaign's exports to sweeps/<family>/data/<sweep>-gpu/

The parent never starts JAX on the accelerator (JAX_PLATFORMS=cpu for its estimates); the children get the
environment as it was.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

CHILD_ENV = dict(os.environ)  # the children's environment: before the parent pins JAX to the CPU
os.environ["JAX_PLATFORMS"] = "cpu"  # the parent only estimates: it must not hold the accelerator's memory

ROOT = Path(__file__).resolve().parent.parent
SWEEPS = ROOT / "sweeps"
PRESET = "gpu"
STATE = "campaign.json"
BUDGET_S = 510.0  # one device call of 9 minutes, less 30 s for startup and the last export
CAP_FACTOR = 1.5  # a preset's cap: this many times its estimate ...
CAP_SLACK = 45.0  # ... plus the child's start (JAX import, spec, plan) and its report
MIN_START_S = 40.0  # a preset is not started with less than this left of the budget
GRACE_S = 20.0  # after SIGTERM, the child's time to checkpoint its runs before SIGKILL
SMOKE_CAP_S = 300.0  # a smoke preset's cap on a CPU (the estimates are the device's: seconds)
MAX_FILE = 16 * 2**20  # the limit on one file coming back from a device call
PRIORITY = (  # the seeds' headline figures and the claims undecided at quick size, first
    "fig1_linear",
    "fig1_mlp",
    "fig3_main",
    "fig5_dm2_momentum_adam",
    "fig4_dm2_gd",
    "e2_sample_complexity",
    "e1_phase1_bias",
    "fig5_linear_attention",
    "thm6_regime",
    "compatibility_threshold",
    "separability_threshold",
    "fig6_mlp_fixed_outputs",
    "linear_fixed_outputs",
    "ch2_alpha",  # the thesis's headline figures: sample complexity in alpha*, ch 4's dimension law, the graph
    "ch4_dim",  # transformer's threshold and in-context learning's attention
    "ch3_gcn",
    "ch7_attention",
)
SMOKE = {  # two presets shrunk to seconds on a CPU: the same code path as the device's
    "fig1_linear": [
        "seeds=[0]",
        "grid.d=[8]",
        "train.steps=32",
        "train.learning_rates=[10.0]",
        "search.resolution=0.5",
    ],
    "hessian_vs_H": ["seeds=[0]", "grid.H=[1, 2]"],
}


@dataclasses.dataclass(frozen=True)
class Preset:
    family: str
    sweep: str
    path: Path
    changes: tuple[str, ...] = ()  # --set overrides (the smoke run's)

    @property
    def name(self) -> str:
        return f"{self.sweep}-{PRESET}"


def gpu_presets() -> list[Preset]:
    """Every shipped sweep with a `gpu` preset (its own or one it inherits: `extends`)."""
    from jaxmem.spec.sweep import read_toml

    found = []
    for path in sorted(SWEEPS.glob("*/*.toml")):
        if PRESET in read_toml(path).get("presets", {}):
            found.append(Preset(path.parent.name, path.stem, path))
    return found


def estimate_s(preset: Preset, device: str) -> float:
    """The planner's bound for the preset on `device` (jaxmem.plan.planner.Estimate.every_round_seconds: compiles
    and every round, each run to its step budget): a cap from it stops no search the planner expects to end."""
    from jaxmem.cli.views import load_spec
    from jaxmem.experiments.registry import get
    from jaxmem.plan import planner
    from jaxmem.plan.target import named

    spec = load_spec(str(preset.path), PRESET, list(preset.changes))
    return planner.plan(spec, get(spec.experiment), named(device)).estimate.every_round_seconds


def ordered(presets: list[Preset], estimates: dict[str, float]) -> list[Preset]:
    """PRIORITY's presets in its order, then the others cheapest first."""
    rank = {sweep: i for i, sweep in enumerate(PRIORITY)}
    return sorted(presets, key=lambda p: (rank.get(p.sweep, len(rank)), estimates[p.sweep], p.sweep))


def cap_for(estimate: float, left: float, floor: float = 0.0) -> float:
    """A preset's time cap: CAP_FACTOR × its estimate + CAP_SLACK (at least `floor`), at most `left`."""
    return min(left, max(floor, CAP_FACTOR * estimate + CAP_SLACK))


def starts(estimate: float, left: float, first: bool) -> bool:
    """Whether a preset starts with `left` seconds of the call: when its estimate fits (the first preset of a call
    starts anyway, capped, to resume next call), and MIN_START_S are left."""
    return left >= MIN_START_S and (first or estimate <= left)


def plan_text(presets: list[Preset], device: str, budget: float) -> str:
    """The campaign's order with each preset's estimate and cap, and which fit in one call of `budget` s (by
    their estimates: each ends by the sum of the estimates before it)."""
    estimates = {p.sweep: estimate_s(p, device) for p in presets}
    lines = [
        f"device campaign on one {device}: {len(presets)} `gpu` presets, one call of {budget:.0f} s "
        f"(caps: {CAP_FACTOR:g} x estimate + {CAP_SLACK:.0f} s)",
        f"{'#':>3}  {'family':<16}{'sweep':<26}{'estimate':>9}{'cap':>7}{'ends by':>9}  in this call",
    ]
    used = 0.0
    for i, p in enumerate(ordered(presets, estimates), 1):
        cap = cap_for(estimates[p.sweep], budget - used)
        fits = starts(estimates[p.sweep], budget - used, used == 0.0)
        used += estimates[p.sweep] if fits else 0.0  # the expected time; the cap only bounds a slow one
        capped, ends = (f"{cap:.0f}s", f"{used:.0f}s") if fits else ("-", "-")
        where = "yes" if fits else "next call"
        lines.append(f"{i:>3}  {p.family:<16}{p.sweep:<26}{estimates[p.sweep]:>8.0f}s{capped:>7}{ends:>9}  {where}")
    return "\n".join(lines)


# ---- running


def run_capped(command: list[str], cap: float, log: Path) -> tuple[int, float, bool]:
    """Run `command` (output to `log`) for at most `cap` seconds, then SIGTERM, GRACE_S later SIGKILL; its exit
    code, seconds, and whether the cap stopped it."""
    started = time.monotonic()
    with log.open("ab") as sink:
        child = subprocess.Popen(command, cwd=ROOT, env=CHILD_ENV, stdout=sink, stderr=subprocess.STDOUT)
        try:
            return child.wait(timeout=cap), time.monotonic() - started, False
        except subprocess.TimeoutExpired:
            child.send_signal(signal.SIGTERM)
            try:
                child.wait(timeout=GRACE_S)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
            return child.returncode, time.monotonic() - started, True


def run_command(preset: Preset, store: Path) -> list[str]:
    sets = [arg for change in preset.changes for arg in ("--set", change)]
    return [sys.executable, "-m", "jaxmem.cli", "run", str(preset.path), "--preset", PRESET, "--out", str(store)] + [
        "--quiet",
        *sets,
    ]


def device_name() -> str:
    """The accelerator the children see, in words (a child process: the parent's JAX is pinned to the CPU)."""
    code = "import jax; d = jax.devices(); print(f'{d[0].device_kind} x{len(d)} ({d[0].platform})')"
    done = subprocess.run([sys.executable, "-c", code], env=CHILD_ENV, capture_output=True, text=True, timeout=120)
    return done.stdout.strip() or f"unknown ({done.stderr.strip().splitlines()[-1:]})"


def load_state(out: Path) -> dict:
    path = out / STATE
    return json.loads(path.read_text()) if path.is_file() else {"presets": {}}


def save_state(out: Path, state: dict) -> None:
    (out / STATE).write_text(json.dumps(state, indent=1, sort_keys=True) + "\n")


def unbundle(out: Path, exports: Path) -> None:
    """Every family tar in `out` extracted into `exports` (a previous call's exports, to keep and resume)."""
    for bundle in sorted(out.glob("*.tar")):
        with tarfile.open(bundle) as tar:
            tar.extractall(exports / bundle.stem, filter="data")


def bundle(exports: Path, out: Path, family: str) -> Path:
    """The family's exports in one tar in `out` (written to a temporary name, then renamed: never half a tar)."""
    target, part = out / f"{family}.tar", out / f".{family}.tar.part"
    with tarfile.open(part, "w") as tar:
        for folder in sorted((exports / family).iterdir()):
            tar.add(folder, arcname=folder.name)
    part.replace(target)
    if target.stat().st_size > MAX_FILE:
        print(f"WARNING: {target} is {target.stat().st_size / 2**20:.1f} MiB, over the 16 MiB a file may be")
    return target


def resumable_store(preset: Preset, exports: Path, stores: Path) -> Path:
    """The preset's store folder: a previous call's capped export imported into it, where there is one."""
    from jaxmem.persistence.shipped import import_results

    store, export = stores / preset.name, exports / preset.family / preset.name
    if not (store / "results.sqlite").exists() and (export / "manifest.json").exists():
        import_results(export, store)
    return store


def run_one(preset: Preset, paths: dict[str, Path], cap: float, estimate: float, device: str) -> dict:
    """The preset run under `cap`, exported (finished or not) into the family's exports; its state entry."""
    from jaxmem.persistence.shipped import export_results

    store = resumable_store(preset, paths["exports"], paths["stores"])
    code, seconds, capped = run_capped(run_command(preset, store), cap, paths["log"])
    status = "done" if code == 0 else "capped" if capped else "failed"
    if (store / "results.sqlite").exists():
        target = paths["exports"] / preset.family / preset.name
        shutil.rmtree(target, ignore_errors=True)
        export_results(store, target)
    return {
        "family": preset.family,
        "status": status,
        "exit_code": code,
        "seconds": round(seconds, 1),
        "cap_s": round(cap, 1),
        "estimate_s": round(estimate, 1),
        "device": device,
    }


def campaign(
    presets: list[Preset], out: Path, work: Path, budget: float, device_kind: str, cap_floor: float = 0.0
) -> dict:
    """Run the presets not yet done in `out`'s state, in order, within `budget` seconds; the state."""
    started = time.monotonic()
    out.mkdir(parents=True, exist_ok=True)
    paths = {"exports": work / "exports", "stores": work / "stores", "log": out / "campaign.log"}
    for folder in (paths["exports"], paths["stores"]):
        folder.mkdir(parents=True, exist_ok=True)
    unbundle(out, paths["exports"])
    state = load_state(out)
    device = device_name()
    state.setdefault("calls", []).append({"device": device, "budget_s": budget})
    todo = [p for p in presets if state["presets"].get(p.name, {}).get("status") != "done"]
    estimates = {p.sweep: estimate_s(p, device_kind) for p in todo}
    for i, preset in enumerate(ordered(todo, estimates)):
        left = budget - (time.monotonic() - started)
        if not starts(estimates[preset.sweep], left, i == 0):
            print(f"{preset.name}: waits for the next call ({left:.0f} s left)", flush=True)
            continue
        cap = cap_for(estimates[preset.sweep], left, cap_floor)
        print(f"{preset.name}: estimate {estimates[preset.sweep]:.0f} s, cap {cap:.0f} s", flush=True)
        entry = run_one(preset, paths, cap, estimates[preset.sweep], device)
        state["presets"][preset.name] = entry
        if (paths["exports"] / preset.family).is_dir():
            bundle(paths["exports"], out, preset.family)
        save_state(out, state)
        print(f"{preset.name}: {entry['status']} (exit {entry['exit_code']}) in {entry['seconds']:.0f} s", flush=True)
    save_state(out, state)
    return state


# ---- importing a campaign's results


def import_campaign(folder: Path, sweeps: Path = SWEEPS) -> list[Path]:
    """Every export of a campaign's output `folder` (its family tars), each checked against its manifest, placed
    as `sweeps/<family>/data/<sweep>-gpu/` with the device (campaign.json's) named in its manifest."""
    from jaxmem.persistence.shipped import MANIFEST, verified_tables

    state = load_state(folder)["presets"]
    placed = []
    with tempfile.TemporaryDirectory() as scratch:
        unbundle(folder, Path(scratch))
        for export in sorted(Path(scratch).glob(f"*/*-{PRESET}")):
            verified_tables(export)
            entry = state.get(export.name, {})
            manifest = json.loads((export / MANIFEST).read_text())
            manifest |= {"device": entry.get("device", "unknown"), "campaign_status": entry.get("status", "unknown")}
            (export / MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
            target = sweeps / export.parent.name / "data" / export.name
            shutil.rmtree(target, ignore_errors=True)
            shutil.copytree(export, target)
            placed.append(target)
    return placed


# ---- entry point


def smoke_presets() -> list[Preset]:
    chosen = {p.sweep: p for p in gpu_presets() if p.sweep in SMOKE}
    missing = set(SMOKE) - set(chosen)
    if missing:
        raise SystemExit(f"device_campaign --smoke: no `gpu` preset in {', '.join(sorted(missing))}")
    return [dataclasses.replace(chosen[s], changes=tuple(SMOKE[s])) for s in SMOKE]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, help="the campaign's output folder (on the device: $OUT)")
    parser.add_argument("--from", dest="source", type=Path, help="a previous call's output, copied into --out first")
    parser.add_argument("--work", type=Path, help="scratch folder for the stores (default: a temporary one)")
    parser.add_argument("--budget", type=float, default=BUDGET_S, help="seconds of this call (default %(default)s)")
    parser.add_argument("--device", default="h200", help="the device kind the caps are estimated for")
    parser.add_argument("--sweeps", help="only these sweeps' presets (comma-separated)")
    parser.add_argument("--plan", action="store_true", help="print the order, estimates and what fits; run nothing")
    parser.add_argument("--smoke", action="store_true", help="two presets shrunk, on this machine")
    parser.add_argument("--import", dest="imported", type=Path, help="place a campaign's exports in sweeps/*/data/")
    args = parser.parse_args(argv)
    presets = smoke_presets() if args.smoke else gpu_presets()
    if args.sweeps:
        presets = [p for p in presets if p.sweep in args.sweeps.split(",")]
    if args.plan:
        print(plan_text(presets, args.device, args.budget))
        return 0
    if args.imported:
        for target in import_campaign(args.imported):
            print(f"imported {target.relative_to(ROOT)}")
        return 0
    if args.out is None:
        parser.error("--out is required to run the campaign")
    if args.source:
        shutil.copytree(args.source, args.out, dirs_exist_ok=True)
    with tempfile.TemporaryDirectory() as scratch:
        floor = SMOKE_CAP_S if args.smoke else 0.0
        budget = max(args.budget, 2 * SMOKE_CAP_S) if args.smoke else args.budget
        state = campaign(presets, args.out, args.work or Path(scratch), budget, args.device, floor)
    statuses = [state["presets"].get(p.name, {}).get("status", "not started") for p in presets]
    print(", ".join(f"{p.name}: {s}" for p, s in zip(presets, statuses)))
    return 0 if all(s == "done" for s in statuses) else 3


if __name__ == "__main__":
    sys.exit(main())
