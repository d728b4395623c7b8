"""Time to solution of every shipped `paper` preset: the dry-run's estimate (FLOPs, compiles, time) for
one H100, one H200 (`--plan-for`) and this machine, and the time measured where a preset was run to the
end on one device call (`--measured FILE`: JSON {sweep: {"device": ..., "seconds": ...}}; `--stores DIR`: the
wall and compile seconds in the report.md of each DIR/<sweep>-paper that ran to the end on this machine).
Writes RESULTS_paper_scale.md.

    python benchmarks/paper_scale.py [--sweeps fig1_linear,fig1_mlp] [--measured measured.json] [--stores DIR]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import math
import re
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import common as C  # noqa: E402

from jaxmem.cli.views import dry_run  # noqa: E402
from jaxmem.plan.target import named  # noqa: E402
from jaxmem.spec.sweep import load, read_toml  # noqa: E402

TARGETS = {"H100": "h100", "H200": "h200", "this machine": None}
WHOLE = re.compile(r"whole sweep.*?at most (\d+) runs, (\S+) FLOPs, (\S+) compiles[^:]*: (.+)$", re.M)
FIRST = re.compile(r"first round: (\d+) runs, (\S+) FLOPs, (\d+) compiles: (.+)$", re.M)
WALL = re.compile(r"Total wall time: ([\d.]+) s")
COMPILE = re.compile(r"compile_time_s: ([\d.]+)")
PARTIAL = re.compile(r"^\**partial: ", re.M)


def paper_presets() -> dict[str, Path]:
    """Shipped sweeps with a `paper` preset, by name."""
    files = sorted((HERE.parent / "sweeps").rglob("*.toml"))
    return {p.stem: p for p in files if "paper" in read_toml(p).get("presets", {})}


def estimated(path: Path, target: str | None) -> dict:
    """The dry-run's bound over the whole sweep (or its first round, for a grid) on `target`."""
    with contextlib.redirect_stderr(io.StringIO()):
        text = dry_run(load(path, "paper"), target=named(target) if target else None)
    match = WHOLE.search(text) or FIRST.search(text)
    if match is None:
        return {"note": text.strip().splitlines()[-1][:120]}
    runs, flops, compiles, duration = match.groups()
    over = "OVER THE MEMORY BUDGET" in text
    return {"runs": int(runs), "flops": float(flops), "compiles": compiles, "time": duration, "over": over}


def measured_in_stores(folder: Path) -> dict:
    """{sweep: {"device", "seconds"}} from the report.md of every finished `<sweep>-paper` store in `folder`
    (a partial report, whose first paragraph says so, is left out)."""
    found = {}
    for report in sorted(folder.glob("*-paper/report.md")):
        text = report.read_text()
        wall, compiled = WALL.search(text), COMPILE.search(text)
        if wall and not PARTIAL.search(text):
            compiles = f", {float(compiled.group(1)):.0f} s of it compiling" if compiled else ""
            found[report.parent.name.removesuffix("-paper")] = {
                "seconds": float(wall.group(1)),
                "device": f"this machine{compiles}",
            }
    return found


def rate_sources() -> str:
    """Where each column's throughput comes from: measured (jaxmem/plan/throughput.json) or stated."""
    import jax

    from jaxmem.engine.device_memory import target_of
    from jaxmem.plan import throughput

    targets = {label: named(kind) if kind else target_of(jax.devices()) for label, kind in TARGETS.items()}
    return "; ".join(f"{label}: {throughput.rate(t, '', math.nan).source}" for label, t in targets.items())


def cell(estimate: dict) -> str:
    if "time" not in estimate:
        return estimate.get("note", "—")
    return estimate["time"] + (" (a bucket over memory)" if estimate["over"] else "")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sweeps", default="")
    parser.add_argument("--measured", default="")
    parser.add_argument("--stores", type=Path, help="folder of <sweep>-paper stores run to the end here")
    parser.add_argument("--out", default=str(HERE / "RESULTS_paper_scale.md"))
    args = parser.parse_args()
    presets = paper_presets()
    chosen = args.sweeps.split(",") if args.sweeps else list(presets)
    measured = json.loads(Path(args.measured).read_text()) if args.measured else {}
    measured |= measured_in_stores(args.stores) if args.stores else {}
    start, rows = time.perf_counter(), []
    for name in chosen:
        C.log(f"{name} ...")
        estimates = {label: estimated(presets[name], kind) for label, kind in TARGETS.items()}
        first = next((e for e in estimates.values() if "flops" in e), {})
        done = measured.get(name)
        rows.append(
            [
                f"`{presets[name].relative_to(HERE.parent)}`",
                f"{first.get('runs', '—')}",
                f"{first['flops']:.2e}" if "flops" in first else "—",
                *(cell(e) for e in estimates.values()),
                f"{done['seconds']:.0f} s on {done['device']}" if done else "not run here",
            ]
        )
    lines = [
        "# Time to solution of the paper presets",
        "",
        f"`python benchmarks/paper_scale.py`, {time.strftime('%Y-%m-%d %H:%M %Z')}, "
        f"{time.perf_counter() - start:.0f} s. "
        "Each estimate is `jaxmem run SWEEP --preset paper --dry-run [--plan-for KIND]`: at most this many runs and "
        "FLOPs (padded sizes, every run to its step budget, no search expanding its bracket), timed by the planner's "
        "model: each program step at the device's measured throughput (jaxmem/plan/throughput.json) or, where it "
        "was never measured, its stated one (jaxmem/plan/costs.py), and at least its step floor, plus the compiles. "
        "Measured: a run to the end on one device call (on this machine: "
        "the wall time its report states, taken while other jobs shared the CPU, so an upper bound). "
        f"Throughput: {rate_sources()}.",
        "",
        *C.md_table(["preset", "runs:", "FLOPs:", *(f"{k}:" for k in TARGETS), "measured"], rows),
    ]
    Path(args.out).write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
