"""Baselines for `bench_assoc_memory.py`: the runs of a jaxmem sweep, trained without the engine.

Both baselines train the UNPADDED model of each run (shape = `exp.shape(config, identity)`), from
the engine's own key `run_key(seed, problem_index)`, with the experiment's own optimizer and the
engine's stopping rule: evaluate at step 0 and after every `eval_every` steps; stop once the best
metric reaches `stop_threshold` or `steps` steps ran. No padding, no vmap, no divergence guard.
"""

from __future__ import annotations

import dataclasses
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax

from jaxmem.experiments.base import Experiment
from jaxmem.plan import make_run, point_id
from jaxmem.program import Settings, batch_key, dyn_arrays, run_key


@dataclasses.dataclass(frozen=True)
class RunSpec:
    """One run to reproduce: its complete config, seed, learning rate and problem index."""

    run_id: str
    config: dict
    seed: int
    lr: float
    problem_index: int


@dataclasses.dataclass
class Outcome:
    run_id: str
    best: float
    steps: int
    final: float


@dataclasses.dataclass
class Timing:
    """Wall clock of a whole baseline, the part spent compiling, and how many programs it compiled."""

    total_s: float = 0.0
    compile_s: float = 0.0
    compiles: int = 0

    @property
    def run_s(self) -> float:
        return self.total_s - self.compile_s


def runs_from_table(spec, exp: Experiment, runs) -> list[RunSpec]:
    """The runs a sweep executed (its `runs` table), with problem indices recomputed by `make_run`.

    The point is looked up by the stored point id, so the recomputed run id must equal the stored one."""
    points = {point_id(p): p for p in spec.points}
    out = []
    for row in runs.sort_values("run_id").itertuples():
        point = points[row.point]
        run = make_run(point, int(row.seed), float(row.lr), spec.search.variable, int(row.value), 0)
        assert run.run_id == row.run_id, f"run id mismatch for {row.run_id}"
        out.append(RunSpec(run.run_id, exp.complete(run.config), run.seed, run.lr, run.problem_index))
    return out


def unpadded(exp: Experiment, run: RunSpec) -> tuple[dict, tuple, dict]:
    """(shape, hashable shape key, dyn) of the run's unpadded model; dyn dtypes as in the engine."""
    shape = exp.shape(run.config, lambda n, *_: n)
    dyn = {k: v[0] for k, v in dyn_arrays([exp.dynamic(run.config)], [run.lr]).items()}
    return shape, tuple(sorted(shape.items())), dyn


def _metric(exp, params, problem, shape, dyn, metric):
    return jnp.asarray(exp.evaluate(params, problem, shape, dyn)[metric], jnp.float32)


def _sgd_step(exp, shape):
    def step(params, opt_state, problem, dyn, key, t):
        grads = jax.grad(exp.loss)(params, problem, shape, dyn, batch_key(key, t))
        updates, opt_state = exp.optimizer(dyn).update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state

    return step


# -- (b) one jitted while_loop program per run ---------------------------------------------------------
def make_while_program(exp: Experiment, shape: dict, settings: Settings):
    """train(seed, problem_index, dyn) -> (best, steps, final metric): the whole run in one program,
    `while (not stopped) { fori_loop(eval_every steps); evaluate }`."""
    step = _sgd_step(exp, shape)

    def train(seed, problem_index, dyn):
        key = run_key(seed, problem_index)
        params, problem = exp.init(key, shape, dyn)
        opt_state = exp.optimizer(dyn).init(params)
        first = _metric(exp, params, problem, shape, dyn, settings.metric)

        def keep_going(carry):
            _, _, steps, best, _ = carry
            return (best < settings.stop_threshold) & (steps < settings.steps)

        def block(carry):
            params, opt_state, steps, best, _ = carry
            params, opt_state = jax.lax.fori_loop(
                0,
                settings.eval_every,
                lambda i, po: step(*po, problem, dyn, key, steps + i),
                (params, opt_state),
            )
            value = _metric(exp, params, problem, shape, dyn, settings.metric)
            return params, opt_state, steps + settings.eval_every, jnp.maximum(best, value), value

        carry = (params, opt_state, jnp.int32(0), first, first)
        _, _, steps, best, final = jax.lax.while_loop(keep_going, block, carry)
        return best, steps, final

    return train


def run_while_loops(exp: Experiment, runs: list[RunSpec], settings: Settings) -> tuple[list[Outcome], Timing]:
    """Baseline (b): AOT-compile one program per distinct unpadded shape (timed apart), run each run."""
    programs, timing, outcomes = {}, Timing(), []
    start = time.perf_counter()
    for run in runs:
        shape, key, dyn = unpadded(exp, run)
        args = (np.int32(run.seed), np.int32(run.problem_index), dyn)
        if key not in programs:
            t = time.perf_counter()
            programs[key] = jax.jit(make_while_program(exp, shape, settings)).lower(*args).compile()
            timing.compile_s += time.perf_counter() - t
            timing.compiles += 1
        best, steps, final = jax.device_get(programs[key](*args))
        outcomes.append(Outcome(run.run_id, float(best), int(steps), float(final)))
    timing.total_s = time.perf_counter() - start
    return outcomes, timing


# -- (c) per-step Python loop around a jitted train step -----------------------------------------------
def make_step_functions(exp: Experiment, shape: dict, settings: Settings):
    """Jitted (init, step, metric) functions of one unpadded shape, research-code style."""

    def init(seed, problem_index, dyn):
        key = run_key(seed, problem_index)
        params, problem = exp.init(key, shape, dyn)
        return params, exp.optimizer(dyn).init(params), problem, key

    return (
        jax.jit(init),
        jax.jit(_sgd_step(exp, shape), donate_argnums=(0, 1)),
        jax.jit(lambda params, problem, dyn: _metric(exp, params, problem, shape, dyn, settings.metric)),
    )


def python_loop_run(fns, run: RunSpec, dyn: dict, settings: Settings) -> Outcome:
    """One run: `for step in range(steps)` with a host-side evaluation (float(acc)) every eval_every steps."""
    init, step, metric = fns
    dyn = jax.device_put(dyn)
    params, opt_state, problem, key = init(np.int32(run.seed), np.int32(run.problem_index), dyn)
    best = final = float(metric(params, problem, dyn))
    steps = 0
    for _ in range(settings.steps):
        if best >= settings.stop_threshold:
            break
        params, opt_state = step(params, opt_state, problem, dyn, key, np.int32(steps))
        steps += 1
        if steps % settings.eval_every == 0:
            final = float(metric(params, problem, dyn))
            best = max(best, final)
    return Outcome(run.run_id, best, steps, final)


def warm_up(fns, run: RunSpec, dyn: dict) -> float:
    """Seconds of the first call of each function of a new shape (trace + compile + one execution)."""
    init, step, metric = fns
    start = time.perf_counter()
    dyn = jax.device_put(dyn)
    params, opt_state, problem, key = init(np.int32(run.seed), np.int32(run.problem_index), dyn)
    metric(params, problem, dyn).block_until_ready()
    jax.block_until_ready(step(params, opt_state, problem, dyn, key, np.int32(0)))
    return time.perf_counter() - start


def run_python_loops(exp: Experiment, runs: list[RunSpec], settings: Settings) -> tuple[list[Outcome], Timing]:
    """Baseline (c): per-step Python loop; compile time = first call of each function per shape."""
    fns, timing, outcomes = {}, Timing(), []
    start = time.perf_counter()
    for run in runs:
        shape, key, dyn = unpadded(exp, run)
        if key not in fns:
            fns[key] = make_step_functions(exp, shape, settings)
            timing.compile_s += warm_up(fns[key], run, dyn)
            timing.compiles += 1
        outcomes.append(python_loop_run(fns[key], run, dyn, settings))
    timing.total_s = time.perf_counter() - start
    return outcomes, timing


# -- the machine -----------------------------------------------------------------------------------------
def matmul_peak(n: int = 2048, repeats: int = 10) -> float:
    """Best-of-`repeats` GFLOP/s of a jitted n×n float32 matmul through JAX."""
    a = jax.random.normal(jax.random.PRNGKey(0), (n, n), jnp.float32)
    b = jax.random.normal(jax.random.PRNGKey(1), (n, n), jnp.float32)
    mm = jax.jit(jnp.matmul)
    mm(a, b).block_until_ready()
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        mm(a, b).block_until_ready()
        best = min(best, time.perf_counter() - t)
    return 2.0 * n**3 / best / 1e9


# -- sweeps without a search, and host memory ------------------------------------------------------------
def runs_from_spec(spec, exp: Experiment) -> list[RunSpec]:
    """Every run of a sweep WITHOUT a threshold search (points × seeds × learning rates), in spec order,
    with the run ids and problem indices the engine gives them (`jaxmem.plan.make_run`)."""
    if spec.search is not None:
        raise ValueError("runs_from_spec: the sweep has a search; read its runs back with runs_from_table")
    out = []
    for point in spec.points:
        for seed in spec.seeds:
            for lr in spec.train.learning_rates:
                run = make_run(point, seed, lr, None, None, 0)  # lr as the engine passes it: same run id
                out.append(RunSpec(run.run_id, exp.complete(run.config), run.seed, float(lr), run.problem_index))
    return out


def host_memory() -> dict[str, int]:
    """This process's resident set now (VmRSS) and at its peak so far (VmHWM), in bytes (Linux)."""
    out = {}
    with open("/proc/self/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                out[key] = int(value.split()[0]) * 1024
    return out
