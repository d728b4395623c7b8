"""What a compile costs inside a sweep on this machine, per experiment family: the compiles of quick runs made one
at a time on the otherwise idle machine, each with an empty persistent compile cache of its own, against the
compile that benchmarks/bench_throughput.py times alone (jaxmem/plan/throughput.json's family rows) and the
compiles of the shipped quick runs (sweeps/*/data/*-quick, many of them made beside other jobs). In a sweep a
program compiles on a thread of its own while other programs train, its tracing and the process's first
lowering included, so it takes longer than alone.

Writes RESULTS_compile_costs.md and, with --write, the idle medians into this machine's entry of throughput.json as
`sweep_compile_seconds` ({family: seconds}), which the planner and the dry run charge per compile here
(jaxmem.plan.throughput.rate).

    python benchmarks/compile_costs.py --run --results DIR [--presets fig1_linear,e1_phase1_bias]
    python benchmarks/compile_costs.py --results DIR [DIR ...] [--write]

--run runs each preset (default: PRESETS, one or two per family) into DIR/<sweep>-quick first, one at a time.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
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

from jaxmem.engine.device_memory import target_of  # noqa: E402
from jaxmem.persistence.store import load_results  # noqa: E402
from jaxmem.plan import throughput  # noqa: E402

RESULTS = HERE / "RESULTS_compile_costs.md"
PRESETS = (  # a quick preset or two of every family, the cheaper ones
    "fig1_linear",
    "fig4_facts_vs_params",
    "ch5_datasets",
    "ch4_mean",
    "ch3_gamma",
    "ch6_alpha_iterations",
    "ch6_mechanism",
    "ch7_alpha_steps",
    "ch7_attention",
    "fig2_dm1_gd",
    "e3_parity",
    "e1_phase1_bias",
    "e6_ablations",
    "compatibility_threshold",
    "escape_times",
    "thm6_regime",
    "ch2_alpha",
    "thm10_construction",
)


def run_idle(presets: list[str], results: Path) -> None:
    """Each quick preset run into results/<sweep>-quick, one after another, each with an empty compile cache."""
    for name in presets:
        with tempfile.TemporaryDirectory() as cache:
            started = time.monotonic()
            command = [sys.executable, "-m", "jaxmem.cli", "run", name, "--preset", "quick"]
            done = subprocess.run(
                [*command, "--out", str(results / f"{name}-quick")],
                cwd=ROOT,
                env={**os.environ, "JAXMEM_CACHE_DIR": cache},
                capture_output=True,
                text=True,
            )
            C.log(f"{name}: exit {done.returncode} after {time.monotonic() - started:.0f} s")


def store_compiles(folders: list[Path]) -> pd.DataFrame:
    """One row per compile of every store in `folders` (each a store, or a folder of stores): family, sweep,
    seconds."""
    stores = [f for top in folders for f in ([top] if (top / "results.sqlite").exists() else sorted(top.iterdir()))]
    return labelled(
        (f.name, load_results(f, "meta"), load_results(f, "compiles"))
        for f in stores
        if (f / "results.sqlite").exists()
    )


def shipped_compiles(sweeps: Path = ROOT / "sweeps") -> pd.DataFrame:
    """One row per compile of every shipped quick export: family, sweep, seconds."""
    return labelled(
        (f.name, pd.read_parquet(f / "meta.parquet"), pd.read_parquet(f / "compiles.parquet"))
        for f in sorted(sweeps.glob("*/data/*-quick"))
    )


def labelled(found) -> pd.DataFrame:
    """The compiles of each (folder name, meta table, compiles table) of `found`, as rows of family (the
    meta's experiment), sweep and seconds."""
    frames = [
        compiles.assign(family=meta.set_index("key")["value"]["experiment"], sweep=name.removesuffix("-quick"))
        for name, meta, compiles in found
    ]
    return pd.concat(frames, ignore_index=True)[["family", "sweep", "seconds"]]


def family_medians(compiles: pd.DataFrame) -> dict[str, float]:
    """Each family's median compile seconds."""
    return {family: float(group.median()) for family, group in compiles.groupby("family")["seconds"]}


def alone(entry: dict, family: str) -> float | None:
    """The compile seconds bench_throughput measured alone for `family` (its rows' median), if it did."""
    rows = entry.get("families", {}).get(family, [])
    return statistics.median(r["compile_seconds"] for r in rows) if rows else None


def markdown(idle: pd.DataFrame, shipped: pd.DataFrame, entry: dict, device: str, sources: str) -> str:
    shipped_median = family_medians(shipped)
    rows = []
    for family, group in idle.groupby("family"):
        seconds, solo = group["seconds"], alone(entry, family)
        rows.append(
            [
                family,
                ", ".join(sorted(group["sweep"].unique())),
                len(group),
                f"{seconds.median():.1f}",
                f"{seconds.quantile(0.25):.1f}–{seconds.quantile(0.75):.1f}",
                "—" if solo is None else f"{solo:.1f}",
                "—" if solo is None else f"{seconds.median() / solo:.1f}×",
                f"{shipped_median[family]:.1f}" if family in shipped_median else "—",
            ]
        )
    cols = ["family", "idle runs (quick)", "compiles:", "median s:", "25–75 % s", "alone s:", "÷ alone:", "shipped s:"]
    return "\n".join(
        [
            "# What a compile costs inside a sweep",
            "",
            f"`python benchmarks/compile_costs.py`, {device}: the compiles of quick runs made one at a time on the "
            f"otherwise idle machine, each with an empty compile cache ({sources}), per experiment family; *alone*: "
            "the compile bench_throughput.py timed by itself (throughput.json; '—': a family it does not time); "
            "*shipped*: the median compile of the shipped quick runs (sweeps/*/data/*-quick), many of them made "
            f"beside other jobs. The idle medians are the `sweep_compile_seconds` of throughput.json's '{device}' "
            "entry: what the planner and the dry run charge a compile here.",
            "",
            *C.md_table(cols, rows),
            f"{len(idle)} compiles of {idle['sweep'].nunique()} idle runs, {idle['seconds'].sum():.0f} s in all; "
            f"the shipped runs: {len(shipped)} compiles, {shipped['seconds'].sum():.0f} s.",
            "",
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--results", type=Path, nargs="+", required=True, help="stores, or folders of stores")
    parser.add_argument("--run", action="store_true", help="run the presets into the first --results folder first")
    parser.add_argument("--presets", default=",".join(PRESETS))
    parser.add_argument("--sources", default="", help="how the stores were made, for the report (default: --run's)")
    parser.add_argument("--write", action="store_true", help="set this machine's sweep_compile_seconds")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    if args.run:
        run_idle(args.presets.split(","), args.results[0])
    import jax

    device = throughput.device_key(target_of(jax.devices()))
    idle = store_compiles(args.results)
    measured = json.loads(throughput.TABLE.read_text())
    entry = measured.setdefault(device, {})
    sources = args.sources or f"`--run` on {time.strftime('%Y-%m-%d')}"
    args.out.write_text(markdown(idle, shipped_compiles(), entry, device, sources))
    print(f"wrote {args.out}")
    if args.write:
        entry["sweep_compile_seconds"] = {f: round(s, 2) for f, s in family_medians(idle).items()}
        throughput.TABLE.write_text(json.dumps(measured, indent=1, sort_keys=True) + "\n")
        print(f"wrote {throughput.TABLE}: {device}'s sweep_compile_seconds")


if __name__ == "__main__":
    main()
