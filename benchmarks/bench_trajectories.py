"""Benchmark: a vmapped family of training trajectories vs the same trajectories one after another.

The family: the exact population model of Nichani et al. §5 (`sequential_learning`, model
"population", the Fig 5 task), plain GD at lr 0.1 for 8192 steps, metrics at every 64th step, over
16 init scales α ∈ [1e-7, 1e-3] × 4 seeds = 64 trajectories (the escape-time sweep's shape; the
population model is deterministic, so seeds repeat the work — what is measured is throughput).

(a) jaxmem `run_sweep` with `record_trajectory`: all 64 in one compiled program;
(b) one jitted program per trajectory (scan over evaluation blocks), compiled once, run 64 times;
(c) a per-step Python loop around a jitted GD step, with a jitted evaluation every 64 steps.
All three start from the engine's keys and record the same metrics; the final losses are compared.
Writes benchmarks/RESULTS_trajectories.md and prints it.

    python benchmarks/bench_trajectories.py [--steps N] [--out PATH]
"""

from __future__ import annotations

import argparse
import datetime
import platform
import sys
import tempfile
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import baselines as B  # noqa: E402
import common as C  # noqa: E402

from jaxmem.experiments.registry import get as get_experiment  # noqa: E402
from jaxmem.plan.runs import run_key  # noqa: E402
from jaxmem.spec.sweep import parse  # noqa: E402
from jaxmem.persistence.store import load_results  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "RESULTS_trajectories.md"
EXP = get_experiment("sequential_learning")


def family(steps: int):
    return parse(
        {
            "experiment": "sequential_learning",
            "seeds": 4,
            "fixed": {"model": "population", "S": 16, "R": 4, "D": 8, "noise": 20, "T": 32, "init": "constant"},
            "grid": {"init_scale": {"log_range": [1e-7, 1e-3], "num": 16}},
            "train": {"steps": steps, "eval_every": 64, "learning_rates": [0.1]},
            # A tiny model: per-op overhead, not arithmetic, bounds a step, so all 64 runs share one program
            # (the default slot count targets ~4 MFLOP per step on a CPU and would give 4 slots here).
            "engine": {"record_trajectory": True, "max_slots": 64},
        },
        name="trajectory_family",
    )


def run_engine(spec) -> tuple[dict, float, float, int]:
    """Final losses, wall (the report written at the end excluded), compile seconds, trajectory points."""
    with tempfile.TemporaryDirectory() as tmp:
        a = C.run_engine(spec, Path(tmp))
        points = len(load_results(tmp, "trajectories"))
    return dict(zip(a.runs["run_id"], a.runs["final_loss"])), a.total_s, a.compile_s, points


def make_scan_program(shape, steps: int, eval_every: int):
    """The whole trajectory as one program: scan over blocks of `eval_every` GD steps, metrics after each."""
    step = B._sgd_step(EXP, shape)

    def trajectory(seed, problem_index, dyn):
        key = run_key(seed, problem_index)
        params, problem = EXP.init(key, shape, dyn)
        opt_state = EXP.optimizer(dyn).init(params)

        def block(carry, b):
            params, opt_state = jax.lax.fori_loop(
                0, eval_every, lambda i, po: step(*po, problem, dyn, key, b * eval_every + i), carry
            )
            return (params, opt_state), EXP.evaluate(params, problem, shape, dyn)

        _, metrics = jax.lax.scan(block, (params, opt_state), jnp.arange(steps // eval_every))
        return metrics

    return trajectory


def run_sequential(runs, steps: int) -> tuple[dict, float, float]:
    shape, _, dyn0 = B.unpadded(EXP, runs[0])
    start = time.perf_counter()
    program = jax.jit(make_scan_program(shape, steps, 64)).lower(np.int32(0), np.int32(0), dyn0).compile()
    compile_s = time.perf_counter() - start
    finals = {}
    for run in runs:
        _, _, dyn = B.unpadded(EXP, run)
        metrics = program(np.int32(run.seed), np.int32(run.problem_index), dyn)
        finals[run.run_id] = float(metrics["loss"][-1])
    return finals, time.perf_counter() - start, compile_s


def run_python_loop(runs, steps: int) -> tuple[dict, float, float]:
    shape, _, dyn0 = B.unpadded(EXP, runs[0])
    init, step, evaluate = fns = B.make_step_functions(EXP, shape)
    start = time.perf_counter()
    compile_s = B.warm_up(fns, runs[0], dyn0)
    finals = {}
    for run in runs:
        _, _, dyn = B.unpadded(EXP, run)
        dyn = jax.device_put(dyn)
        params, opt_state, problem, key = init(np.int32(run.seed), np.int32(run.problem_index), dyn)
        for t in range(steps):
            params, opt_state = step(params, opt_state, problem, dyn, key, np.int32(t))
            if (t + 1) % 64 == 0:
                metrics = jax.device_get(evaluate(params, problem, dyn))
        finals[run.run_id] = float(metrics["loss"])
    return finals, time.perf_counter() - start, compile_s


def render(steps, n_runs, rows, agreement, points) -> str:
    (a_wall, a_compile), *_ = [(r[1], r[2]) for r in rows if r[0].startswith("(a)")]
    lines = [
        "# Benchmark: a vmapped family of trajectories vs the same trajectories one after another",
        "",
        f"Command: `python benchmarks/bench_trajectories.py --steps {steps}`; one invocation, "
        f"{datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC, {platform.processor() or platform.machine()}, "
        f"{jax.devices()[0].platform} x{jax.device_count()}, JAX {jax.__version__}.",
        "",
        f"Work: {n_runs} trajectories of the exact population model (Nichani et al. §5, Fig 5 task), GD lr 0.1, "
        f"{steps} steps, metrics every 64 steps ({points} trajectory points in the store for (a)); 16 init scales "
        "α ∈ [1e-7, 1e-3] × 4 seeds.",
        "",
        "| method | compile s | run s (excl. compile) | wall s | wall ÷ (a) | run ÷ (a) |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name, wall, compile_s in rows:
        lines.append(
            f"| {name} | {compile_s:.1f} | {wall - compile_s:.1f} | {wall:.1f} | {wall / a_wall:.2f} | "
            f"{(wall - compile_s) / max(a_wall - a_compile, 1e-9):.2f} |"
        )
    lines += [
        "",
        f"Agreement: largest |final loss (a) − (b)| = {agreement['b']:.2e}, (a) − (c) = {agreement['c']:.2e}.",
        "",
        "(a) includes the results store, the per-evaluation trajectory rows and checkpoints, not the report",
        "written at the end of `run_sweep`; (b) and (c) keep their metrics in memory only.",
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=8192)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    C.cold_compiles()
    spec = family(args.steps)
    runs = B.runs_from_spec(spec, EXP)
    a, a_wall, a_compile, points = run_engine(spec)
    b, b_wall, b_compile = run_sequential(runs, args.steps)
    c, c_wall, c_compile = run_python_loop(runs, args.steps)
    agreement = {k: max(abs(a[r] - other[r]) for r in a) for k, other in (("b", b), ("c", c))}
    rows = [
        ("(a) jaxmem, one vmapped program", a_wall, a_compile),
        ("(b) one jitted scan per trajectory, in sequence", b_wall, b_compile),
        ("(c) per-step Python loop, jitted step", c_wall, c_compile),
    ]
    text = render(args.steps, len(runs), rows, agreement, points)
    args.out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
