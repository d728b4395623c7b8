"""The matmul-precision validation table: the quick Fig 1 grids' capacities at each `engine.matmul_precision`
against "highest" (the default, which every stored result was computed at), on this machine's device.

Each (grid, precision) is one `jaxmem run --preset quick --set engine.matmul_precision=P` in its own process,
into its own folder under --work; the table compares the per-point capacity medians (capacity.csv) and the
report's slope verdict with the "highest" run's. On a CPU, which computes every f32 matmul in full, tf32
and bf16 are emulated (jaxmem/engine/emulated_precision.py: each matmul's operands rounded to 10 or 7
mantissa bits, f32 accumulation); on an accelerator they are its own algorithms. A precision the device
computes as another one (no algorithm for it, no emulation) is listed as such, not run twice. Each run
states the load (the share of the machine's cores other processes used while it ran) and the loss paths
its programs compiled (dense logits, or the blocked cross-entropy the planner may choose: plan.loss_blocks).
With --reuse, a run already in --work (its capacity.csv) is read instead of run again, with the wall and
load this script recorded beside it ("—" for a run without that record).

With --resolution R every search ends within a relative R instead of the preset's 3-5 %: the acceptance's
5 % cannot be told from one step of a 5 % search (a probe that flips with the last bits of a matmul moves an
answer by a step), so the table in benchmarks/ is run at the paper's 1 %.

    python benchmarks/precision_check.py [--grids fig1_linear,fig1_mlp] [--precisions highest,tf32,bf16]
        [--resolution 0.01] [--work DIR] [--reuse] [--out benchmarks/RESULTS_precision_cpu.md]
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import jax
import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import common as C  # noqa: E402

from jaxmem.engine.program import emulates, jax_matmul_precision, precision_label  # noqa: E402
from jaxmem.spec.sweep import load  # noqa: E402

SWEEPS = HERE.parent / "sweeps" / "nichani24"
CLI = "from jaxmem.cli.main import main; main()"
TOLERANCE = 0.05  # issue 39's acceptance: every capacity median within 5 % of 'highest'


def changes_a_matmul(algorithm: str) -> bool:
    """Whether the device computes a 64 x 64 f32 matmul differently at `algorithm` than at "highest" (XLA's
    CPU backend accepts BF16_BF16_F32 and computes in f32)."""
    x = jax.numpy.asarray(np.random.default_rng(0).standard_normal((64, 64)), np.float32)
    with jax.default_matmul_precision("highest"):
        exact = jax.jit(lambda a: a @ a)(x)
    with jax.default_matmul_precision(algorithm):
        other = jax.jit(lambda a: a @ a)(x)
    return bool(jax.numpy.any(exact != other))


def program_of(precision: str, platform: str) -> str:
    """What the device runs for `precision`: its emulation, or JAX's algorithm (shared between names)."""
    return f"{precision} emulated" if emulates(precision, platform) else jax_matmul_precision(precision, platform)


def children_cpu() -> float:
    t = os.times()
    return t.children_user + t.children_system


def run_grid(grid: str, precision: str, out: Path, resolution: float | None) -> tuple[float, float]:
    """(wall seconds, share of the cores other processes used meanwhile) of one quick run of `grid` at
    `precision` (and the search `resolution`, where given) into `out` (a fresh process)."""
    command = [
        sys.executable,
        "-c",
        CLI,
        "run",
        str(SWEEPS / f"{grid}.toml"),
        "--preset",
        "quick",
        "--set",
        f'engine.matmul_precision="{precision}"',
        "--out",
        str(out),
        "--quiet",
        "--no-compile-cache",
        *(["--set", f"search.resolution={resolution}"] if resolution else []),
    ]
    start, busy, child = time.perf_counter(), C.cpu_busy(), children_cpu()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    others = C.cpu_busy() - busy - (children_cpu() - child)
    return wall, max(others, 0.0) / (wall * os.cpu_count())


def recorded_run(grid: str, precision: str, out: Path, reuse: bool, resolution: float | None) -> tuple:
    """(wall, load) of the run in `out`: run now and recorded beside it, or (with `reuse`, where it already
    finished) as recorded, (nan, nan) without a record."""
    record = out.with_suffix(".json")
    if reuse and (out / "capacity.csv").is_file():
        return tuple(json.loads(record.read_text())) if record.is_file() else (float("nan"), float("nan"))
    measured = run_grid(grid, precision, out, resolution)
    record.write_text(json.dumps(measured))
    return measured


def loss_paths(out: Path) -> str:
    """The loss paths of the run's compiled programs, e.g. "dense ×7, blocked 128 ×1"."""
    with sqlite3.connect(out / "results.sqlite") as db:
        shapes = [json.loads(row[0]) for row in db.execute("select shape from compiles")]
    counts = collections.Counter(shape.get("loss_block", 0) for shape in shapes)
    return ", ".join(f"{f'blocked {b}' if b else 'dense'} ×{n}" for b, n in sorted(counts.items()))


def seconds_text(value: float, scale: float = 1.0, unit: str = "") -> str:
    return "—" if value != value else f"{scale * value:.0f}{unit}"


def medians(out: Path) -> pd.Series:
    """Capacity median per grid point, indexed by the point's label (its varying fields)."""
    table = pd.read_csv(out / "capacity.csv")
    keys = [k for k in ("d", "m") if k in table and table[k].nunique() > 1]
    return table.set_index(keys)["capacity_median"]


def slope_verdict(out: Path) -> str:
    """The report's line on the fitted slope against its expected band."""
    lines = (out / "report.md").read_text().splitlines()
    return next((line.strip("- ") for line in lines if line.lstrip("- ").startswith("Expected slope")), "—")


def rows_for(grid: str, runs: dict[str, Path], walls: dict[str, tuple], platform: str) -> list[list]:
    base = medians(runs["highest"])
    rows = []
    for precision, out in runs.items():
        ours = medians(out)
        worst = ((ours - base).abs() / base).max()
        points = ", ".join(f"{k}: {v:g}" for k, v in ours.items())
        algorithm = jax_matmul_precision(precision, platform)
        computed = precision_label(precision, platform)
        if not emulates(precision, platform) and algorithm != "highest":
            computed += f"; honoured: {'yes' if changes_a_matmul(algorithm) else 'no (computed in f32)'}"
        wall, load = walls[precision]
        rows.append(
            [
                grid,
                precision,
                computed,
                seconds_text(wall),
                seconds_text(load, 100, "%"),
                loss_paths(out),
                points,
                f"{100 * worst:.1f}%",
                "yes" if worst <= TOLERANCE else "**no**",
                slope_verdict(out),
            ]
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--grids", default="fig1_linear,fig1_mlp")
    parser.add_argument("--precisions", default="highest,tf32,bf16")
    parser.add_argument("--work", type=Path, help="folder of the runs (default: a temporary one)")
    parser.add_argument("--reuse", action="store_true", help="read the runs already in --work, not run them again")
    parser.add_argument("--resolution", type=float, help="every search's relative resolution (default: the preset's)")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    machine = C.machine()
    platform = jax.devices()[0].platform
    work = args.work or Path(tempfile.mkdtemp(prefix="jaxmem-precision-"))
    precisions = args.precisions.split(",")
    distinct = {}  # the program a precision runs -> the first precision name that runs it
    for p in precisions:
        distinct.setdefault(program_of(p, platform), p)
    rows, same = [], []
    grids = args.grids.split(",")
    for grid in grids:
        runs, walls = {}, {}
        for p in precisions:
            if distinct[program_of(p, platform)] != p:
                algorithm = program_of(p, platform)
                same.append(f"{p} (on {platform} it is {algorithm}, the program of {distinct[algorithm]})")
                continue
            C.log(f"{grid} at {p} ...")
            runs[p] = work / f"{grid}-{p}"
            walls[p] = recorded_run(grid, p, runs[p], args.reuse, args.resolution)
        rows += rows_for(grid, runs, walls, platform)
    resolutions = ", ".join(
        f"{args.resolution or load(SWEEPS / f'{g}.toml', 'quick').search.resolution:.0%} ({g})" for g in grids
    )
    lines = [
        "# Matmul precision: the quick Fig 1 grids' capacities against 'highest'",
        "",
        f"`python benchmarks/precision_check.py {' '.join(sys.argv[1:])}`: each grid at each precision in a fresh "
        "process with a cold compile cache (with --reuse, the runs an earlier invocation left in --work are read). "
        "'loss paths' counts the compiled programs by cross-entropy path. 'max |Δ|' is the largest relative "
        "difference of a grid point's capacity median from the 'highest' run's (each search ends within a relative "
        f"resolution of {resolutions}: one step of it is a difference of that size); 'within 5 %' is issue 39's "
        "acceptance. 'load' is the share of the "
        "machine's cores other processes used during the run (a shared machine).",
        "",
        *C.md_table(["", ""], [[k, v] for k, v in machine.items()]),
        "",
        *C.md_table(
            [
                "grid",
                "precision",
                "computed here as",
                "wall s",
                "load",
                "loss paths",
                "capacity medians",
                "max |Δ| vs highest",
                "within 5 %",
                "slope verdict",
            ],
            rows,
        ),
        "",
    ]
    if same:
        lines += [f"Not run separately: {'; '.join(sorted(set(same)))}.", ""]
    args.out.write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
