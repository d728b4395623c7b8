"""Validation of law-seeded brackets (`[search] law_axis`) against the spec's full brackets.

Each sweep's `quick` preset runs twice in `verified` mode, in child processes pinned to one core one
after the other: with the spec's brackets, and with `law_axis` set (a seed's answers at the smaller
values of that axis, fitted by a power law, seed the bracket of the next search). The table compares
every search's answer, the runs and training steps each way, and the wall time. A seeded search
probes other values, so its answer may differ by up to the search's resolution where success is not
monotone in the searched value; a larger difference would be a wrong bracket.

`python benchmarks/validate_law_brackets.py` writes `RESULTS_law_brackets.md`; `--core K` picks the core.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SWEEPS = {  # sweep -> the grid axis the law runs along, and the quick preset's grid where it has too few
    # values on that axis (a law needs two answers before it seeds a third search)
    "sweeps/nichani24/fig1_linear.toml": ("d", None),
    "sweeps/nichani24/fig1_mlp.toml": ("d", {"d": [6, 8, 11, 16], "m_over_d": [2]}),
}


def child(sweep: str, axis: str) -> None:
    """Run the sweep's quick preset (with `axis` seeding brackets, unless empty); print its searches."""
    import jaxmem
    from jaxmem.persistence.store import load_results
    from jaxmem.spec.sweep import parse, read_toml

    raw = read_toml(ROOT / sweep)
    quick = raw.setdefault("presets", {}).setdefault("quick", {})
    quick["grid"] = SWEEPS[sweep][1] or quick.get("grid", raw.get("grid"))
    if axis:
        search = {**raw.get("search", {}), **quick.get("search", {}), "law_axis": axis}
        quick["search"] = search
    spec = parse(raw, name=Path(sweep).stem, preset="quick")
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        jaxmem.run(spec, Path(tmp) / "out")
        wall = time.perf_counter() - start
        searches = load_results(Path(tmp) / "out", "searches")
        runs = load_results(Path(tmp) / "out")
    answers = {row.unit: float(row.capacity) for row in searches.itertuples()}
    out = {"answers": answers, "runs": len(runs), "steps": int(runs["steps_run"].sum()), "wall_s": wall}
    print("RESULT " + json.dumps(out))


def measure(sweep: str, axis: str, core: int) -> dict:
    env = {**os.environ, "JAXMEM_COMPILE_CACHE": "0", "JAX_PLATFORMS": "cpu"}
    cmd = ["taskset", "-c", str(core), sys.executable, __file__, "--child", sweep, "--axis", axis]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"{sweep} (law axis {axis or 'off'}) failed:\n{proc.stderr[-3000:]}")
    return json.loads(next(x for x in proc.stdout.splitlines() if x.startswith("RESULT "))[len("RESULT ") :])


def compare(full: dict, seeded: dict, resolution: float) -> dict:
    """Per sweep: searches with the same answer, within the resolution, beyond it; the largest gap."""
    gaps = []
    for unit, answer in full["answers"].items():
        other = seeded["answers"].get(unit, float("nan"))
        gaps.append(abs(other - answer) / answer if answer == answer and answer else float("nan"))
    same = sum(g == 0 for g in gaps)
    within = sum(0 < g <= resolution for g in gaps)
    return {"same": same, "within": within, "beyond": len(gaps) - same - within, "largest": max(gaps, default=0.0)}


def markdown(rows: list[list], machine: dict) -> str:
    from common import md_table

    return "\n".join(
        [
            "# Law-seeded brackets: answers against the spec's full brackets",
            "",
            "Written by `python benchmarks/validate_law_brackets.py`: each sweep's quick preset in `verified`",
            "mode, once with the spec's brackets and once with `[search] law_axis` (both in child processes",
            "pinned to one core, cold compile cache). *same* / *within* / *beyond* = searches whose answer is",
            "identical / differs by at most the search's resolution / differs by more.",
            "",
            *md_table(["", ""], [[k, v] for k, v in machine.items()]),
            *md_table(
                [
                    "sweep",
                    "law axis",
                    "searches",
                    "same",
                    "within",
                    "beyond",
                    "largest gap",
                    "runs full → seeded",
                    "steps full → seeded",
                    "wall s full → seeded",
                ],
                rows,
            ),
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--child")
    parser.add_argument("--axis", default="")
    parser.add_argument("--core", type=int, default=0)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.axis)
        return
    sys.path.insert(0, str(HERE))
    from common import machine

    from jaxmem.spec.sweep import load

    rows = []
    for sweep, (axis, grid) in SWEEPS.items():
        resolution = load(ROOT / sweep, "quick").search.resolution
        full, seeded = measure(sweep, "", args.core), measure(sweep, axis, args.core)
        c = compare(full, seeded, resolution)
        rows.append(
            [
                f"`{sweep}`" + (f" (grid {json.dumps(grid)})" if grid else ""),
                axis,
                len(full["answers"]),
                c["same"],
                c["within"],
                c["beyond"],
                f"{c['largest']:.1%}",
                f"{full['runs']} → {seeded['runs']}",
                f"{full['steps']:,} → {seeded['steps']:,}",
                f"{full['wall_s']:.0f} → {seeded['wall_s']:.0f}",
            ]
        )
        print(rows[-1], flush=True)
    info = {**machine(), "pinned to core": args.core}
    (HERE / "RESULTS_law_brackets.md").write_text(markdown(rows, info) + "\n")


if __name__ == "__main__":
    main()
