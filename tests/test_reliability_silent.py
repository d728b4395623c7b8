"""Issue 36, nothing silently wrong: compare, load_results and status refuse what the store refuses; errors
and advice name what is true."""

import contextlib
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time

import pytest

from helpers import cli as call, ROOT
from jaxmem.driver import sweep as driver
from jaxmem.persistence.store import FILENAME, Store, StoreError, load_results
from jaxmem.spec.sweep import load

SPEC = ROOT / "tests" / "specs" / "tiny_linear.toml"
RUN = {"run_id": "r0", "point": "p0", "seed": 0, "lr": 0.3, "config": "{}", "bucket": "b", "diverged": 0, "success": 1}


@pytest.fixture
def out(tmp_path):
    """A store holding one run with two trajectory points."""
    return stored(tmp_path / "out", {"accuracy": 0.75})


def stored(folder, last_point: dict):
    """`folder` with a store holding one run of the sweep SPEC, `last_point` its second trajectory point."""
    folder.mkdir()
    store = Store(folder)
    driver.claim(store, load(SPEC))
    store.add_runs([RUN], [("r0", 8, {"accuracy": 0.5}), ("r0", 16, last_point)])
    store.close()
    return folder


def edit(out, *statements: str) -> None:
    """Change the file behind jaxmem's back (as the sqlite3 shell does: no checksum function)."""
    with contextlib.closing(sqlite3.connect(out / FILENAME)) as db, db:
        for sql in statements:
            db.execute(sql)


def test_compare_refuses_a_store_whose_trajectory_row_fails_its_checksum(out, tmp_path, capsys):
    """It said 'results agree': the trajectories table was neither checked nor compared."""
    copy = shutil.copytree(out, tmp_path / "copy")
    edit(copy, "UPDATE trajectories SET metrics = '{\"accuracy\": 1.0}' WHERE step = 16")
    code, stdout, stderr = call(capsys, "compare", out, copy)
    assert (code, stdout) == (4, "") and "rows failing their checksum: 1 in trajectories" in stderr


def test_compare_shows_where_trajectories_differ(out, tmp_path, capsys):
    code, stdout, _ = call(capsys, "compare", out, stored(tmp_path / "other", {"accuracy": 0.25}))
    assert code == 1 and "trajectories: 0 only in the first, 0 only in the second, 2 in both" in stdout
    assert "accuracy differs in 1: ('r0', 16): 0.75 vs 0.25" in stdout


def test_load_results_refuses_a_store_that_lost_rows_of_another_table(out, capsys):
    """It returned the runs of a store whose meta lost a row, which status and report refuse."""
    edit(out, "DELETE FROM meta WHERE key = 'preset'")
    lost = f"results file {out / FILENAME} has lost rows of table meta"
    with pytest.raises(StoreError, match=lost):
        load_results(out)
    assert call(capsys, "status", out)[2].startswith(f"jaxmem: error: {lost}")


def test_status_advises_for_a_dropped_table_what_the_run_then_does(out, capsys):
    """It advised `jaxmem run` ('adds the tables'), which then refused the lost trajectories (exit 4)."""
    edit(out, "DROP TABLE trajectories")
    code, _, stderr = call(capsys, "status", out)
    assert code == 4 and "has lost rows of table trajectories (0 stored, 2 written)" in stderr
    with pytest.raises(StoreError, match=r"lost rows of table trajectories \(0 stored, 2 written\)"):
        Store(out)


def test_a_dropped_table_that_held_no_rows_is_added_by_the_run_status_advises(out, capsys):
    edit(out, "DROP TABLE final_eval")
    assert "`jaxmem run` on this folder adds the tables" in call(capsys, "status", out)[2]
    Store(out).close()
    assert call(capsys, "status", out)[0] == 0


STOPPED_COMPILE = """
import time
import jax
from jaxmem.engine.executor import compile_program
from jaxmem.engine.program import Settings
from jaxmem.experiments.registry import get
from jaxmem.plan.buckets import bucket_of, padder
from jaxmem.plan.runs import make_run

compile = jax.stages.Lowered.compile
def announced(lowered, *args, **kwargs):  # the parent stops this process once it reads the line
    print("compiling", flush=True)
    time.sleep(0.2)
    return compile(lowered, *args, **kwargs)
jax.stages.Lowered.compile = announced
exp = get("assoc_memory")
run = make_run(exp.complete({"model": "linear", "d": 4, "N": 8}), 0, 0.1, None, None, 0)
settings = Settings(steps=8, eval_every=8, metric="accuracy", hit_threshold=0.99, stop_threshold=2.0)
start = time.monotonic()
program = compile_program(exp, bucket_of(exp, run.config, padder(2.0)), settings, 2, run, jax.devices()[:1])
print(time.monotonic() - start, program.seconds)
"""


STOPPED_CLOCK = """
import time
from jaxmem.engine.running_clock import running
start, wall = running(), time.monotonic()
print("compiling", flush=True)
time.sleep(2.5)
print(time.monotonic() - wall, running() - start)
"""


def stopped(program: str) -> tuple[float, float]:
    """(wall seconds, seconds on the running clock) that `program` prints after being stopped for 2 s once it
    prints "compiling"."""
    child = subprocess.Popen([sys.executable, "-c", program], stdout=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        assert child.stdout.readline() == "compiling\n"
        os.kill(child.pid, signal.SIGSTOP)
        time.sleep(2.0)
        os.kill(child.pid, signal.SIGCONT)
        return tuple(map(float, child.stdout.readline().split()))
    finally:
        child.kill()
        child.wait()


def test_the_running_clock_leaves_out_the_time_the_process_was_stopped():
    """The clock a compile is timed with (jaxmem.engine.running_clock): 2 s stopped inside a 2.5 s sleep count
    on the monotonic clock, not on the running one."""
    wall, seconds = stopped(STOPPED_CLOCK)
    assert wall >= 2.0 and 0 < seconds < wall - 1.5


@pytest.mark.slow
def test_a_compile_stopped_by_sigstop_leaves_the_stopped_time_out():
    """`jaxmem status` counted the time a process was stopped during a compile as compile time."""
    wall, seconds = stopped(STOPPED_COMPILE)
    assert wall >= 2.0 and 0 < seconds < wall - 1.5


def test_the_dry_runs_peak_memory_is_never_zero(capsys):
    """It said 'peak memory per device: 0.0 MiB' beside a bucket over the budget (the largest of none that
    fit), and for a bucket of a few KiB."""
    over = ["--memory-cap", "1MiB", "--set", "fixed.d=512", "--set", "fixed.N=512"]
    for extra, peak in (([], "9.9 KiB (bucket "), (over, "over the budget of 1.0 MiB in 1 bucket(s) (")):
        code, stdout, _ = call(capsys, "run", SPEC, "--dry-run", *extra)
        assert code == 0 and f"peak memory per device: {peak}" in stdout
    assert "; none fits" in stdout
