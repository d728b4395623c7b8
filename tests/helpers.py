"""Shared helpers for the engine tests: run one bucket program directly, or a sweep in a subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import optax

from jaxmem.cli.main import main
from jaxmem.experiments.nichani24 import assoc_memory
from jaxmem.engine.program import Settings, dyn_arrays, make_segment
from jaxmem.plan.buckets import static_shape, traced_values
from jaxmem.plan.runs import run_key

ROOT = Path(__file__).resolve().parents[1]
TINY_SPEC = ROOT / "tests" / "specs" / "tiny_mlp.toml"
EXP = assoc_memory.EXPERIMENT
RESULT_COLUMNS = ["max_metric", "final_metric", "final_loss", "steps_run", "steps_to_threshold", "success", "diverged"]


def bucket_shape(configs: list[dict], pad, exp=EXP) -> tuple[list[dict], dict]:
    """Complete `configs` and the static shape of one bucket holding them all (sizes padded by `pad`)."""
    configs = [exp.complete(c) for c in configs]
    shapes = [static_shape(exp, c, pad) for c in configs]
    shape = {k: max(s[k] for s in shapes) if type(shapes[0][k]) is int else shapes[0][k] for k in shapes[0]}
    return configs, shape


def run_program(
    configs: list[dict],
    pad,
    slots: int,
    steps: int,
    lrs: list[float],
    seeds=None,
    stop=0.99,
    exp=EXP,
    eval_every: int = 8,
    settings: Settings | None = None,
):
    """Train `configs` in one bucket program (sizes padded by `pad`) for up to `steps` steps; return the state.
    `settings` replaces the default rule (accuracy, early stop at `stop`)."""
    configs, shape = bucket_shape(configs, pad, exp)
    settings = settings or Settings(steps, eval_every, "accuracy", 0.99, stop)
    segment, init_all = make_segment(exp, shape, settings)
    fill = slots - len(configs)
    values = [traced_values(exp, c) for c in configs]
    dyn = dyn_arrays(values + [values[0]] * fill, lrs + [lrs[0]] * fill, [steps] * slots)
    seeds = np.asarray(list(seeds or [0] * len(configs)) + [0] * fill, np.int32)
    problem_index = np.full(slots, 5, np.int32)
    blank = jax.eval_shape(init_all, seeds, problem_index, dyn)
    state = jax.tree.map(lambda a: jnp.zeros(a.shape, a.dtype), blank)
    vacant = np.arange(slots) >= len(configs)
    state, _ = jax.jit(segment)(
        state,
        dyn,
        seeds,
        problem_index,
        np.ones(slots, bool),
        vacant,
        np.zeros(slots, bool),
        np.int32(10**6),
        np.int32(slots + 1),
    )
    return state


def assert_padded_matches(small, big, metrics: tuple[str, ...], steps: int) -> None:
    """Slot 0 of `big` (padded) equals slot 0 of `small` on the shared block, and is zero outside it."""
    for name, leaf in small.params.items():
        padded = big.params[name][0]
        block = tuple(slice(0, n) for n in leaf[0].shape)
        np.testing.assert_allclose(padded[block], leaf[0], atol=2e-5, rtol=1e-4, err_msg=name)
        outside = jnp.ones(padded.shape, bool).at[block].set(False)
        assert float(jnp.max(jnp.abs(jnp.where(outside, padded, 0.0)))) == 0.0, f"{name}: padding left non-zero"
    for metric in metrics:
        np.testing.assert_allclose(big.last[metric][0], small.last[metric][0], atol=1e-5, err_msg=metric)
    assert int(big.step[0]) == int(small.step[0]) == steps


def jaxmem_cli(*args, env_extra=None, cwd=ROOT, **kwargs) -> subprocess.Popen:
    env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env_extra or {})}
    return subprocess.Popen(
        [sys.executable, "-m", "jaxmem.cli", *map(str, args)],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        **kwargs,
    )


def run_steps(exp, config, pad, lr, steps=3):
    """`steps` SGD steps of `exp` at `config` with sizes padded by `pad`, then an evaluation:
    (params, metrics). One program; the step is compiled once (a fori_loop)."""
    full = exp.effective(config)
    shape = static_shape(exp, full, pad)
    dyn = {k: jnp.asarray(v) for k, v in traced_values(exp, full).items()} | {"lr": jnp.asarray(lr)}
    key = run_key(0, 3)
    opt = exp.optimizer(dyn)

    @jax.jit
    def go():
        params, problem = exp.init(key, shape, dyn)
        params = trained(exp, opt, params, problem, shape, dyn, key, steps)
        return params, exp.evaluate(params, problem, shape, dyn)

    return go()


def sgd_trained(exp, params, problem, shape, dyn, key, steps: int, lr: float = 1.0):
    """`params` after `steps` plain SGD steps on `exp.loss`, in one compiled program."""
    return jax.jit(lambda p: trained(exp, optax.sgd(lr), p, problem, shape, dyn, key, steps))(params)


def trained(exp, opt, params, problem, shape, dyn, key, steps: int):
    """`params` after `steps` steps of `opt` on `exp.loss` (batch key: `key` folded with the step); to be
    traced inside a jitted function (a fori_loop: the step compiles once)."""

    def step(t, carry):
        params, state = carry
        grads = jax.grad(exp.loss)(params, problem, shape, dyn, jax.random.fold_in(key, t))
        updates, state = opt.update(grads, state, params)
        return optax.apply_updates(params, updates), state

    return jax.lax.fori_loop(0, steps, step, (params, opt.init(params)))[0]


def cli(capsys, *argv) -> tuple[int, str, str]:
    """`jaxmem *argv` in this process: its exit code, stdout and stderr, which must hold no traceback."""
    code = main([str(a) for a in argv])
    stdout, stderr = capsys.readouterr()
    assert "Traceback" not in stdout + stderr
    return code, stdout, stderr
