"""Baselines for the benchmarks: the runs of a jaxmem sweep, trained without the engine.

Both baselines train the UNPADDED model of each run (`static_shape(exp, config, unpadded)`), from
the engine's own key `run_key(seed, problem_index)`, with the experiment's own optimizer and the
engine's stopping rule (`jaxmem.driver.sweep.settings_of`): evaluate at step 0 and after every
`eval_every` steps; stop once the best metric reaches `stop_threshold` in the success rule's direction
(`Settings.toward`) or `steps` steps ran. A construction (no loss) is evaluated, never trained. No
padding, no vmap, no divergence guard.
"""

from __future__ import annotations

import dataclasses
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax

from jaxmem.engine.program import Settings, batch_key, dyn_arrays
from jaxmem.experiments.interface import Experiment
from jaxmem.plan import buckets
from jaxmem.plan.runs import make_run, point_id, run_key


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
    """A baseline's run as the engine's `Finished` has it: best metric (in its own units), steps run, and
    every metric at the last evaluation (so `jaxmem.driver.sweep.succeeded` judges it as the engine does)."""

    run_id: str
    best: float
    steps: int
    final: dict


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
        value = int(row.value)
        run = make_run(point, int(row.seed), float(row.lr), spec.search.variable, value, 0, exp.same_problem_across)
        assert run.run_id == row.run_id, f"run id mismatch for {row.run_id}"
        out.append(RunSpec(run.run_id, exp.complete(run.config), run.seed, run.lr, run.problem_index))
    return out


def unpadded(exp: Experiment, run: RunSpec) -> tuple[dict, tuple, dict]:
    """(shape, hashable shape key, dyn) of the run's unpadded model; dyn dtypes as in the engine."""
    shape = buckets.static_shape(exp, run.config, buckets.unpadded)
    dyn = {k: v[0] for k, v in dyn_arrays([buckets.traced_values(exp, run.config)], [run.lr]).items()}
    return shape, tuple(sorted(shape.items())), dyn


def flops_per_step(exp: Experiment, config: dict) -> float:
    """FLOPs of one training step of the run's true (unpadded) model: the cost of its resolved config."""
    return exp.cost("flops_per_step", exp.effective(config))


def useful_gflop(exp: Experiment, runs: list[RunSpec], steps: dict) -> float:
    """Σ over the run ids in `steps` (those of `runs`) of flops_per_step × steps run, in GFLOP."""
    configs = {r.run_id: r.config for r in runs}
    return sum(flops_per_step(exp, configs[run_id]) * n for run_id, n in steps.items()) / 1e9


def evaluation(exp, shape):
    """evaluate(params, problem, dyn) -> every metric of the experiment as float32, as the engine records
    them: computing all of them is part of the work (returning one would let XLA drop the others)."""

    def evaluate(params, problem, dyn):
        return {k: jnp.asarray(v, jnp.float32) for k, v in exp.evaluate(params, problem, shape, dyn).items()}

    return evaluate


def floats(metrics: dict) -> dict:
    """Metrics read back from the device as Python floats."""
    return {k: float(v) for k, v in jax.device_get(metrics).items()}


def _sgd_step(exp, shape):
    def step(params, opt_state, problem, dyn, key, t):
        grads = jax.grad(exp.loss)(params, problem, shape, dyn, batch_key(key, t))
        updates, opt_state = exp.optimizer(dyn).update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state

    return step


# -- (b) one jitted while_loop program per run ---------------------------------------------------------
def make_while_program(exp: Experiment, shape: dict, settings: Settings):
    """train(seed, problem_index, dyn) -> (best, steps, metrics at the last evaluation): the whole run in
    one program, `while (not stopped) { fori_loop(eval_every steps); evaluate }`. The best metric is
    kept where higher is better (`settings.toward`) and returned in the metric's units."""
    step, evaluate = _sgd_step(exp, shape), evaluation(exp, shape)
    score = lambda metrics: settings.toward(metrics[settings.metric])  # noqa: E731

    def train(seed, problem_index, dyn):
        key = run_key(seed, problem_index)
        params, problem = exp.init(key, shape, dyn)
        opt_state = exp.optimizer(dyn).init(params)
        first = evaluate(params, problem, dyn)

        def keep_going(carry):
            _, _, steps, best, _ = carry
            return (best < settings.toward(settings.stop_threshold)) & (steps < settings.steps)

        def block(carry):
            params, opt_state, steps, best, _ = carry
            params, opt_state = jax.lax.fori_loop(
                0,
                settings.eval_every,
                lambda i, po: step(*po, problem, dyn, key, steps + i),
                (params, opt_state),
            )
            metrics = evaluate(params, problem, dyn)
            return params, opt_state, steps + settings.eval_every, jnp.maximum(best, score(metrics)), metrics

        carry = (params, opt_state, jnp.int32(0), score(first), first)
        if exp.trainable:  # a construction compiles no training step
            carry = jax.lax.while_loop(keep_going, block, carry)
        _, _, steps, best, last = carry
        return settings.toward(best), steps, last

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
        best, steps, last = jax.device_get(programs[key](*args))
        outcomes.append(Outcome(run.run_id, float(best), int(steps), floats(last)))
    timing.total_s = time.perf_counter() - start
    return outcomes, timing


# -- (c) per-step Python loop around a jitted train step -----------------------------------------------
def make_step_functions(exp: Experiment, shape: dict):
    """Jitted (init, step, evaluate) functions of one unpadded shape, research-code style; step is None
    for a construction (no loss)."""

    def init(seed, problem_index, dyn):
        key = run_key(seed, problem_index)
        params, problem = exp.init(key, shape, dyn)
        return params, exp.optimizer(dyn).init(params), problem, key

    step = jax.jit(_sgd_step(exp, shape), donate_argnums=(0, 1)) if exp.trainable else None
    return jax.jit(init), step, jax.jit(evaluation(exp, shape))


def python_loop_run(fns, run: RunSpec, dyn: dict, settings: Settings) -> Outcome:
    """One run: `for step in range(steps)`, every metric read on the host every eval_every steps."""
    init, step, evaluate = fns
    dyn = jax.device_put(dyn)
    params, opt_state, problem, key = init(np.int32(run.seed), np.int32(run.problem_index), dyn)
    final = floats(evaluate(params, problem, dyn))
    best = settings.toward(final[settings.metric])  # higher is better
    steps = 0
    for _ in range(settings.steps):
        if best >= settings.toward(settings.stop_threshold):
            break
        params, opt_state = step(params, opt_state, problem, dyn, key, np.int32(steps))
        steps += 1
        if steps % settings.eval_every == 0:
            final = floats(evaluate(params, problem, dyn))
            best = max(best, settings.toward(final[settings.metric]))
    return Outcome(run.run_id, settings.toward(best), steps, final)


def warm_up(fns, run: RunSpec, dyn: dict) -> float:
    """Seconds of the first call of each function of a new shape (trace + compile + one execution)."""
    init, step, evaluate = fns
    start = time.perf_counter()
    dyn = jax.device_put(dyn)
    params, opt_state, problem, key = init(np.int32(run.seed), np.int32(run.problem_index), dyn)
    jax.block_until_ready(evaluate(params, problem, dyn))
    if step is not None:
        jax.block_until_ready(step(params, opt_state, problem, dyn, key, np.int32(0)))
    return time.perf_counter() - start


def run_python_loops(exp: Experiment, runs: list[RunSpec], settings: Settings) -> tuple[list[Outcome], Timing]:
    """Baseline (c): per-step Python loop; compile time = first call of each function per shape."""
    fns, timing, outcomes = {}, Timing(), []
    start = time.perf_counter()
    for run in runs:
        shape, key, dyn = unpadded(exp, run)
        if key not in fns:
            fns[key] = make_step_functions(exp, shape)
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


# -- sweeps without a search ------------------------------------------------------------------------
def runs_from_spec(spec, exp: Experiment) -> list[RunSpec]:
    """Every run of a sweep WITHOUT a threshold search (points × seeds × learning rates), in spec order,
    with the run ids and problem indices the engine gives them (`jaxmem.plan.runs.make_run`)."""
    if spec.search is not None:
        raise ValueError("runs_from_spec: the sweep has a search; read its runs back with runs_from_table")
    out = []
    for point in spec.points:
        for seed in spec.seeds:
            for lr in spec.train.learning_rates:
                run = make_run(point, seed, lr, None, None, 0, exp.same_problem_across)  # the engine's run id
                out.append(RunSpec(run.run_id, exp.complete(run.config), run.seed, float(lr), run.problem_index))
    return out
