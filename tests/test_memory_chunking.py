"""Memory-aware chunks: slots bounded by the compiled program's memory, out-of-memory chunks split and retried."""

import re
import dataclasses

import jax
import pandas as pd
import pytest

import jaxmem
from helpers import RESULT_COLUMNS, ROOT, TINY_SPEC
from jaxmem.driver import sweep as driver
from jaxmem.engine import device_memory
from jaxmem.cli.views import dry_run
from jaxmem.engine.executor import BucketRunner, compile_program
from jaxmem.experiments.registry import get as get_experiment
from jaxmem.plan.runs import make_run
from jaxmem.plan.buckets import bucket_of, padder
from jaxmem.engine.program import Settings
from jaxmem.spec.sweep import load
from jaxmem.driver import compiles

MiB = 2**20


@pytest.fixture(scope="module")
def spec(tmp_path_factory):
    """The tiny capacity sweep with 4 slots per program (so that a split has somewhere to go)."""
    path = tmp_path_factory.mktemp("spec") / "tiny_4_slots.toml"
    path.write_text(TINY_SPEC.read_text().replace("[engine]\n", "[engine]\nmax_slots = 4\n"))
    return load(path)


@pytest.fixture(scope="module")
def reference(spec, tmp_path_factory):
    out = tmp_path_factory.mktemp("reference")
    driver.run_sweep(spec, out, quiet=True)
    return results(out)


def results(out) -> tuple[pd.DataFrame, pd.DataFrame]:
    runs = jaxmem.load_results(out).set_index("run_id").sort_index()[RESULT_COLUMNS]
    searches = jaxmem.load_results(out, "searches").set_index("unit").sort_index()
    return runs, searches


def compiled_slots(out) -> dict[str, list[int]]:
    compiles = jaxmem.load_results(out, "compiles")
    return {b: list(group["slots"]) for b, group in compiles.groupby("bucket", sort=False)}


def test_parse_cap_and_fitting_slots():
    assert device_memory.parse_cap("0.5") == 0.5 and device_memory.parse_cap("1") == 1.0
    assert device_memory.parse_cap("12GiB") == 12 * 2**30 and device_memory.parse_cap("500MB") == 500 * 10**6
    for bad in ("0", "1.5", "-1", "lots", "12XB"):
        with pytest.raises(ValueError, match="memory cap"):
            device_memory.parse_cap(bad)
    assert device_memory.fitting_slots(16, peak=10 * MiB, limit=20 * MiB) == 16  # fits
    assert device_memory.fitting_slots(16, peak=40 * MiB, limit=20 * MiB) == 8
    assert device_memory.fitting_slots(16, peak=100 * MiB, limit=20 * MiB) == 2  # 3.2 -> a power of two below
    assert device_memory.fitting_slots(1, peak=100 * MiB, limit=20 * MiB) == 1  # one slot is compiled whatever it needs
    memory = device_memory.device_memory(jax.devices()[0])
    assert device_memory.budget(memory, 0.5) == memory // 2
    assert device_memory.budget(memory, 123 * MiB) == 123 * MiB


def test_out_of_memory_errors_are_recognised():
    assert device_memory.is_out_of_memory(
        jax.errors.JaxRuntimeError("RESOURCE_EXHAUSTED: Out of memory allocating 1GiB")
    )
    assert not device_memory.is_out_of_memory(jax.errors.JaxRuntimeError("INTERNAL: something else"))
    assert not device_memory.is_out_of_memory(ValueError("RESOURCE_EXHAUSTED"))


def test_xla_memory_analysis_grows_with_the_slots():
    exp = get_experiment("assoc_memory")
    run = make_run(exp.complete({"model": "mlp", "d": 8, "m": 16, "N": 100}), 0, 0.01, "N", 100, 0)
    bucket = bucket_of(exp, run.config, padder(2.0))
    settings = Settings(steps=64, eval_every=32, metric="accuracy", hit_threshold=0.99, stop_threshold=0.99)
    small, large = (compile_program(exp, bucket, settings, s, run, jax.devices()[:1]) for s in (2, 16))
    assert 0 < small.peak_bytes < large.peak_bytes


def test_slots_are_bounded_by_the_memory_budget(spec, reference, tmp_path, monkeypatch):
    """Programs that need 1 MiB per slot under a 2.5 MiB budget: each bucket is compiled with 4 slots,
    found over budget by its memory analysis, and recompiled with 2; the results are the same."""
    compile = compiles.compile_program
    monkeypatch.setattr(
        compiles, "compile_program", lambda *a: dataclasses.replace(p := compile(*a), peak_bytes=p.slots * MiB)
    )
    driver.run_sweep(spec, tmp_path, quiet=True, memory_cap=int(2.5 * MiB))
    assert set(map(tuple, compiled_slots(tmp_path).values())) == {(4, 2)}
    runs, searches = results(tmp_path)
    pd.testing.assert_frame_equal(runs, reference[0])
    pd.testing.assert_frame_equal(searches, reference[1])


def test_a_chunk_out_of_memory_is_split_and_its_runs_retried(spec, reference, tmp_path, monkeypatch, capsys, caplog):
    """The second segment of every 4-slot program (runs in flight, checkpointed) fails with XLA's
    out-of-memory error: the bucket is rebuilt with 2 slots and every run still finishes, with the same
    results; the 4-slot checkpoints are dropped, not offered to the 2-slot program as unusable."""
    step, calls = BucketRunner.step, {}

    def flaky(runner):
        calls[runner.bucket.id, runner.n_slots] = calls.get((runner.bucket.id, runner.n_slots), 0) + 1
        if runner.n_slots == 4 and calls[runner.bucket.id, 4] == 2:
            assert runner.occupied, "the failing chunk holds runs in flight"
            runner.checkpoint(force=True)
            raise jax.errors.JaxRuntimeError("RESOURCE_EXHAUSTED: Out of memory while trying to allocate 1.00GiB.")
        return step(runner)

    monkeypatch.setattr(BucketRunner, "step", flaky)
    driver.run_sweep(spec, tmp_path, quiet=True)
    assert set(map(tuple, compiled_slots(tmp_path).values())) == {(4, 2)}
    assert "out of memory with 4 slots" in capsys.readouterr().err
    assert "unusable" not in caplog.text
    runs, searches = results(tmp_path)
    assert runs.index.is_unique
    pd.testing.assert_frame_equal(runs, reference[0])
    pd.testing.assert_frame_equal(searches, reference[1])


def test_a_run_that_never_fits_stops_with_a_clear_error(tmp_path, monkeypatch):
    def always(runner):
        raise jax.errors.JaxRuntimeError("RESOURCE_EXHAUSTED: Out of memory while trying to allocate 1.00GiB.")

    monkeypatch.setattr(BucketRunner, "step", always)
    with pytest.raises(device_memory.OutOfMemory, match="does not fit in device memory with one run per device"):
        driver.run_sweep(load(ROOT / "tests" / "specs" / "tiny_hebbian.toml"), tmp_path, quiet=True)


def test_dry_run_prints_chunks_compiles_flops_and_memory(spec):
    plan = dry_run(spec, verbose=True)
    assert "first round: 32 runs in 2 buckets" in plan and "compiles: 2 now, at most 2 over the sweep" in plan
    assert "memory budget" in plan and "host RAM" in plan
    assert plan.count("chunk(s) of 4 slots (4 per device)") == 2
    assert "FLOPs and times at most" in plan and "memory: the run state and the temporaries the experiment" in plan
    assert "first round: 32 runs," in plan and "sized for this machine" in plan  # the totals and the estimate
    compiled = dry_run(spec, memory_cap=int(2.5 * MiB), compile=True, verbose=True)
    assert len(re.findall(r"FLOPs, [\d.]+ MiB per device$", compiled, re.M)) == 2
    assert "memory: XLA's memory analysis of the compiled" in compiled


def test_a_run_whose_state_alone_is_over_the_budget_is_refused_before_anything_compiles(tmp_path, capsys):
    """Issue 12 item 6: one run's parameters and Adam state (3 × 512² floats = 3 MiB) over a 1 MiB cap:
    --dry-run flags the bucket, `jaxmem run` exits 6 with the estimate and compiles nothing."""
    from jaxmem.cli.main import main

    path = tmp_path / "big.toml"
    path.write_text(
        'experiment = "assoc_memory"\n[fixed]\nmodel = "linear"\nd = 512\nN = 16\n'
        "[train]\nsteps = 32\neval_every = 32\n"
    )
    assert main(["run", str(path), "--dry-run", "--memory-cap", "1MiB"]) == 0
    assert "in 1 bucket(s) (" in (out := capsys.readouterr().out) and "`jaxmem run` refuses them, exit 6" in out
    assert "OVER THE MEMORY BUDGET: bucket" in out
    assert main(["run", str(path), "--memory-cap", "1MiB", "--out", str(tmp_path / "out"), "--quiet"]) == 6
    err = capsys.readouterr().err
    assert "one run's state (parameters, optimizer state, problem) and stated temporaries need 3." in err
    assert "1.0 MiB" in err
    assert jaxmem.load_results(tmp_path / "out", "compiles").empty


def test_slot_counts_read_in_words():
    assert [driver.slots_text(n) for n in (1, 2, 8)] == ["1 slot", "2 slots", "8 slots"]
