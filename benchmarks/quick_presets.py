"""Every quick preset's wall time, compiles and compile seconds: as shipped (sweeps/<family>/data/<sweep>-quick,
the run that made the shipped results) and, with --results, as reruns' stores give them. Writes a Markdown
table with the totals the compile-cost acceptance reads: presets over 3 minutes, and the compiles' share of the
summed wall time.

    python benchmarks/quick_presets.py [--results [LABEL=]DIR [--note TEXT]] ... [--idle LABEL]
                                       [--out benchmarks/RESULTS_quick_presets.md]

DIR holds one `jaxmem run ... --preset quick --out DIR/<sweep>-quick` folder per preset (those present are
read); each --results adds its columns, headed by LABEL (default "rerun"), with the --note that follows it.
--idle names the rerun measured on an otherwise idle machine: the last column then says, per preset, whether
it runs in 3 minutes, by that measurement or, where a preset was not rerun idle, by a loaded rerun at most
3 minutes long (a bound: load only slows a run), else "not measured idle". A compile's seconds are its wall
time in the driver's compile thread, which overlaps training.
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
    if frame.empty:
        return "no finished preset"
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


def within_limit(row: dict, labels: list[str], idle: str | None) -> str:
    """Whether a preset runs in LIMIT_S when idle: its idle rerun's wall, else a loaded rerun's within it (a
    bound), else not known."""
    if idle and not pd.isna(row[f"{idle}_wall_s"]):
        seconds = row[f"{idle}_wall_s"]
        return f"{'yes' if seconds <= LIMIT_S else 'no'} ({idle})"
    loaded = [(row[f"{label}_wall_s"], label) for label in labels if label != idle]
    loaded = [(seconds, label) for seconds, label in loaded if not pd.isna(seconds)]
    if loaded and min(loaded)[0] <= LIMIT_S:
        return f"yes (bound: {min(loaded)[1]})"
    return "not measured idle"


def table(frame: pd.DataFrame, labels: list[str], idle: str | None) -> list[str]:
    """The Markdown table, slowest shipped preset first (with `idle`, the `within` column of `within_limit`)."""
    head = "| family | sweep | wall s | compiles | compile s | compile share |"
    rule = "| --- | --- | ---: | ---: | ---: | ---: |"
    for label in labels:
        head += f" {label} wall s | {label} compiles | {label} compile s | {label} compile share |"
        rule += " ---: | ---: | ---: | ---: |"
    if idle:
        head += f" idle ≤ {LIMIT_S:.0f} s |"
        rule += " --- |"
    lines = [head, rule]
    for row in frame.sort_values("wall_s", ascending=False).to_dict("records"):
        line = f"| {row['family']} | {row['sweep']} |" + cells(row["wall_s"], row["compiles"], row["compile_s"])
        for label in labels:
            line += cells(*(row[f"{label}_{k}"] for k in ("wall_s", "compiles", "compile_s")))
        if idle:
            line += f" {row['within']} |"
        lines.append(line)
    return lines


def labelled(text: str) -> tuple[str, Path]:
    """(label, folder) of a --results value, LABEL=DIR or DIR (label "rerun")."""
    label, _, folder = text.rpartition("=")
    return label or "rerun", Path(folder)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--results", action="append", default=[], help="[LABEL=]DIR: a rerun's quick stores")
    parser.add_argument("--note", action="append", default=[], help="how the rerun before it ran (machine, load)")
    parser.add_argument("--idle", help="the LABEL of the rerun measured on an otherwise idle machine")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "RESULTS_quick_presets.md")
    args = parser.parse_args()
    reruns = [labelled(text) for text in args.results]
    labels = [label for label, _ in reruns]
    if args.idle and args.idle not in labels:
        parser.error(f"--idle {args.idle}: no --results is labelled so (labels: {', '.join(labels) or 'none'})")
    frame = shipped()
    command = " ".join(["python benchmarks/quick_presets.py", *(f"--results {t}" for t in args.results)])
    lines = [
        "# The quick presets' wall time and compiles",
        "",
        f"Written by `{command}{f' --idle {args.idle}' if args.idle else ''}`. *wall s*: the sweep's elapsed "
        "time; *compile s*: its programs' compile seconds summed (a compile overlaps training in the driver's "
        "compile thread). The shipped columns are the runs that made the shipped results, on this 2-core CPU, many "
        "of them beside other jobs.",
        "",
        f"- As shipped: {totals(frame, '')}.",
    ]
    for index, (label, folder) in enumerate(reruns):
        again = rerun(folder).add_prefix(f"{label}_").rename(columns={f"{label}_sweep": "sweep"})
        frame = frame.merge(again, on="sweep", how="left")
        ran = frame.dropna(subset=[f"{label}_wall_s"])
        note = args.note[index] if index < len(args.note) else str(folder)
        lines.append(f"- {label} ({note}): {totals(ran, f'{label}_')}.")
    if args.idle:
        frame["within"] = [within_limit(row, labels, args.idle) for row in frame.to_dict("records")]
        known = frame["within"].str.startswith("yes").sum(), frame["within"].str.startswith("no").sum()
        lines.append(
            f"- Within {LIMIT_S:.0f} s when idle: {known[0]} presets (by an idle run, or bounded by a loaded one), "
            f"{known[1]} over, {len(frame) - sum(known)} not measured idle."
        )
    lines += ["", *table(frame, labels, args.idle)]
    args.out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines[:8]))


if __name__ == "__main__":
    main()
