"""The dry run's expected time against the shipped quick runs' wall time, before and after a change of its
model: `jaxmem run SWEEP --preset quick --dry-run` (jaxmem.cli.dry_run) in a tree at --base (`git archive
REV jaxmem` in a temporary folder, first on a child process's PYTHONPATH, as bench_ab.py) and in the
working tree, one child process each, reporting the expected time, its compiles' part and the bound
(jaxmem.plan.sweep_time). The measured time is the shipped run's (sweeps/<family>/data/<sweep>-quick):
its manifest's `elapsed_s`, its compiles' seconds (compiles.parquet) and its segments' (the runs'
`wall_time_s`: each segment's time shared among its live runs; compiles overlap them). Rewrites the
table of benchmarks/RESULTS_dry_run_estimate.md.

    python benchmarks/dry_run_estimate.py --base fe89e50 [--presets fig1_linear fig1_mlp ...]
"""

from __future__ import annotations

import argparse
import io
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
PRESETS = (  # quick presets with a search whose dry run takes a few seconds here
    "fig1_linear",
    "fig1_mlp",
    "lowrank_linear",
    "linear_fixed_outputs",
    "fig6_mlp_fixed_outputs",
    "e2_sample_complexity",
    "ch2_alpha",
    "ch4_dim",
    "hebbian_linear",
    "separability_threshold",
)
RESULTS = HERE / "RESULTS_dry_run_estimate.md"
BEGIN, END = "<!-- table: benchmarks/dry_run_estimate.py -->", "<!-- end of table -->"  # what a run rewrites


def sweep_file(name: str) -> Path:
    (path,) = ROOT.glob(f"sweeps/*/{name}.toml")
    return path


def capturing(module, name: str, into: dict) -> None:
    """Replace `module.name` by a wrapper that keeps its latest result in into[name]."""
    original = getattr(module, name)

    def wrapped(*args):
        into[name] = original(*args)
        return into[name]

    setattr(module, name, wrapped)


def child(name: str) -> None:
    """The dry run of `name`'s quick preset in this process's jaxmem; prints one JSON line: the expected
    time, its compiles' part, the bound, and the modelled searches' run-steps."""
    from jaxmem.cli import dry_run
    from jaxmem.spec.sweep import load

    spec, captured = load(sweep_file(name), "quick"), {}
    capturing(dry_run, "sweep_time", captured)
    capturing(dry_run, "_timelines", captured)
    try:
        dry_run.dry_run(spec)
    except Exception as err:  # the base tree's model may fail where the working tree's does not
        print(json.dumps({"error": type(err).__name__}))
        return
    t, timelines = captured["sweep_time"], captured["_timelines"]
    probe_steps = sum(s.run_steps for modelled in timelines for s in modelled.values()) / len(timelines)
    run_steps = probe_steps * len(spec.train.learning_rates)
    compiles = t.compile_seconds(t.expected_compiles)
    print(json.dumps({"expected": t.expected, "compiles": compiles, "bound": t.bound, "run_steps": run_steps}))


def run_child(tree: Path | None, name: str) -> dict:
    env = dict(os.environ)
    if tree is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(tree), env.get("PYTHONPATH", "")])
    out = subprocess.run(
        [sys.executable, __file__, "--child", name], env=env, capture_output=True, text=True, check=True
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


def measured(name: str) -> dict:
    """The shipped quick run's wall seconds, its compiles' and its segments', and its runs' steps."""
    import pandas as pd

    (folder,) = ROOT.glob(f"sweeps/*/data/{name}-quick")
    runs = pd.read_parquet(folder / "runs.parquet")
    return {
        "elapsed": json.loads((folder / "manifest.json").read_text())["elapsed_s"],
        "compiles": float(pd.read_parquet(folder / "compiles.parquet")["seconds"].sum()),
        "segments": float(runs["wall_time_s"].sum()),
        "run_steps": int(runs["steps_run"].sum()),
    }


def cells(result: dict, wall: float) -> list[str]:
    """Expected, its ratio to the measured `wall`, and its device part (the rest after the compiles)."""
    if "error" in result:
        return [result["error"], "–", "–"]
    e = result["expected"]
    return [f"{e:.1f}", f"{e / wall:.2f}", f"{e - result['compiles']:.1f}"]


def table(base: str, load: float, rows: list[tuple[str, dict, dict, dict]]) -> list[str]:
    lines = [
        f"{time.strftime('%Y-%m-%d')}, load {load:.1f} at the start, `--base {base}`; s: seconds",
        "",
        f"| preset (quick) | expected before ({base}) | expected after | measured | before / measured | "
        "after / measured | bound | compiles: modelled, measured | device: before, after | segments measured | "
        "run-steps: modelled, measured |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name, before, after, m in rows:
        (b, b_ratio, b_device), (a, a_ratio, a_device) = cells(before, m["elapsed"]), cells(after, m["elapsed"])
        lines.append(
            f"| {name} | {b} | {a} | {m['elapsed']:.1f} | {b_ratio} | {a_ratio} | {after['bound']:.1f} | "
            f"{after['compiles']:.1f}, {m['compiles']:.1f} | {b_device}, {a_device} | {m['segments']:.1f} | "
            f"{after['run_steps']:,.0f}, {m['run_steps']:,} |"
        )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", default="HEAD", help="git revision of the 'before' tree")
    parser.add_argument("--presets", nargs="*", default=PRESETS)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(args.child)
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        archive = subprocess.run(["git", "archive", args.base, "jaxmem"], cwd=ROOT, capture_output=True, check=True)
        with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
            tar.extractall(tmp, filter="data")
        rows = [(name, run_child(Path(tmp), name), run_child(None, name), measured(name)) for name in args.presets]
    lines = table(args.base, load, rows)
    print("\n".join(lines))
    text = RESULTS.read_text()
    start, end = text.index(BEGIN) + len(BEGIN), text.index(END)
    RESULTS.write_text(text[:start] + "\n" + "\n".join(lines) + "\n" + text[end:])


if __name__ == "__main__":
    main()
