"""Shared helpers for the engine tests: run one bucket program directly, or a sweep in a subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from jaxmem.experiments import assoc_memory
from jaxmem.program import Settings, dyn_arrays, make_segment

ROOT = Path(__file__).resolve().parents[1]
TINY_SPEC = ROOT / "tests" / "specs" / "tiny_mlp.toml"
EXP = assoc_memory.EXPERIMENT
RESULT_COLUMNS = ["max_metric", "final_metric", "final_loss", "steps_run", "steps_to_threshold", "success", "diverged"]


def run_program(configs: list[dict], pad, slots: int, steps: int, lrs: list[float], seeds=None, stop=0.99):
    """Train `configs` in one bucket program (sizes padded by `pad`) for up to `steps` steps; return the state."""
    configs = [EXP.complete(c) for c in configs]
    shapes = [EXP.shape(c, pad) for c in configs]
    shape = {k: max(s[k] for s in shapes) if type(shapes[0][k]) is int else shapes[0][k] for k in shapes[0]}
    segment, init_all = make_segment(EXP, shape, Settings(steps, 8, "accuracy", 0.99, stop))
    fill = slots - len(configs)
    dyn = dyn_arrays([EXP.dynamic(c) for c in configs] + [EXP.dynamic(configs[0])] * fill, lrs + [lrs[0]] * fill)
    seeds = np.asarray(list(seeds or [0] * len(configs)) + [0] * fill, np.int32)
    problem_index = np.full(slots, 5, np.int32)
    blank = jax.eval_shape(init_all, seeds, problem_index, dyn)
    state = jax.tree.map(lambda a: jnp.zeros(a.shape, a.dtype), blank)
    vacant = np.arange(slots) >= len(configs)
    state, _ = jax.jit(segment)(
        state, dyn, seeds, problem_index, np.ones(slots, bool), vacant, np.int32(10**6), np.int32(slots + 1)
    )
    return state


def jaxmem_cli(*args, env_extra=None, **kwargs) -> subprocess.Popen:
    env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env_extra or {})}
    return subprocess.Popen(
        [sys.executable, "-m", "jaxmem.cli", *map(str, args)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        **kwargs,
    )
