"""The README's quickstart sweep timed as a user runs it: `jaxmem run fig1_linear --preset quick` into a fresh
folder, first with an empty compilation cache (cold), then again into another fresh folder with the cache the
first run filled (warm). Prints each run's wall time, its CPU time, the compiles' count and seconds as
`jaxmem status` reports them, and the share of the machine other processes used meanwhile (near 0: uncontended).

    python benchmarks/quickstart_time.py
"""

from __future__ import annotations

import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import cpu_busy, machine

COMMAND = ["jaxmem", "run", "fig1_linear", "--preset", "quick", "--quiet"]
COMPILES = re.compile(r"compiles: (\d+) \(([\d.]+) s\)")


def children_cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def timed_run(out: Path, cache: Path) -> dict:
    """One quickstart run into `out` with the compilation cache in `cache`."""
    env = {**os.environ, "JAXMEM_CACHE_DIR": str(cache)}
    start, busy, cpu = time.perf_counter(), cpu_busy(), children_cpu()
    subprocess.run([*COMMAND, "--out", str(out)], env=env, check=True, capture_output=True)
    wall, mine = time.perf_counter() - start, children_cpu() - cpu
    others = max(cpu_busy() - busy - mine, 0.0) / (wall * os.cpu_count())
    status = subprocess.run(["jaxmem", "status", str(out)], capture_output=True, text=True, check=True).stdout
    count, seconds = COMPILES.search(status).groups()
    return {"wall_s": wall, "cpu_s": mine, "compiles": int(count), "compile_s": float(seconds), "others": others}


def main() -> None:
    print(" | ".join(f"{k}: {v}" for k, v in machine().items()))
    with tempfile.TemporaryDirectory() as tmp:
        for label in ("cold", "warm"):
            r = timed_run(Path(tmp) / label, Path(tmp) / "cache")
            print(
                f"{label}: {r['wall_s']:.1f} s wall, {r['cpu_s']:.1f} s CPU, {r['compiles']} compiles "
                f"({r['compile_s']:.1f} s), other processes used {r['others']:.0%} of the machine",
                flush=True,
            )


if __name__ == "__main__":
    sys.exit(main())
