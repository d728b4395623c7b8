"""The compiled program of one bucket: `while (segment not over) { scan(train steps) ; evaluate }`,
vmapped over a fixed number of run slots and sharded over every local device.

A slot holds one run. Finished runs (early-stopped, out of budget, or diverged) are frozen —
parameters and optimizer state alike — and the host refills their slots between segments. The
segment length (blocks of `eval_every` steps) and its early exit are traced arguments, so the host
can change them freely without recompiling: one compile per bucket.
"""

from __future__ import annotations

import itertools
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.sharding import PartitionSpec as P

from jaxmem.engine.emulated_precision import MANTISSA_BITS, emulated
from jaxmem.experiments.interface import Experiment
from jaxmem.persistence.untrained import as_untrained
from jaxmem.plan.runs import run_key


class RunState(NamedTuple):  # numbers in the default float type: float32, or float64 in x64 mode
    key: jax.Array  # the run's key; step t's batch key is fold_in(fold_in(key, BATCH_STREAM), t)
    params: Any
    opt_state: Any
    problem: Any
    step: jax.Array  # steps taken
    best: jax.Array  # best metric over evaluations so far, as `Settings.toward` sees it (higher is better)
    hit_step: jax.Array  # first evaluated step whose metric reached the threshold, -1 if none
    done: jax.Array
    diverged: jax.Array
    recent: jax.Array  # (max(Settings.give_up, 1),) best at each of the last give_up evaluations, a ring
    last: dict  # metrics at the latest evaluation
    untrained: dict  # the experiment's metrics at initialisation (step 0): the untrained model's baseline
    history: dict  # metrics of every evaluation of this segment: name -> (Settings.history,); unused if 0
    history_step: jax.Array  # (Settings.history,) the step of each recorded evaluation
    history_len: jax.Array  # evaluations recorded this segment


class Settings(NamedTuple):
    """Static training settings baked into a bucket's program."""

    steps: int
    eval_every: int
    metric: str
    hit_threshold: float  # for steps_to_threshold, in the metric's units
    stop_threshold: float  # early stop once the best metric reaches this (never: inf, or -inf when lower is better)
    stop_metric: str = ""  # the metric early stopping reads, in `metric`'s direction; "" = `metric` (see `stops`)
    history: int = 0  # evaluations a segment can record per slot (trajectories); 0 = none
    integrator: str = "optax"  # or "gradient_flow" (see `flow_block`)
    rtol: float = 1e-6
    atol: float = 1e-8
    higher_is_better: bool = True  # the success direction: reach at least (True) or at most (False)
    give_up: int = 0  # evaluations; see `hopeless`; 0 = never give up
    give_up_pace: float = 1.0  # see `hopeless`
    eval_steps: tuple[int, ...] = ()  # a log schedule: the steps evaluated after step 0, ending at `steps`;
    # empty: every `eval_every` steps
    final_eval: tuple[tuple[str, tuple], ...] = ()  # test-time axes: (field, traced values), see `make_final_eval`
    matmul_precision: str = "highest"  # f32 matmuls: "highest", "tf32" or "bf16" (see `matmul_precision`)

    def toward(self, value):
        """`value` on the scale where higher is better (the metric, or its negative); an involution."""
        return value if self.higher_is_better else -value


def stops(settings: Settings, best: jax.Array, metrics: dict) -> jax.Array:
    """Whether early stopping ends a run at this evaluation: the judged metric's best so far reaches
    `stop_threshold`, or, where early stopping reads another metric (`stop_metric`: a validation set,
    so that the run is judged on data it was not stopped on), that metric's latest value does (the
    `done` latch makes its first crossing final, as a best would)."""
    threshold = settings.toward(settings.stop_threshold)
    if settings.stop_metric in ("", settings.metric):
        return best >= threshold
    return settings.toward(metrics[settings.stop_metric]) >= threshold


# engine.matmul_precision as JAX's default_matmul_precision, per platform: explicit dot algorithms where the
# platform has them. A CPU computes f32 dots in f32 whatever it is told (and refuses a TF32 algorithm), so
# there the reduced precisions are emulated instead (`at_precision`).
JAX_MATMUL_PRECISION = {
    "highest": {},
    "tf32": {"gpu": "TF32_TF32_F32", "tpu": "tensorfloat32"},
    "bf16": {"gpu": "BF16_BF16_F32", "tpu": "BF16_BF16_F32"},
}
EMULATED_ON = ("cpu",)  # platforms whose reduced-precision matmuls are emulated (engine/emulated_precision.py)


def jax_matmul_precision(name: str, platform: str) -> str:
    """JAX's name of the sweep's matmul precision on `platform` ("highest" where it has no other)."""
    return JAX_MATMUL_PRECISION[name].get(platform, "highest")


def emulates(name: str, platform: str) -> bool:
    """Whether matmul precision `name` is emulated on `platform` (rounded operands, f32 products)."""
    return name != "highest" and platform in EMULATED_ON


def precision_label(name: str, platform: str) -> str:
    """The matmul precision as a report states it: the name, and how a reduced one was computed on `platform`
    ("tf32 (emulated: operands rounded to 10-bit mantissas, f32 accumulation)"); the name alone where
    the platform is unknown (a store without its device)."""
    if name == "highest" or not platform:
        return name
    if emulates(name, platform):
        return f"{name} (emulated: operands rounded to {MANTISSA_BITS[name]}-bit mantissas, f32 accumulation)"
    return f"{name} (the device's {jax_matmul_precision(name, platform)} matmuls)"


def matmul_precision(settings: Settings, platform: str):
    """The context in which a bucket's programs are traced: f32 matmuls at the sweep's precision (JAX's
    `default_matmul_precision`; thread-local, so it must wrap the tracing itself)."""
    return jax.default_matmul_precision(jax_matmul_precision(settings.matmul_precision, platform))


def at_precision(fn, settings: Settings, platform: str):
    """`fn` (a program to jit) with its matmuls at the sweep's precision where `platform` cannot compute
    it and emulates it (`emulates`); else `fn` itself, traced in `matmul_precision`'s context. Emulation
    on a CPU rather than a silent f32: a sweep's results then are those of the precision it names (and its
    fingerprint records), to the accelerator's rounding of the matmul operands."""
    return emulated(fn, settings.matmul_precision) if emulates(settings.matmul_precision, platform) else fn


def initial_model(exp: Experiment, shape: dict, dyn: dict, key: jax.Array, flow: bool):
    """A run's parameters, problem and optimizer state at step 0 (gradient flow: its solver's step count)."""
    params, problem = exp.init(key, shape, dyn)
    opt_state = {"solver_steps": jnp.array(0, jnp.int32)} if flow else exp.optimizer(dyn).init(params)
    return params, problem, opt_state


def tree_where(mask: jax.Array, new, old):
    """Select `new` where the leading-axis `mask` is true, else `old`, leaf by leaf."""

    def pick(a, b):
        m = mask.reshape(mask.shape + (1,) * (a.ndim - mask.ndim))
        return jnp.where(m, a, b)

    return jax.tree.map(pick, new, old)


def hopeless(settings: Settings, recent: jax.Array, evaluations: jax.Array, best: jax.Array, step, budget):
    """Whether a run should give up (`Settings.give_up` = K > 0): after K evaluations, its best value
    (on the `toward` scale), gaining `give_up_pace` times what it gained over the last K evaluations
    every K evaluations from now on, would stay below the success threshold at the end of its step
    budget. `recent` holds the best value at each of the last K evaluations, `evaluations` counts those
    done before this one."""
    k = settings.give_up
    if not k:
        return jnp.array(False)
    gain = settings.give_up_pace * jnp.maximum(best - recent[evaluations % k], 0.0)
    remaining = (budget - step) / (settings.eval_every * k)
    return (evaluations >= k) & (best + gain * remaining < settings.toward(settings.hit_threshold))


def over_slots(fn):
    """`fn` of one run mapped over the slots (the leading axis of every argument): vmapped, or with a
    single slot the unbatched body itself: XLA compiles a batch of one as batched dots, which on a CPU
    cost more than plain ones (MLP memory at N = 1024: 2.5 against 2.0 ms per step, 146 against 126 µs
    at N = 256)."""
    vmapped = jax.vmap(fn)

    def mapped(*args):
        if jax.tree.leaves(args)[0].shape[0] != 1:
            return vmapped(*args)
        return jax.tree.map(lambda a: a[None], fn(*jax.tree.map(lambda a: a[0], args)))

    return mapped


def _all_finite(tree) -> jax.Array:
    leaves = [jnp.all(jnp.isfinite(x)) for x in jax.tree.leaves(tree) if jnp.issubdtype(x.dtype, jnp.inexact)]
    return jnp.all(jnp.stack(leaves)) if leaves else jnp.array(True)


MAX_SOLVER_STEPS = 1 << 16  # per evaluation block; beyond it a gradient-flow run is marked diverged
BATCH_STREAM = 0x5EED  # keeps per-step batch keys apart from the keys `init` derives


def batch_key(key: jax.Array, step: jax.Array) -> jax.Array:
    """The key of step `step`'s batch of the run with key `key`."""
    return jax.random.fold_in(jax.random.fold_in(key, BATCH_STREAM), step)


def evaluated(exp: Experiment, params, problem, shape: dict, dyn: dict) -> dict:
    """The experiment's metrics of one run, in the default float type (as the engine records them)."""
    return {k: jnp.asarray(v, float) for k, v in exp.evaluate(params, problem, shape, dyn).items()}


def block_length(settings: Settings, step: jax.Array):
    """Steps from `step` to the next evaluation: `eval_every`, or on a log schedule the distance to
    the next scheduled step (at least 1: a run past the schedule's end is done and frozen anyway)."""
    if not settings.eval_steps:
        return settings.eval_every
    schedule = jnp.asarray(settings.eval_steps, jnp.int32)
    following = schedule[jnp.minimum(jnp.searchsorted(schedule, step, side="right"), len(schedule) - 1)]
    return jnp.maximum(following - step, 1)


def log_schedule(steps: int, points: int) -> tuple[int, ...]:
    """The evaluated steps of a log schedule: the distinct integers round(10^x) for `points` values x
    evenly spaced in [0, log10(steps)], ending at `steps`."""
    if steps < 1:
        return ()
    return tuple(sorted({int(round(v)) for v in np.logspace(0, np.log10(steps), points)} | {steps}))


def make_segment(exp: Experiment, shape: dict, settings: Settings, axis: str | None = None):
    """Build the (uncompiled) segment function of a bucket. With `axis`, the function is the
    per-device body of a `shard_map` over that mesh axis: slot counts are summed across devices."""

    def total(x):
        local = jnp.sum(x)
        return jax.lax.psum(local, axis) if axis else local

    flow = settings.integrator == "gradient_flow"

    def with_effort(metrics: dict, opt_state) -> dict:
        """The experiment's metrics, with gradient flow the solver's accepted steps so far (its effort:
        stiffness, tolerance)."""
        return {**metrics, "solver_steps": opt_state["solver_steps"].astype(float)} if flow else metrics

    def evaluate(params, problem, dyn, opt_state):
        return with_effort(evaluated(exp, params, problem, shape, dyn), opt_state)

    def record(state: RunState, metrics: dict) -> RunState:
        """Append this evaluation to the segment's history (a no-op program when history is off)."""
        if not settings.history:
            return state
        at = jnp.minimum(state.history_len, settings.history - 1)
        return state._replace(
            history={k: state.history[k].at[at].set(v) for k, v in metrics.items()},
            history_step=state.history_step.at[at].set(state.step),
            history_len=state.history_len + 1,
        )

    def settle(state: RunState, metrics: dict, budget) -> RunState:
        value = settings.toward(metrics[settings.metric])
        reached = value >= settings.toward(settings.hit_threshold)
        hit_step = jnp.where((state.hit_step < 0) & reached, state.step, state.hit_step)
        best = jnp.maximum(state.best, value)
        evaluations = state.step // settings.eval_every
        done = (
            state.done
            | stops(settings, best, metrics)
            | (state.step >= budget)
            | hopeless(settings, state.recent, evaluations, best, state.step, budget)
        )
        recent = state.recent.at[evaluations % max(settings.give_up, 1)].set(best)
        return state._replace(best=best, hit_step=hit_step, done=done, recent=recent, last=metrics)

    def rejected(metrics: dict) -> jax.Array:
        """A problem failing the experiment's precondition is never trained (see Experiment)."""
        checks = [metrics[c] < 0.5 for c in exp.precondition] if settings.steps else []
        return jnp.any(jnp.stack(checks)) if checks else jnp.array(False)

    def init_one(seed, problem_index, dyn) -> RunState:
        key = run_key(seed, problem_index)
        params, problem, opt_state = initial_model(exp, shape, dyn, key, flow)
        untrained = evaluated(exp, params, problem, shape, dyn)
        metrics = with_effort(untrained, opt_state)
        fresh = RunState(
            key=key,
            params=params,
            opt_state=opt_state,
            problem=problem,
            step=jnp.array(0, jnp.int32),
            best=jnp.array(-jnp.inf, float),
            hit_step=jnp.array(-1, jnp.int32),
            done=rejected(metrics),
            diverged=jnp.array(False),
            recent=jnp.zeros(max(settings.give_up, 1), float),
            last=metrics,
            untrained=untrained,
            history={k: jnp.zeros(max(settings.history, 1), float) for k in metrics},  # no 0-size
            history_step=jnp.zeros(max(settings.history, 1), jnp.int32),  # arrays: shard_map mistypes them
            history_len=jnp.array(0, jnp.int32),
        )
        return record(settle(fresh, metrics, dyn["budget"]), metrics)

    def train_step(carry, dyn):
        """One optimizer step of every slot, frozen or not (the block keeps or discards the result)."""
        state, finite = carry
        opt = exp.optimizer(dyn)
        loss, grads = jax.value_and_grad(exp.loss)(
            state.params, state.problem, shape, dyn, batch_key(state.key, state.step)
        )
        updates, opt_state = opt.update(grads, state.opt_state, state.params)
        params = optax.apply_updates(state.params, updates)
        return state._replace(params=params, opt_state=opt_state, step=state.step + 1), finite & jnp.isfinite(loss)

    def commit(state: RunState, trained: RunState, finite: jax.Array) -> RunState:
        """Keep a block's training where the run was live and stayed finite; a run that went
        non-finite keeps the state of the block's start and is marked diverged (and done)."""
        finite = finite & _all_finite(trained.params)
        live = ~state.done
        take = live & finite
        keep = lambda new, old: jax.tree.map(lambda a, b: jnp.where(take, a, b), new, old)  # noqa: E731
        return state._replace(
            params=keep(trained.params, state.params),
            opt_state=keep(trained.opt_state, state.opt_state),
            step=jnp.where(take, trained.step, state.step),
            diverged=state.diverged | (live & ~finite),
            done=state.done | (live & ~finite),
        )

    def train_block(state: RunState, dyn) -> RunState:
        """`eval_every` optimizer steps. Freezing and the divergence check happen once per block, not
        per step: the per-step selects cost as much as a tiny model's own arithmetic."""
        trained, finite = jax.lax.fori_loop(
            0, block_length(settings, state.step), lambda _, c: train_step(c, dyn), (state, state.step >= 0)
        )  # (True, derived from the state so that it keeps the per-device sharding type)
        return commit(state, trained, finite)

    def flow_block(state: RunState, dyn) -> RunState:
        """Gradient flow θ̇ = −∇L over the next `eval_every` steps of `lr` time units each, solved by
        diffrax (Tsit5, PID step control at rtol/atol); the loss must be deterministic (a population
        loss): it gets the run's own key. A failed solve or a non-finite state marks the run diverged."""
        import diffrax  # here: most sweeps never solve a flow, and importing it costs every command 0.6 s

        lr, length = dyn["lr"], block_length(settings, state.step)
        grad = jax.grad(exp.loss)
        field = lambda t, p, args: jax.tree.map(jnp.negative, grad(p, state.problem, shape, dyn, state.key))  # noqa: E731
        solution = diffrax.diffeqsolve(
            diffrax.ODETerm(field),
            diffrax.Tsit5(),
            t0=state.step * lr,
            t1=(state.step + length) * lr,
            dt0=lr,
            y0=state.params,
            stepsize_controller=diffrax.PIDController(rtol=settings.rtol, atol=settings.atol),
            max_steps=MAX_SOLVER_STEPS,
            throw=False,
        )
        trained = state._replace(
            params=jax.tree.map(lambda y: y[-1], solution.ys),
            opt_state={"solver_steps": state.opt_state["solver_steps"] + solution.stats["num_accepted_steps"]},
            step=state.step + length,
        )
        return commit(state, trained, solution.result == diffrax.RESULTS.successful)

    def block_one(state: RunState, dyn) -> RunState:
        if settings.steps and flow:
            state = flow_block(state, dyn)
        elif settings.steps:  # constructions evaluated without training compile no training step
            state = train_block(state, dyn)
        metrics = evaluate(state.params, state.problem, dyn, state.opt_state)
        settled = record(settle(state, metrics, dyn["budget"]), metrics)
        live = ~state.done
        keep = lambda new, old: jax.tree.map(lambda a, b: jnp.where(live, a, b), new, old)  # noqa: E731
        return state._replace(
            best=keep(settled.best, state.best),
            hit_step=keep(settled.hit_step, state.hit_step),
            done=keep(settled.done, state.done),
            recent=keep(settled.recent, state.recent),
            last=keep(settled.last, state.last),
            history=keep(settled.history, state.history),
            history_step=keep(settled.history_step, state.history_step),
            history_len=keep(settled.history_len, state.history_len),
        )

    init_all = over_slots(init_one)
    block_all = over_slots(block_one)

    def refresh(state: RunState, dyn: dict, seeds, problem_index, refill, rederive) -> RunState:
        """Initialise the `refill` slots, and rebuild the problem of the `rederive` ones (a checkpoint
        leaves it out: `init` derives it from the run's key and traced values alone)."""
        fresh = init_all(seeds, problem_index, dyn)
        state = tree_where(refill, fresh, state)
        return state._replace(problem=tree_where(rederive, fresh.problem, state.problem))

    def segment(state: RunState, dyn: dict, seeds, problem_index, refill, vacant, rederive, max_blocks, stop_after):
        """Refill slots (and rebuild restored slots' problems), then run blocks until `max_blocks` ran,
        all slots are done, or `stop_after` runs finished during this segment. The history restarts
        every segment (the host reads it after each one), so `max_blocks` must stay below
        `Settings.history` when on."""
        state = state._replace(history_len=state.history_len * 0)  # (keeps the per-device sharding type)
        state = jax.lax.cond(
            jnp.any(refill | rederive),
            lambda s: refresh(s, dyn, seeds, problem_index, refill, rederive),
            lambda s: s,
            state,
        )
        state = state._replace(done=state.done | vacant)
        done_at_start = state.done

        def keep_going(carry):
            blocks, s = carry
            newly_done = total(s.done & ~done_at_start)
            return (blocks < max_blocks) & (total(~s.done) > 0) & (newly_done < stop_after)

        def body(carry):
            blocks, s = carry
            return blocks + 1, block_all(s, dyn)

        blocks, state = jax.lax.while_loop(keep_going, body, (jnp.array(0, jnp.int32), state))
        return state, blocks

    return segment, init_all


def final_eval_points(axes: tuple[tuple[str, tuple], ...]) -> list[dict]:
    """The points of the test-time axes' product ((field, values) pairs, e.g. `Settings.final_eval`),
    as {field: value}, in spec order."""
    names = [name for name, _ in axes]
    return [dict(zip(names, combo)) for combo in itertools.product(*(values for _, values in axes))]


FINAL_EVAL_BATCH = 8  # test-time points evaluated at once per slot: bounds the program's memory


def make_final_eval(exp: Experiment, shape: dict):
    """`final_eval(state, dyn, points) -> {metric: (slots, P)}`: every slot's current parameters
    evaluated at each of the P points (`points`: field -> (P,) traced values, replacing the run's own
    value in `dyn`), FINAL_EVAL_BATCH points at a time: test-time axes read off the trained model,
    never retrained. A trainable experiment's untrained model is evaluated there too (`untrained_<metric>`):
    the parameters `init` drew, drawn again from the run's key and its own traced values."""

    def one(params, problem, key, dyn, points):
        initial = exp.init(key, shape, dyn)[0] if exp.trainable else None

        def at(point):
            values = {**dyn, **point}
            metrics = evaluated(exp, params, problem, shape, values)
            if initial is None:
                return metrics
            return {**metrics, **as_untrained(evaluated(exp, initial, problem, shape, values))}

        return jax.lax.map(at, points, batch_size=FINAL_EVAL_BATCH)

    def final_eval(state: RunState, dyn: dict, points: dict):
        return jax.vmap(one, in_axes=(0, 0, 0, 0, None))(state.params, state.problem, state.key, dyn, points)

    return final_eval


def sharded_segment(segment, mesh, axis: str, settings: Settings):
    """The segment as a `shard_map` over the runs axis: every device runs the same local program on
    its own slots, whatever the device count, so results do not depend on sharding. diffrax's solver
    loop does not type-check under shard_map's varying-axes rules, so gradient flow turns them off."""
    runs, replicated = P(axis), P()
    return jax.shard_map(
        segment,
        mesh=mesh,
        in_specs=(runs,) * 7 + (replicated, replicated),
        out_specs=(runs, replicated),
        check_vma=settings.integrator != "gradient_flow",
    )


def dyn_arrays(values: list[dict], lrs: list[float], budgets: list[int] | None = None) -> dict[str, np.ndarray]:
    """Stack per-slot dynamic values (true sizes, options, learning rate and, for the engine's
    programs, each run's step budget) into host arrays; numbers in the default float type (float64
    in x64 mode)."""
    real = np.float64 if jax.config.jax_enable_x64 else np.float32
    keys = values[0].keys()
    out = {k: np.asarray([v[k] for v in values], real if isinstance(values[0][k], float) else np.int32) for k in keys}
    out["lr"] = np.asarray(lrs, real)
    if budgets is not None:
        out["budget"] = np.asarray(budgets, np.int32)
    return out
