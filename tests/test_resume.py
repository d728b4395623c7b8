"""Interruptions and devices: whatever happens, the final results equal an uninterrupted run's."""

import signal
import time
from pathlib import Path

import pandas as pd
import pytest

import jaxmem
from helpers import RESULT_COLUMNS, TINY_SPEC, jaxmem_cli
from jaxmem.persistence.progress import inflight
from jaxmem.driver.sweep import EXIT_TERMINATED, run_sweep
from jaxmem.spec.sweep import load


def results(out) -> tuple[pd.DataFrame, pd.DataFrame]:
    runs = jaxmem.load_results(out).set_index("run_id").sort_index()[RESULT_COLUMNS]
    searches = (
        jaxmem.load_results(out, "searches")
        .set_index("unit")
        .sort_index()[["capacity", "first_failure", "rounds", "probes"]]
    )
    return runs, searches


def trajectories(out) -> pd.DataFrame:
    return jaxmem.load_results(out, "trajectories").sort_values(["run_id", "step"]).reset_index(drop=True)


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    out = tmp_path_factory.mktemp("uninterrupted")
    run_sweep(load(TINY_SPEC), out, quiet=True)
    return results(out), trajectories(out)


def wait_for_runs(out, count: int, process, timeout: float = 120.0) -> None:
    """Block until the store holds at least `count` finished runs (or the process ended)."""
    deadline = time.time() + timeout
    while time.time() < deadline and process.poll() is None:
        try:
            if len(jaxmem.load_results(out)) >= count:
                return
        except Exception:  # noqa: BLE001 - the store may not exist yet
            pass
        time.sleep(0.05)


def assert_same(out, uninterrupted):
    runs, searches = results(out)
    (expected_runs, expected_searches), expected_trajectories = uninterrupted
    assert runs.index.is_unique, "a run was stored twice"
    pd.testing.assert_frame_equal(runs, expected_runs)
    pd.testing.assert_frame_equal(searches, expected_searches)
    pd.testing.assert_frame_equal(trajectories(out), expected_trajectories)  # every evaluation, once


@pytest.mark.slow  # ~12 s; kill -9 and resume are also in the default set of test_fault_tolerance.py
def test_kill_9_then_resume_gives_identical_results(tmp_path, uninterrupted):
    out = tmp_path / "killed"
    for finished in (0, 12, 40):  # killed at three points: before any run finished, early, late
        process = jaxmem_cli("run", TINY_SPEC, "--out", out, "--quiet")
        wait_for_runs(out, finished, process)
        if finished == 0:
            time.sleep(4.0)  # mid-compile or mid-segment
        process.kill()
        process.wait()
    assert jaxmem_cli("run", TINY_SPEC, "--out", out, "--quiet").wait() == 0
    assert_same(out, uninterrupted)


def terminate_midway(out, *options: str, signals: int = 1) -> tuple[int, str]:
    """Start the tiny sweep (with CLI `options`), SIGTERM it (`signals` times) once 8 runs are stored; return its
    exit code and output."""
    process = jaxmem_cli("run", TINY_SPEC, "--out", out, "--quiet", *options)
    wait_for_runs(out, 8, process)
    output = ""
    for sent in range(1, signals + 1):
        process.send_signal(signal.SIGTERM)
        while output.count("SIGTERM received") < sent and process.poll() is None:  # wait for it to be noted
            output += process.stdout.readline()
    rest, _ = process.communicate(timeout=120)
    return process.returncode, output + rest


def terminated_with_runs_in_flight(tmp_path, attempts: int = 4) -> Path:
    """`terminate_midway(signals=2)` until its stop leaves runs in flight. The tiny sweep's own segments
    (0.2 s) often finish every run of a round, so a SIGTERM then has nothing to save (0 of 6 stops left
    runs in flight, measured); segments of 0.02 s (one evaluation block) end mid-round (6 of 6)."""
    for attempt in range(attempts):
        out = tmp_path / f"terminated{attempt}"
        code, output = terminate_midway(out, "--set", "engine.segment_seconds=0.02", signals=2)
        assert code == EXIT_TERMINATED, output
        assert output.count("SIGTERM received") == 2 and "rerun the same command to resume" in output
        if inflight(out / "checkpoints", set(jaxmem.load_results(out)["run_id"]))[0]:
            return out
    pytest.fail(f"none of {attempts} SIGTERMs left a run in flight")


def test_sigterm_saves_exits_distinctly_and_resumes(tmp_path, uninterrupted):
    """Pre-emption: SIGTERM, repeated (as a pre-emptor may), still finishes the segment and saves."""
    out = terminated_with_runs_in_flight(tmp_path)
    stored = len(jaxmem.load_results(out))
    resumed = jaxmem_cli("run", TINY_SPEC, "--out", out, "--quiet")
    output, _ = resumed.communicate(timeout=300)
    assert resumed.returncode == 0, output
    assert f"resuming: {stored} runs done" in output and "in-flight runs restored from its checkpoint" in output
    assert len(jaxmem.load_results(out)) > stored
    assert not (out / "checkpoints").exists() or not any((out / "checkpoints").iterdir())
    assert_same(out, uninterrupted)


@pytest.mark.slow  # ~12 s; SIGTERM mid-segment stays in the default set
def test_sigterm_while_compiling_stops_before_the_next_bucket(tmp_path, uninterrupted):
    """A pre-emption notice during the first compile is honoured before the second bucket compiles
    (compiles can take minutes on an accelerator, longer than a grace period)."""
    out = tmp_path / "compiling"
    process = jaxmem_cli("run", TINY_SPEC, "--out", out, "--quiet")
    early = ""
    while "compiling bucket" not in early:
        early += process.stdout.readline()
    process.send_signal(signal.SIGTERM)
    output, _ = process.communicate(timeout=120)
    assert process.returncode == EXIT_TERMINATED, early + output
    assert (early + output).count("compiling bucket") == 1 and "rerun the same command to resume" in output
    assert len(jaxmem.load_results(out)) == 0
    assert jaxmem_cli("run", TINY_SPEC, "--out", out, "--quiet").wait() == 0
    assert_same(out, uninterrupted)


@pytest.mark.slow  # ~14 s; damaged checkpoints are also tested without a sweep (test_fault_tolerance.py)
def test_corrupted_checkpoint_is_detected_and_the_chunk_recomputed(tmp_path, uninterrupted):
    out = terminated_with_runs_in_flight(tmp_path)  # a stop between rounds leaves no checkpoint to damage
    damaged = 0
    for step_dir in (out / "checkpoints").glob("*/*"):
        for file in step_dir.rglob("*"):
            if file.is_file() and file.stat().st_size > 0:
                file.write_bytes(file.read_bytes()[: file.stat().st_size // 2])  # truncate every file
                damaged += 1
    assert damaged
    resumed = jaxmem_cli("run", TINY_SPEC, "--out", out, "--quiet")
    output, _ = resumed.communicate(timeout=300)
    assert resumed.returncode == 0, output
    assert "is unusable" in output
    assert_same(out, uninterrupted)


def test_four_virtual_devices_give_the_same_results_as_one(tmp_path, uninterrupted):
    """Same runs, same outcomes, same searches. XLA compiles the sharded program's arithmetic in a
    slightly different order, so an accuracy may differ by a sample: a run can then reach its early
    stop one evaluation (32 steps) sooner or later (measured: one of 76 runs, 448 against 480 steps)."""
    out = tmp_path / "sharded"
    process = jaxmem_cli(
        "run", TINY_SPEC, "--out", out, "--quiet", env_extra={"XLA_FLAGS": "--xla_force_host_platform_device_count=4"}
    )
    output, _ = process.communicate(timeout=300)
    assert process.returncode == 0, output
    runs, searches = results(out)
    (expected_runs, expected_searches), _ = uninterrupted
    assert set(jaxmem.load_results(out)["device"]) == {"cpu:4"}
    assert runs.index.equals(expected_runs.index)
    pd.testing.assert_frame_equal(searches, expected_searches)
    pd.testing.assert_series_equal(runs["success"], expected_runs["success"])
    assert (runs["steps_run"] - expected_runs["steps_run"]).abs().max() <= 32
    assert (runs["max_metric"] - expected_runs["max_metric"]).abs().max() <= 0.05


@pytest.mark.slow  # two real processes; exit 3 and the message: test_cli_errors.test_locked_output_folder_exits_3
def test_second_run_on_a_folder_in_use_is_refused(tmp_path):
    out = tmp_path / "busy"
    # a budget of minutes, so the first run still holds the folder when the second starts (killed below)
    first = jaxmem_cli("run", TINY_SPEC, "--out", out, "--quiet", "--set", "train.steps=10000000")
    deadline = time.time() + 60
    while not (out / ".lock").exists() and time.time() < deadline:
        time.sleep(0.05)
    second = jaxmem_cli("run", TINY_SPEC, "--out", out, "--quiet")
    output, _ = second.communicate(timeout=60)
    first.kill()
    first.wait()
    assert second.returncode == 3
    assert "in use by another jaxmem run" in output
