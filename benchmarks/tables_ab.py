"""Results tables of every shipped sweep's quick preset, captured under one jaxmem tree and compared with
another: the check that an engine remodel left every result bit-for-bit alone.

`capture` runs each `sweeps/*/*.toml` that has a `quick` preset with the jaxmem importable here (set
PYTHONPATH to a `git archive` of an older revision to capture that one) and writes, per sweep, the
`runs`, `searches` and `trajectories` tables as canonical CSV (rows sorted, floats as `repr`, so equal
files mean bitwise-equal numbers). Columns that record when and where a run happened (`wall_time_s`,
`finished_at`, `device`) and the bucket label (an engine identifier, not a result) are left out.
`compare` diffs two captures and prints a Markdown table.

    python benchmarks/tables_ab.py capture --out /tmp/before [--only fig1_linear,fig3_main]
    (to capture a revision: `git archive REV | tar -x -C DIR`, then run DIR/benchmarks/tables_ab.py)
    python benchmarks/tables_ab.py compare /tmp/before /tmp/after
"""

from __future__ import annotations

import argparse
import hashlib
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TABLES = ("runs", "searches", "trajectories")
NOT_RESULTS = ("wall_time_s", "finished_at", "device", "bucket")


def shipped_quick_sweeps() -> list[Path]:
    """Every shipped sweep file with a quick preset (its own or one it extends)."""
    return [
        p
        for p in sorted(ROOT.glob("sweeps/*/*.toml"))
        if "presets.quick" in p.read_text() or "extends" in p.read_text()
    ]


def canonical_csv(frame) -> str:
    """The table as text that is equal exactly when the values are bitwise equal."""
    frame = frame.drop(columns=[c for c in NOT_RESULTS if c in frame.columns])
    frame = frame[sorted(frame.columns)]
    rows = sorted(",".join(repr(v) for v in row) for row in frame.itertuples(index=False))
    return ",".join(frame.columns) + "\n" + "\n".join(rows) + "\n"


def capture(out: Path, only: set[str]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for sweep in shipped_quick_sweeps():
        if only and sweep.stem not in only:
            continue
        run_dir = out / "runs" / sweep.stem
        started = time.perf_counter()
        command = [sys.executable, "-m", "jaxmem.cli", "run", str(sweep), "--preset", "quick", "--out", str(run_dir)]
        done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT)
        seconds = time.perf_counter() - started
        print(f"{sweep.stem}: exit {done.returncode} in {seconds:.0f} s", flush=True)
        if not (run_dir / "results.sqlite").exists():
            (out / f"{sweep.stem}.error").write_text(done.stdout + done.stderr)
            continue
        dump_tables(run_dir, out / sweep.stem)


def dump_tables(run_dir: Path, target: Path) -> None:
    from jaxmem import load_results

    target.mkdir(parents=True, exist_ok=True)
    for table in TABLES:
        (target / f"{table}.csv").write_text(canonical_csv(load_results(run_dir, table, expand=False)))


def compare(before: Path, after: Path) -> int:
    print("| sweep | " + " | ".join(TABLES) + " |")
    print("| --- |" + " --- |" * len(TABLES))
    differing = 0
    for folder in sorted(p for p in before.iterdir() if p.is_dir() and p.name != "runs"):
        cells = []
        for table in TABLES:
            a, b = folder / f"{table}.csv", after / folder.name / f"{table}.csv"
            if not b.exists():
                cells.append("missing")
                differing += 1
                continue
            rows = sum(1 for line in a.read_text().splitlines()[1:] if line)
            same = a.read_bytes() == b.read_bytes()
            differing += not same
            digest = hashlib.sha256(a.read_bytes()).hexdigest()[:10]
            cells.append(f"{rows} rows, identical ({digest})" if same else f"{rows} rows, **differs**")
        print(f"| {folder.name} | " + " | ".join(cells) + " |")
    return 1 if differing else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    cap = sub.add_parser("capture")
    cap.add_argument("--out", type=Path, required=True)
    cap.add_argument("--only", default="", help="comma-separated sweep names")
    cmp_ = sub.add_parser("compare")
    cmp_.add_argument("before", type=Path)
    cmp_.add_argument("after", type=Path)
    args = parser.parse_args()
    if args.command == "capture":
        capture(args.out, {s for s in args.only.split(",") if s})
        return 0
    return compare(args.before, args.after)


if __name__ == "__main__":
    sys.exit(main())
