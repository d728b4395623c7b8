"""A whole sweep through the public entry points: CLI run, store, report, status, load_results."""

import dataclasses
import math

import jaxmem
from helpers import ROOT, jaxmem_cli
from jaxmem.cli.main import main
from jaxmem.experiments.nichani24 import assoc_memory

HEBBIAN = ROOT / "tests" / "specs" / "tiny_hebbian.toml"


def hebbian_accuracy(d: int, n: int, seed: int = 0) -> float:
    """Accuracy of the Thm 1 construction computed outside the engine (numpy-free JAX, no padding)."""
    import jax

    from jaxmem.plan.buckets import static_shape, traced_values, unpadded
    from jaxmem.plan.runs import make_run, run_key

    config = assoc_memory.EXPERIMENT.complete({"model": "linear", "init": "hebbian", "d": d, "N": n})
    run = make_run({k: v for k, v in config.items() if k != "N"}, seed, 1.0, "N", n, 0)
    shape = static_shape(assoc_memory.EXPERIMENT, config, unpadded)
    dyn = {**traced_values(assoc_memory.EXPERIMENT, config), "lr": 1.0}
    params, problem = assoc_memory.init(run_key(seed, run.problem_index), shape, dyn)
    return float(jax.device_get(assoc_memory.evaluate(params, problem, shape, dyn)["accuracy"]))


def test_hebbian_search_finds_the_exact_capacity_and_reports_it(tmp_path, capsys):
    out = tmp_path / "hebbian"
    process = jaxmem_cli("run", HEBBIAN, "--out", out, "--quiet")
    output, _ = process.communicate(timeout=300)
    assert process.returncode == 0, output
    searches = jaxmem.load_results(out, "searches")
    assert len(searches) == 2 and set(searches["censored"]) == {""}
    for row in searches.itertuples():
        capacity = int(row.capacity)
        # resolution 0: the search stops at hi - lo <= 1, so capacity stores all pairs and capacity + 1 does not
        assert hebbian_accuracy(row.d, capacity) == 1.0
        assert hebbian_accuracy(row.d, int(row.first_failure)) < 1.0
        assert row.first_failure == capacity + 1
        assert math.isclose(row.bits, capacity * math.log2(capacity)) if capacity > 1 else row.bits == 0
    runs = jaxmem.load_results(out)
    assert (runs["steps_run"] == 0).all() and not runs["diverged"].any()
    assert {"report.md", "capacity.csv", "capacity.png", "runs.csv", "results.sqlite"} <= {
        p.name for p in out.iterdir()
    }
    assert (out / "capacity.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    report = (out / "report.md").read_text()
    assert "Slope" in report and "Bits per parameter" in report
    assert main(["status", str(out)]) == 0
    status = capsys.readouterr().out
    assert "2 of 2 searches done" in status and ": finished" in status
    assert not (out / "checkpoints").exists() or not any((out / "checkpoints").iterdir())


def test_one_compile_per_bucket_and_none_while_running(tmp_path, monkeypatch):
    """Programs compile when a bucket is created (in the driver's compile thread, while other buckets
    run); segments, refills and search rounds never recompile (no compile on the driver's thread)."""
    import threading

    import jax.monitoring

    from jaxmem.engine import executor
    from jaxmem.driver.sweep import run_sweep
    from jaxmem.spec.sweep import load
    from helpers import TINY_SPEC

    compiles, during_segments = [], []

    def listener(name, *_a, **_k):
        if "backend_compile" in name and threading.current_thread() is threading.main_thread():
            compiles.append(name)

    jax.monitoring.register_event_duration_secs_listener(listener)
    step = executor.BucketRunner.step

    def watched(self):
        before = len(compiles)
        result = step(self)
        during_segments.append(len(compiles) - before)
        return result

    monkeypatch.setattr(executor.BucketRunner, "step", watched)
    spec = load(TINY_SPEC)
    spec = dataclasses.replace(spec, engine=dataclasses.replace(spec.engine, record_trajectory=True))
    try:
        run_sweep(spec, tmp_path / "out", quiet=True)
    finally:
        jax.monitoring.unregister_event_duration_listener(listener)
    buckets = jaxmem.load_results(tmp_path / "out", "compiles")
    rounds = jaxmem.load_results(tmp_path / "out")["round"].nunique()
    assert len(buckets) == buckets["bucket"].nunique() == 2
    assert rounds >= 3 and len(during_segments) > 2 * rounds
    assert sum(during_segments) == 0, f"recompiled during segments: {during_segments}"
    trajectories = jaxmem.load_results(tmp_path / "out", "trajectories")
    runs = jaxmem.load_results(tmp_path / "out").set_index("run_id")
    assert set(trajectories["run_id"]) == set(runs.index)
    eval_every = spec.train.eval_every
    for run_id, steps in trajectories.groupby("run_id")["step"]:  # every evaluation, once, in order
        assert sorted(steps) == list(range(0, runs.loc[run_id, "steps_run"] + 1, eval_every)), run_id
