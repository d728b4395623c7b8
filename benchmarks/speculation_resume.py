"""Determinism of a speculating sweep across stops (issue 38): the Fig 1 linear quick grid with the
accelerator's plan forced on a CPU (benchmarks/RESULTS_search_latency.md, "Measured in the driver") run
undisturbed, then run again into another folder, stopped at `--stops` random moments (SIGTERM and
kill -9 mixed, both at least once, seeded) and resumed after each, finally run to its end; `jaxmem
compare` must find the same runs, answers and timeline (exit 1 otherwise).

    python benchmarks/speculation_resume.py --work /tmp/acc/resume --seed 0
"""

from __future__ import annotations

import argparse
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

SETS = (  # the rule off, as when RESULTS_search_latency.md's runs were made (on in the quick preset since 30 Nov)
    "train.give_up=0",
    "train.give_up_pace=1.0",
    "seeds=[0]",
    "train.learning_rates=[10.0]",
    'engine.pad_to_max=["d"]',
    "engine.search_pad_floor=1.0",
    "engine.max_slots=32",
    "engine.segment_steps=256",
    "engine.speculation=2",
)


def command(out: Path) -> list[str]:
    """The sweep's command line, into `out`."""
    return [
        "jaxmem",
        "run",
        "fig1_linear",
        "--preset",
        "quick",
        *(a for s in SETS for a in ("--set", s)),
        "--out",
        str(out),
    ]


def clock_of(out: Path) -> int:
    """The logical step a folder's sweep had reached (its meta 'clock'; 0 before the first segment)."""
    path = out / "results.sqlite"
    if not path.exists():
        return 0
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        row = db.execute("SELECT value FROM meta WHERE key = 'clock'").fetchone()
    finally:
        db.close()
    return int(row[0]) if row else 0


def session(out: Path, log: Path, after: float | None = None, signum: int | None = None) -> tuple[int, float]:
    """Run (or resume) the sweep into `out`; with `after`, send `signum` that many seconds after its
    start (unless it ended before). Its exit status and wall seconds."""
    start = time.perf_counter()
    with log.open("w") as sink:
        process = subprocess.Popen(command(out), stdout=sink, stderr=subprocess.STDOUT)
        if after is not None:
            try:
                process.wait(timeout=after)
            except subprocess.TimeoutExpired:
                process.send_signal(signum)
        rc = process.wait()
    return rc, time.perf_counter() - start


def stops(seed: int, count: int, window: tuple[float, float]) -> list[tuple[int, float]]:
    """`count` (signal, seconds after the session's start) pairs: SIGTERM and SIGKILL alternating from
    a seeded shuffle (both present from 2 stops), each moment uniform in `window`."""
    rng = random.Random(seed)
    kinds = [(signal.SIGTERM, signal.SIGKILL)[i % 2] for i in range(count)]
    rng.shuffle(kinds)
    return [(kind, rng.uniform(*window)) for kind in kinds]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", type=Path, default=Path("/tmp/acc/resume"))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--stops", type=int, default=5)
    parser.add_argument("--window", type=float, nargs=2, default=(8.0, 25.0), help="seconds after a session's start")
    parser.add_argument("--whole", type=Path, help="an undisturbed run's folder to compare with (default: run one)")
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    whole, stopped = args.whole or args.work / "whole", args.work / "stopped"
    if args.whole is None:
        shutil.rmtree(whole, ignore_errors=True)
        rc, wall = session(whole, args.work / "whole.log")
        print(f"undisturbed: rc {rc}, {wall:.1f} s wall, clock {clock_of(whole):,}", flush=True)
    shutil.rmtree(stopped, ignore_errors=True)
    for i, (signum, after) in enumerate(stops(args.seed, args.stops, tuple(args.window)), 1):
        rc, wall = session(stopped, args.work / f"stop{i}.log", after, signum)
        name = signal.Signals(signum).name
        print(
            f"session {i}: {name} at {after:.1f} s: rc {rc}, {wall:.1f} s wall, clock {clock_of(stopped):,}", flush=True
        )
    rc, wall = session(stopped, args.work / "last.log")
    print(f"last session: rc {rc}, {wall:.1f} s wall, clock {clock_of(stopped):,}", flush=True)
    compared = subprocess.run(["jaxmem", "compare", str(whole), str(stopped)], capture_output=True, text=True)
    print(compared.stdout + compared.stderr, flush=True)
    return 0 if compared.returncode == 0 and "results agree" in compared.stdout else 1


if __name__ == "__main__":
    sys.exit(main())
