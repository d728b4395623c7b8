"""The driver never waits forever: a program that does not return is reported, and SIGTERM stops the run
at any moment (during a segment past its grace, or during a compile), exiting 143 with what is stored kept."""

from __future__ import annotations

import signal
import textwrap
import time

import pytest

from helpers import jaxmem_cli
from jaxmem.driver.sweep import EXIT_TERMINATED
from jaxmem.driver.watchdog import Wait

# A user experiment whose evaluation blocks in a host callback (a segment that never returns), or whose
# init sleeps while it is traced (a compile that takes a minute).
EXPERIMENT = """
import time
import jax, jax.numpy as jnp
from jaxmem.experiments.interface import Experiment, static

def blocked(x):
    time.sleep(3600)
    return x

def init(key, shape, dyn):
    if {slow_trace}:
        time.sleep(60)
    return {{"w": jnp.ones(shape["d"])}}, {{}}

def loss(params, problem, shape, dyn, key):
    return jnp.sum(params["w"] ** 2)

def evaluate(params, problem, shape, dyn):
    value = jnp.sum(params["w"] ** 2)
    if {blocks}:
        value = jax.pure_callback(blocked, jax.ShapeDtypeStruct((), jnp.float32), value)
    return {{"loss": value}}

EXPERIMENT = Experiment(name="stuck", doc="a program that does not return", fields={{"d": static(int, "size", 2)}},
                        init=init, loss=loss, evaluate=evaluate, metrics=("loss",))
"""
SPEC = """
experiment = "stuck_exp:EXPERIMENT"
seeds = [0]
[train]
steps = 4
eval_every = 2
metric = "loss"
learning_rates = [0.1]
"""


def start(tmp_path, blocks: bool, slow_trace: bool):
    (tmp_path / "stuck_exp.py").write_text(textwrap.dedent(EXPERIMENT.format(blocks=blocks, slow_trace=slow_trace)))
    (tmp_path / "stuck.toml").write_text(SPEC)
    env = {"JAXMEM_STALL_AFTER_S": "1", "JAXMEM_COMPILE_CACHE": "0"}
    return jaxmem_cli("run", tmp_path / "stuck.toml", "--out", tmp_path / "out", "--quiet", env_extra=env)


def read_until(process, text: str, timeout: float = 90.0) -> str:
    seen, deadline = "", time.time() + timeout
    while text not in seen and time.time() < deadline and process.poll() is None:
        seen += process.stdout.readline()
    if text not in seen:
        process.kill()  # (its segment would block for an hour after the test failed)
    assert text in seen, seen
    return seen


def test_a_segment_that_never_returns_is_reported_and_sigterm_abandons_it(tmp_path):
    process = start(tmp_path, blocks=True, slow_trace=False)
    early = read_until(process, "slot has not returned after")  # (a slow compile is reported too)
    assert "segment of bucket" in early and "no timing yet" in early
    sent = time.time()
    process.send_signal(signal.SIGTERM)
    output, _ = process.communicate(timeout=60)
    assert process.returncode == EXIT_TERMINATED, early + output
    assert time.time() - sent < 30  # the grace of a segment with no timing is 5 s
    assert "abandoned the segment of bucket" in output and "rerun the same command to resume" in output


def test_sigterm_during_a_long_compile_stops_at_once(tmp_path):
    process = start(tmp_path, blocks=False, slow_trace=True)
    read_until(process, "starting")  # the first compile starts next, in its thread (init sleeps as it is traced)
    time.sleep(2.0)
    sent = time.time()
    process.send_signal(signal.SIGTERM)
    output, _ = process.communicate(timeout=60)
    assert process.returncode == EXIT_TERMINATED, output
    assert time.time() - sent < 15 and "abandoned the compile" in output, output


@pytest.mark.parametrize(
    ("expected", "grace", "stalled_after"), [(None, 5.0, 60.0), (0.1, 5.0, 10.0), (30.0, 60.0, 300.0)]
)
def test_grace_and_stall_limits(expected, grace, stalled_after):
    wait = Wait("segment", expected)
    assert wait.grace() == grace and wait.stalled_after(60.0) == stalled_after
