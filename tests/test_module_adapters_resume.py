"""kill -9 and resume for module-built experiments: a threshold-search sweep of the linen Fig 1 memory and of
the equinox ReLU student, SIGKILLed three times (the checkpoints hold the adapters' named parameters), ends
with exactly the rows of the uninterrupted sweep."""

from __future__ import annotations

import multiprocessing
import os
import sys

import pytest

from helpers import ROOT
from test_fault_tolerance import assert_identical, kill_at, start, tables

EXAMPLES = ROOT / "examples"
ENGINE = """
[engine]
max_slots = 4
segment_seconds = 0.05
search_pad_floor = 1.0
record_trajectory = true
"""
SPECS = {
    "linen": """
experiment = "fig1_mlp_linen:EXPERIMENT"
seeds = [0]
[fixed]
d = 4
m = 8
[train]
steps = 128
eval_every = 16
early_stop = 0.99
learning_rates = [1e-2, 3e-2]
[search]
variable = "N"
lo = "d"
hi = "m * d"
threshold = 0.99
resolution = 0.05
probes = 2
""",
    "equinox": """
experiment = "relu_teacher_equinox:EXPERIMENT"
seeds = [0]
[fixed]
d = 3
m = 6
k = 2
n_test = 64
[train]
steps = 128
eval_every = 16
learning_rates = [1e-2, 3e-2]
metric = "test_error"
[success]
at_most = 0.05
counts = "final"
[search]
variable = "n"
goal = "smallest"
lo = "d"
hi = "16 * d"
resolution = 0.1
probes = 2
""",
}


@pytest.fixture(scope="module")
def forkserver(tmp_path_factory):
    """Children forked from a server that has imported jaxmem and both examples (their padding checks done),
    sharing one persistent compilation cache (JAX's, set before the server's first compile): the uninterrupted
    run compiles each program once, the killed and resumed runs load it."""
    cache = tmp_path_factory.mktemp("xla_cache")
    os.environ.update(JAX_COMPILATION_CACHE_DIR=str(cache), JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0")
    if str(EXAMPLES) not in sys.path:
        sys.path.insert(0, str(EXAMPLES))
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(
        ["jaxmem.cli.main", "test_fault_tolerance", "fig1_mlp_linen", "relu_teacher_equinox"]
    )
    yield context, cache
    for name in ("JAX_COMPILATION_CACHE_DIR", "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"):
        os.environ.pop(name)


@pytest.mark.slow  # 17-21 s each on the shared 2-core CPU (the padded = unpadded tests run in the default set)
@pytest.mark.parametrize("framework", ["linen", "equinox"])
def test_a_module_sweep_killed_three_times_resumes_to_the_uninterrupted_rows(tmp_path, forkserver, framework):
    context, cache = forkserver
    spec, log = tmp_path / "sweep.toml", tmp_path / "run.log"
    spec.write_text(SPECS[framework] + ENGINE)
    reference = start(context, tmp_path / "reference", log, cache, spec)
    reference.join(timeout=300)
    assert reference.exitcode == 0, log.read_text()[-3000:]
    expected = tables(tmp_path / "reference")
    total = len(expected["runs"]) + len(expected["trajectories"])
    out = tmp_path / "out"
    landed = [kill_at(start(context, out, log, cache, spec), out, total * k // 4, 0.05) for k in (1, 2, 3)]
    final = start(context, out, log, cache, spec)
    final.join(timeout=300)
    assert final.exitcode == 0, log.read_text()[-3000:]
    assert sum(landed) >= 2, "the sweep finished before the kills"
    assert_identical(out, expected)
    assert "Traceback" not in log.read_text()
