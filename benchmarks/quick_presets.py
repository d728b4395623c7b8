"""Every quick preset's wall time, compiles and compile seconds: as shipped (sweeps/<family>/data/<sweep>-quick,
the run that made the shipped results) and, with --results, as a rerun's stores give them. Writes a Markdown
table with the totals the compile-cost acceptance reads: presets over 3 minutes, and the compiles' share of the
summed wall time.

    python benchmarks/quick_presets.py [--results DIR] [--note TEXT] [--out benchmarks/RESULTS_quick_presets.md]

DIR holds one `jaxmem run ... --preset quick --out DIR/<sweep>-quick` folder per preset (those present are
read). A compile's seconds are its wall time in the driver's compile thread, which overlaps training.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
LIMIT_S = 180.0  # a quick preset's wall-time limit (issue 39)
COMPILE_SHARE = 0.40  # compiling's limit as a share of the quick presets' summed wall time


def shipped() -> pd.DataFrame:
    """family, sweep, wall_s, compiles, compile_s of every shipped quick preset."""
    rows = []
    for manifest in sorted(ROOT.glob("sweeps/*/data/*-quick/manifest.json")):
        compiles = pd.read_parquet(manifest.parent / "compiles.parquet")
        rows.append(
            {
                "family": manifest.parents[2].name,
                "sweep": manifest.parent.name.removesuffix("-quick"),
                "wall_s": json.loads(manifest.read_text())["elapsed_s"],
                "compiles": len(compiles),
                "compile_s": float(compiles["seconds"].sum()),
            }
        )
    return pd.DataFrame(rows)


def rerun(results: Path) -> pd.DataFrame:
    """sweep, wall_s, compiles, compile_s of every finished quick store in `results` (its report written)."""
    from jaxmem import load_results

    rows = []
    for store in sorted(results.glob("*-quick/results.sqlite")):
        if not (store.parent / "report.md").exists():
            continue
        meta = load_results(store.parent, "meta").set_index("key")["value"]
        compiles = load_results(store.parent, "compiles")
        rows.append(
            {
                "sweep": store.parent.name.removesuffix("-quick"),
                "wall_s": float(meta["elapsed_s"]),
                "compiles": len(compiles),
                "compile_s": float(compiles["seconds"].sum()),
            }
        )
    return pd.DataFrame(rows, columns=["sweep", "wall_s", "compiles", "compile_s"])


def totals(frame: pd.DataFrame, prefix: str) -> str:
    """One line: presets, summed wall, summed compile seconds and their share, presets over the limit."""
    wall, compile_s = frame[f"{prefix}wall_s"].sum(), frame[f"{prefix}compile_s"].sum()
    over = int((frame[f"{prefix}wall_s"] > LIMIT_S).sum())
    return (
        f"{len(frame)} presets, {wall / 60:,.1f} min of wall time, {compile_s / 60:,.1f} min compiling "
        f"({compile_s / wall:.0%} of it; limit {COMPILE_SHARE:.0%}); {over} over {LIMIT_S:.0f} s"
    )


def cells(wall_s: float, compiles: float, compile_s: float) -> str:
    """wall s | compiles | compile s | compile share, or dashes for a preset not run."""
    if pd.isna(wall_s):
        return " — | — | — | — |"
    return f" {wall_s:,.0f} | {compiles:.0f} | {compile_s:,.0f} | {compile_s / wall_s:.0%} |"


def table(frame: pd.DataFrame, with_rerun: bool) -> list[str]:
    """The Markdown table, slowest shipped preset first."""
    head = "| family | sweep | wall s | compiles | compile s | compile share |"
    rule = "| --- | --- | ---: | ---: | ---: | ---: |"
    if with_rerun:
        head += " rerun wall s | rerun compiles | rerun compile s | rerun compile share |"
        rule += " ---: | ---: | ---: | ---: |"
    lines = [head, rule]
    for r in frame.sort_values("wall_s", ascending=False).itertuples():
        line = f"| {r.family} | {r.sweep} |" + cells(r.wall_s, r.compiles, r.compile_s)
        if with_rerun:
            line += cells(r.rerun_wall_s, r.rerun_compiles, r.rerun_compile_s)
        lines.append(line)
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--results", type=Path, help="a folder of a rerun's quick stores, <sweep>-quick each")
    parser.add_argument("--note", default="", help="how the rerun ran (machine, load, commit), printed above it")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "RESULTS_quick_presets.md")
    args = parser.parse_args()
    frame = shipped()
    lines = [
        "# The quick presets' wall time and compiles",
        "",
        "Written by `python benchmarks/quick_presets.py"
        + (f" --results {args.results}`" if args.results else "`")
        + ". *wall s*: the sweep's elapsed time; *compile s*: its programs' compile seconds summed (a compile "
        "overlaps training in the driver's compile thread). The shipped columns are the runs that made the shipped "
        "results, on this 2-core CPU, many of them beside other jobs.",
        "",
        f"- As shipped: {totals(frame, '')}.",
    ]
    if args.results:
        again = rerun(args.results).add_prefix("rerun_").rename(columns={"rerun_sweep": "sweep"})
        frame = frame.merge(again, on="sweep", how="left")
        ran = frame.dropna(subset=["rerun_wall_s"])
        lines.append(f"- Rerun ({args.note or args.results}): {totals(ran, 'rerun_')}.")
    lines += ["", *table(frame, bool(args.results))]
    args.out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines[:8]))


if __name__ == "__main__":
    main()
