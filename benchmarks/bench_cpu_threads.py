"""XLA's CPU intra-op pool at one thread (jaxmem's default on jaxlib < 0.11) against XLA's default size:
does the batched-LAPACK deadlock happen (see jaxmem/cpu_runtime.py), and what does one thread cost?

Two measurements, each variant in fresh processes, alternating, in one invocation:
- the deadlock: a jitted program of two batched QRs (Haar frames at d = 64, as the chen_li24 teachers
  draw them) executed 200 times per process, `--tries` processes per variant, each killed after 20 s;
- shipped quick presets through `bench_ab.py`'s child (compile, run and CPU seconds, and a checksum of
  the runs' final metrics: equal checksums, equal results), each child killed after `--limit` seconds.

    python benchmarks/bench_cpu_threads.py [--tries 10] [--limit 240] [--out benchmarks/RESULTS_cpu_threads.md]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import common as C  # noqa: E402

VARIANTS = {"one thread (jaxmem's default)": "1", "XLA's default pool": "0"}
SWEEPS = ("sweeps/nichani24/fig1_linear.toml", "sweeps/nichani24/fig1_mlp.toml", "sweeps/chen_li24/e1_phase1_bias.toml")
QR_PROGRAM = """
import jaxmem, jax, jax.numpy as jnp
from jaxmem.experiments import draws
@jax.jit
def frames(key):
    g = draws.normal_matrices(key, [(2, 64, 64)] * 2)
    return jnp.einsum("mir,mjr->mij", draws.haar(g[0]) * (jnp.arange(64) < 8), draws.haar(g[1]))
for i in range(200):
    frames(jax.random.key(i)).block_until_ready()
"""


def env_with(threads: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("PJRT_NPROC", "NPROC")}
    return {**env, "JAXMEM_CPU_THREADS": threads}


def deadlocks(threads: str, tries: int) -> tuple[int, float]:
    """How many of `tries` processes running QR_PROGRAM hung (killed after 20 s), and the median seconds
    of those that finished."""
    hung, seconds = 0, []
    for _ in range(tries):
        start = time.perf_counter()
        try:
            subprocess.run([sys.executable, "-c", QR_PROGRAM], env=env_with(threads), timeout=20, check=True)
            seconds.append(time.perf_counter() - start)
        except subprocess.TimeoutExpired:
            hung += 1
    return hung, sorted(seconds)[len(seconds) // 2] if seconds else float("nan")


def sweep_child(threads: str, sweep: str, limit: float) -> dict | None:
    """bench_ab's child on a shipped sweep's quick preset; None if it ran past `limit` seconds."""
    cmd = [sys.executable, str(HERE / "bench_ab.py"), "--child", "--sweep", sweep, "--preset", "quick"]
    try:
        out = subprocess.run(cmd, env=env_with(threads), capture_output=True, text=True, timeout=limit, check=True)
    except subprocess.TimeoutExpired:
        return None
    return json.loads(out.stdout.strip().splitlines()[-1])


def sweep_row(sweep: str, pool: str, result: dict | None) -> list:
    if result is None:
        return [Path(sweep).stem, pool, "hung", "", "", "", ""]
    r = result
    timings = [f"{r['compile_s']:.2f}", f"{r['run_s']:.2f}", f"{r['cpu_s']:.1f}", f"{100 * r['others']:.0f}%"]
    return [Path(sweep).stem, pool, *timings, f"{r['checksum']:.6g}"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tries", type=int, default=10)
    parser.add_argument("--limit", type=float, default=240.0, help="seconds before a sweep child is killed")
    parser.add_argument("--out", default=str(HERE / "RESULTS_cpu_threads.md"))
    args = parser.parse_args()
    os.chdir(HERE.parent)
    machine = C.machine()
    hangs = []
    for name, threads in VARIANTS.items():
        C.log(f"deadlock check, {name} ...")
        hangs.append([name, *deadlocks(threads, args.tries)])
    rows = []
    for sweep in SWEEPS:
        for name, threads in VARIANTS.items():
            C.log(f"{sweep} quick, {name} ...")
            rows.append((sweep, name, sweep_child(threads, sweep, args.limit)))
    lines = [
        "# XLA's CPU intra-op pool: one thread against the default",
        "",
        f"`python benchmarks/bench_cpu_threads.py --tries {args.tries} --limit {args.limit:g}`, one invocation, "
        "every measurement in a fresh process. Why one thread: `jaxmem/cpu_runtime.py`.",
        "",
        *C.md_table(["", ""], [[k, v] for k, v in machine.items()]),
        "",
        f"## The deadlock: 200 executions of two batched QRs (d = 64) per process, {args.tries} processes",
        "",
        *C.md_table(
            ["pool", "processes hung (killed after 20 s)", "median s of the others"],
            [[n, f"{h} of {args.tries}", f"{s:.2f}"] for n, h, s in hangs],
        ),
        "",
        "## Shipped quick presets (cold compiles)",
        "",
        *C.md_table(
            ["sweep", "pool", "compile s", "run s", "CPU s", "others' CPU", "checksum of final metrics"],
            [sweep_row(s, n, r) for s, n, r in rows],
        ),
        "",
        f"'hung': the child was killed after {args.limit:g} s.",
    ]
    Path(args.out).write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
