"""The compiled program of one bucket: `while (segment not over) { scan(train steps) ; evaluate }`,
vmapped over a fixed number of run slots and sharded over every local device.

A slot holds one run. Finished runs (early-stopped, out of budget, or diverged) are frozen —
parameters and optimizer state alike — and the host refills their slots between segments. The
segment length (blocks of `eval_every` steps) and its early exit are traced arguments, so the host
can change them freely without recompiling: one compile per bucket.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.sharding import PartitionSpec as P

from jaxmem.experiments.base import Experiment


class RunState(NamedTuple):
    key: jax.Array  # the run's key; step t's batch key is fold_in(fold_in(key, BATCH_STREAM), t)
    params: Any
    opt_state: Any
    problem: Any
    step: jax.Array  # steps taken
    best: jax.Array  # best metric over evaluations so far (higher is better)
    hit_step: jax.Array  # first evaluated step whose metric reached the threshold, -1 if none
    done: jax.Array
    diverged: jax.Array
    last: dict  # metrics at the latest evaluation


class Settings(NamedTuple):
    """Static training settings baked into a bucket's program."""

    steps: int
    eval_every: int
    metric: str
    hit_threshold: float  # for steps_to_threshold
    stop_threshold: float  # early stop once best >= this (inf: never)


def tree_where(mask: jax.Array, new, old):
    """Select `new` where the leading-axis `mask` is true, else `old`, leaf by leaf."""

    def pick(a, b):
        m = mask.reshape(mask.shape + (1,) * (a.ndim - mask.ndim))
        return jnp.where(m, a, b)

    return jax.tree.map(pick, new, old)


def _all_finite(tree) -> jax.Array:
    leaves = [jnp.all(jnp.isfinite(x)) for x in jax.tree.leaves(tree) if jnp.issubdtype(x.dtype, jnp.inexact)]
    return jnp.all(jnp.stack(leaves)) if leaves else jnp.array(True)


BATCH_STREAM = 0x5EED  # keeps per-step batch keys apart from the keys `init` derives


def run_key(seed: jax.Array, problem_index: jax.Array) -> jax.Array:
    """The run's key: fold_in(PRNGKey(seed), problem index); independent of slot, chunk and device."""
    return jax.random.fold_in(jax.random.PRNGKey(seed), problem_index)


def make_segment(exp: Experiment, shape: dict, settings: Settings, axis: str | None = None):
    """Build the (uncompiled) segment function of a bucket. With `axis`, the function is the
    per-device body of a `shard_map` over that mesh axis: slot counts are summed across devices."""

    def total(x):
        local = jnp.sum(x)
        return jax.lax.psum(local, axis) if axis else local

    def evaluate(params, problem, dyn):
        return {k: jnp.asarray(v, jnp.float32) for k, v in exp.evaluate(params, problem, shape, dyn).items()}

    def settle(state: RunState, metrics: dict) -> RunState:
        value = metrics[settings.metric]
        reached = value >= settings.hit_threshold
        hit_step = jnp.where((state.hit_step < 0) & reached, state.step, state.hit_step)
        best = jnp.maximum(state.best, value)
        done = state.done | (best >= settings.stop_threshold) | (state.step >= settings.steps)
        return state._replace(best=best, hit_step=hit_step, done=done, last=metrics)

    def init_one(seed, problem_index, dyn) -> RunState:
        key = run_key(seed, problem_index)
        params, problem = exp.init(key, shape, dyn)
        metrics = evaluate(params, problem, dyn)
        fresh = RunState(
            key=key,
            params=params,
            opt_state=exp.optimizer(dyn).init(params),
            problem=problem,
            step=jnp.array(0, jnp.int32),
            best=jnp.array(-jnp.inf, jnp.float32),
            hit_step=jnp.array(-1, jnp.int32),
            done=jnp.array(False),
            diverged=jnp.array(False),
            last=metrics,
        )
        return settle(fresh, metrics)

    def train_step(state: RunState, dyn) -> RunState:
        opt = exp.optimizer(dyn)
        batch_key = jax.random.fold_in(jax.random.fold_in(state.key, BATCH_STREAM), state.step)
        loss, grads = jax.value_and_grad(exp.loss)(state.params, state.problem, shape, dyn, batch_key)
        updates, opt_state = opt.update(grads, state.opt_state, state.params)
        params = optax.apply_updates(state.params, updates)
        finite = jnp.isfinite(loss) & _all_finite(params)
        live = ~state.done
        take = live & finite
        return state._replace(
            params=jax.tree.map(lambda a, b: jnp.where(take, a, b), params, state.params),
            opt_state=jax.tree.map(lambda a, b: jnp.where(take, a, b), opt_state, state.opt_state),
            step=state.step + take.astype(jnp.int32),
            diverged=state.diverged | (live & ~finite),
            done=state.done | (live & ~finite),
        )

    def block_one(state: RunState, dyn) -> RunState:
        if settings.steps:  # constructions evaluated without training compile no training step
            state = jax.lax.fori_loop(0, settings.eval_every, lambda _, s: train_step(s, dyn), state)
        settled = settle(state, evaluate(state.params, state.problem, dyn))
        live = ~state.done
        keep = lambda new, old: jax.tree.map(lambda a, b: jnp.where(live, a, b), new, old)  # noqa: E731
        return state._replace(
            best=keep(settled.best, state.best),
            hit_step=keep(settled.hit_step, state.hit_step),
            done=keep(settled.done, state.done),
            last=keep(settled.last, state.last),
        )

    init_all = jax.vmap(init_one)
    block_all = jax.vmap(block_one)

    def segment(state: RunState, dyn: dict, seeds, problem_index, refill, vacant, max_blocks, stop_after):
        """Refill slots, then run blocks until `max_blocks` ran, all slots are done, or
        `stop_after` runs finished during this segment."""
        state = jax.lax.cond(
            jnp.any(refill), lambda s: tree_where(refill, init_all(seeds, problem_index, dyn), s), lambda s: s, state
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


def sharded_segment(segment, mesh, axis: str):
    """The segment as a `shard_map` over the runs axis: every device runs the same local program on
    its own slots, whatever the device count, so results do not depend on sharding."""
    runs, replicated = P(axis), P()
    return jax.shard_map(
        segment, mesh=mesh, in_specs=(runs,) * 6 + (replicated, replicated), out_specs=(runs, replicated)
    )


def dyn_arrays(values: list[dict], lrs: list[float]) -> dict[str, np.ndarray]:
    """Stack per-slot dynamic values (true sizes, options, learning rate) into host arrays."""
    keys = values[0].keys()
    out = {
        k: np.asarray([v[k] for v in values], np.float32 if isinstance(values[0][k], float) else np.int32) for k in keys
    }
    out["lr"] = np.asarray(lrs, np.float32)
    return out
