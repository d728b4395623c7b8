"""A coarser ladder for the searched size against the spec's on this CPU: each quick preset run with
`engine.search_pad_ratio` at the spec's value and at 2.0, alternately, one at a time, each with an empty
persistent compile cache, then tabulated: wall time (the store's `elapsed_s`), compiles and their seconds,
run-steps and whether every search found the same capacity. Writes RESULTS_padding_cpu_ab.md.

    python benchmarks/padding_ab.py --run --results DIR [--presets fig1_linear,fig1_mlp] [--reps 2]
    python benchmarks/padding_ab.py --results DIR        # tabulate runs already made
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
import common as C  # noqa: E402

from jaxmem.persistence.store import load_results  # noqa: E402

RESULTS = HERE / "RESULTS_padding_cpu_ab.md"
RATIOS = {"spec": 1.41, "ratio2": 2.0}  # the spec format's default search_pad_ratio, and the coarser ladder


def folder(results: Path, preset: str, label: str, rep: int) -> Path:
    return results / f"{preset}-{label}-{rep}"


def run(results: Path, presets: list[str], reps: int) -> None:
    for rep in range(1, reps + 1):
        for preset in presets:
            for label, ratio in RATIOS.items():
                with tempfile.TemporaryDirectory() as cache:
                    command = [sys.executable, "-m", "jaxmem.cli", "run", preset, "--preset", "quick"]
                    command += ["--set", f"engine.search_pad_ratio={ratio}"]
                    command += ["--out", str(folder(results, preset, label, rep))]
                    env = {**os.environ, "JAXMEM_CACHE_DIR": cache}
                    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
                    C.log(f"{preset} {label} {rep}: exit {done.returncode}")


def measured(out: Path) -> dict:
    meta = load_results(out, "meta").set_index("key")["value"]
    compiles, runs = load_results(out, "compiles"), load_results(out)
    return {
        "wall": float(meta["elapsed_s"]),
        "compiles": len(compiles),
        "compile_s": float(compiles["seconds"].sum()),
        "run_steps": int(runs["steps_run"].sum()),
        "capacity": load_results(out, "searches")["capacity"].to_numpy(),
    }


def markdown(results: Path, presets: list[str], reps: int, note: str) -> str:
    rows = []
    for preset in presets:
        for rep in range(1, reps + 1):
            spec, coarse = (measured(folder(results, preset, label, rep)) for label in RATIOS)
            differ = int(np.sum(~((spec["capacity"] == coarse["capacity"]) | np.isnan(spec["capacity"]))))
            rows.append(
                [
                    preset,
                    rep,
                    f"{spec['wall']:.1f}",
                    f"{coarse['wall']:.1f}",
                    f"{coarse['wall'] / spec['wall']:.2f}",
                    f"{spec['compiles']} / {spec['compile_s']:.1f}",
                    f"{coarse['compiles']} / {coarse['compile_s']:.1f}",
                    f"{spec['run_steps']:,} / {coarse['run_steps']:,}",
                    f"{differ} of {len(spec['capacity'])}",
                ]
            )
    cols = [
        "quick preset",
        "rep:",
        "wall s, ratio 1.41:",
        "wall s, ratio 2:",
        "÷:",
        "compiles / s, 1.41:",
        "compiles / s, 2:",
        "run-steps, 1.41 / 2:",
        "capacities that differ:",
    ]
    return "\n".join(
        [
            "# The searched size on a ratio-2 ladder against the spec's on this CPU",
            "",
            "`python benchmarks/padding_ab.py`: each quick preset with `--set engine.search_pad_ratio=1.41` (the "
            "default) and `=2.0`, alternately, one run at a time on the otherwise idle 2-core CPU, each with an "
            f"empty persistent compile cache. Wall: the store's `elapsed_s`. {note}".rstrip(),
            "",
            *C.md_table(cols, rows),
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--results", type=Path, required=True)
    parser.add_argument("--run", action="store_true")
    parser.add_argument("--presets", default="fig1_linear,fig1_mlp,fig6_mlp_fixed_outputs")
    parser.add_argument("--reps", type=int, default=2)
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--note", default="", help="how the runs were made, where not by --run")
    args = parser.parse_args()
    presets = args.presets.split(",")
    if args.run:
        run(args.results, presets, args.reps)
    args.out.write_text(markdown(args.results, presets, args.reps, args.note))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
