"""The linen Fig 1 memory (examples/fig1_mlp_linen.toml, a user experiment through `from_flax`) against the
shipped assoc_memory MLP (sweeps/nichani24/fig1_mlp.toml), both at their quick preset: are the capacities
equal within the search resolution, and is the linen sweep's time within 1.2x of the shipped one's?

Each sweep runs in a fresh process, alternately, `--reps` times, compiling cold (no persistent cache). A
process's time is its setup (importing the experiment: for the linen one, the adapter's padding check)
plus `run_sweep` (compiles and training; the report aside). The two sweeps' runs have other keys (a run's
key hashes its complete config), so they draw other embeddings and initial weights from the same
distributions: their capacities agree in distribution, seed by seed they differ by the seeds' spread.
The grid point whose medians differ most is then searched again with `--seeds` seeds.

    python benchmarks/bench_flax_adapter.py [--reps 2] [--seeds 8] [--out benchmarks/RESULTS_flax_adapter.md]
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
import common as C  # noqa: E402

SWEEPS = {"shipped assoc_memory": "sweeps/nichani24/fig1_mlp.toml", "linen from_flax": "examples/fig1_mlp_linen.toml"}
RESOLUTION = 0.05  # the quick preset's: a search stops at hi / lo <= 1 + RESOLUTION
RUN_TIME_LIMIT = 1.2


def child(sweep: str, out: str, changes: dict) -> None:
    """One sweep's quick preset (with `changes` to it: grid, seeds) into `out`, timed; prints one JSON line."""
    start = time.perf_counter()
    with C.CpuShare() as cpu:
        C.cold_compiles()
        from jaxmem.experiments.registry import searching
        from jaxmem.spec.sweep import parse, read_toml

        path = ROOT / sweep
        raw = read_toml(path)
        raw["presets"]["quick"].update(changes)
        with searching(path.parent):
            spec = parse(raw, name=path.stem, preset="quick", source=str(path))
        setup_s = time.perf_counter() - start
        run = C.run_engine(spec, Path(out))
    total = {"setup_s": setup_s, "compile_s": run.compile_s, "run_s": run.run_s, "total_s": setup_s + run.total_s}
    print(json.dumps({**total, "cpu_s": cpu.mine_s, "others": cpu.share}))


def run_child(sweep: str, out: Path, changes: dict | None = None) -> dict:
    cmd = [sys.executable, __file__, "--child", sweep, "--out-dir", str(out), "--changes", json.dumps(changes or {})]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"{sweep} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def capacities(out: Path) -> pd.Series:
    from jaxmem.persistence.store import load_results

    searches = load_results(out, "searches")
    return searches.set_index(["d", "m_over_d", "seed"])["capacity"].sort_index()


def timing_rows(timings: list[tuple[int, str, dict]]) -> list[list]:
    return [
        [
            rep,
            name,
            *(f"{t[k]:.1f}" for k in ("setup_s", "compile_s", "run_s", "total_s", "cpu_s")),
            f"{100 * t['others']:.0f}%",
        ]
        for rep, name, t in timings
    ]


def within(ratio: float) -> bool:
    return 1 / (1 + RESOLUTION) <= ratio <= 1 + RESOLUTION


def compared(found: dict[str, pd.Series]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Capacities side by side per run, and their medians over seeds per grid point, with linen / shipped."""
    both = pd.DataFrame({"shipped": found["shipped assoc_memory"], "linen": found["linen from_flax"]})
    both["ratio"] = both["linen"] / both["shipped"]
    groups = both.groupby(level=["d", "m_over_d"])[["shipped", "linen"]]
    points = groups.median()
    points["ratio"] = points["linen"] / points["shipped"]
    for name in ("shipped", "linen"):
        points[f"{name} range"] = [f"{lo:g}-{hi:g}" for lo, hi in zip(groups.min()[name], groups.max()[name])]
    return both, points


def capacity_lines(both: pd.DataFrame, points: pd.DataFrame) -> list[str]:
    rows = [
        [d, r, f"{p.shipped:g}", f"{p.linen:g}", f"{p.ratio:.3f}", "yes" if within(p.ratio) else "no"]
        + [p["shipped range"], p["linen range"]]
        for (d, r), p in points.iterrows()
    ]
    columns = ["d:", "m/d:", "shipped:", "linen:", "ratio:", "within resolution", "shipped seeds:", "linen seeds:"]
    lines = C.md_table(columns, rows)
    lines += ["Per run:", ""]
    rows = [[d, r, s, f"{x.shipped:g}", f"{x.linen:g}", f"{x.ratio:.3f}"] for (d, r, s), x in both.iterrows()]
    lines += C.md_table(["d:", "m/d:", "seed:", "shipped:", "linen:", "ratio:"], rows)
    share = sum(within(r) for r in both["ratio"])
    verdict = "yes" if all(within(r) for r in points["ratio"]) else "no"
    return lines + [
        f"{share} of {len(both)} runs within the resolution; every point's median within it: {verdict}.",
        "",
    ]


def report(timings, found: dict, second: dict, seeds: int) -> list[str]:
    def ratio(measure: str) -> float:
        best = {name: min(t[measure] for _, n, t in timings if n == name) for name in SWEEPS}
        return best["linen from_flax"] / best["shipped assoc_memory"]

    def verdict(value: float) -> str:
        return f"**{value:.2f}x** ({'within' if value <= RUN_TIME_LIMIT else 'over'} the {RUN_TIME_LIMIT}x limit)"

    lines = ["# The linen Fig 1 memory (from_flax) against the shipped assoc_memory MLP, quick preset", ""]
    lines += C.md_table(["", ""], [[k, v] for k, v in C.machine().items()])
    lines += ["## Run time", "", "Seconds per process, alternating; 'others' is the CPU share of other processes.", ""]
    columns = ["rep:", "sweep", "setup:", "compile:", "run:", "total:", "CPU s:", "others:"]
    lines += C.md_table(columns, timing_rows(timings))
    lines += [
        f"Linen / shipped, best of each: wall time {verdict(ratio('total_s'))}, the process's CPU seconds "
        f"{verdict(ratio('cpu_s'))}. Where other processes take much of the CPU, the wall times vary with their "
        "load from one process to the next; the CPU seconds much less.",
        "",
    ]
    lines += ["## Capacities (largest N reaching 99 % accuracy)", ""]
    lines += [
        f"Median (and range) over seeds per grid point; the search resolution is {RESOLUTION:.0%} "
        f"(hi / lo <= {1 + RESOLUTION}).",
        "",
    ]
    lines += capacity_lines(*compared(found))
    lines += [f"## The farthest point again, {seeds} seeds", ""]
    lines += capacity_lines(*compared(second))
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reps", type=int, default=2)
    parser.add_argument("--seeds", type=int, default=8, help="seeds of the second look at the farthest point")
    parser.add_argument("--out", default=str(HERE / "RESULTS_flax_adapter.md"))
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--out-dir", help=argparse.SUPPRESS)
    parser.add_argument("--changes", default="{}", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(args.child, args.out_dir, json.loads(args.changes))
    timings, found = [], {}
    with tempfile.TemporaryDirectory() as tmp:
        for rep in range(args.reps):
            order = list(SWEEPS) if rep % 2 == 0 else list(reversed(SWEEPS))
            for name in order:
                out = Path(tmp) / f"{rep}-{name.split()[0]}"
                C.log(f"rep {rep}: {name}")
                timings.append((rep, name, run_child(SWEEPS[name], out)))
                caps = capacities(out)
                if name in found and not found[name].equals(caps):
                    C.log(f"{name}: capacities differ between reps")
                found.setdefault(name, caps)
        _, points = compared(found)
        d, ratio = points["ratio"].map(lambda r: abs(math.log(r))).idxmax()
        changes = {"grid": {"d": [int(d)], "m_over_d": [int(ratio)]}, "seeds": list(range(args.seeds))}
        second = {}
        for name in SWEEPS:
            C.log(f"d = {d}, m/d = {ratio}, {args.seeds} seeds: {name}")
            out = Path(tmp) / f"seeds-{name.split()[0]}"
            run_child(SWEEPS[name], out, changes)
            second[name] = capacities(out)
    lines = report(timings, found, second, args.seeds)
    Path(args.out).write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
