"""The benchmark suite's workloads stay valid specs, and its tables render (no timing, nothing compiled)."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import baselines as B  # noqa: E402
import bench_suite as S  # noqa: E402
import common as C  # noqa: E402

from jaxmem.experiments.registry import get as get_experiment  # noqa: E402


@pytest.mark.parametrize("name", list(S.FAMILIES))
def test_every_family_is_a_valid_sweep_of_alike_runs(name):
    family = S.FAMILIES[name]
    for f in (family, family.quick()):
        spec = f.spec()
        exp = get_experiment(spec.experiment)
        runs = B.runs_from_spec(spec, exp)
        grid = 1
        for values in f.grid.values():
            grid *= len(values)
        assert len(runs) == f.seeds * len(f.learning_rates) * grid
        assert spec.train.early_stop is None  # same work for every method
        assert f.steps % f.eval_every == 0
        assert len({B.unpadded(exp, r)[1] for r in runs}) == 1  # one shape: (b) and (c) compile once
        assert not f.steps or B.flops_per_step(exp, runs[0].config) > 0  # useful GFLOP/s has a numerator


def test_every_shipped_experiment_has_a_family():
    from jaxmem.experiments.registry import SHIPPED as EXPERIMENTS

    assert set(EXPERIMENTS) == set(S.FAMILIES)


def test_md_table_aligns_columns_named_with_a_colon():
    assert C.md_table(["a", "b:"], [[1, 2]]) == ["| a | b |", "| --- | ---: |", "| 1 | 2 |", ""]


def _timed(name, runs, run_s, segments_s=None, slots=1):
    return S.Timed(name, runs, 1, 2.0, run_s, 0.5 * runs, 0.0, 3.0, segments_s or run_s, slots)


def test_the_report_renders_every_table_from_measurements():
    import argparse
    import types

    family = S.FAMILIES["assoc_memory"]
    engine = types.SimpleNamespace(parts={C.SEGMENTS: 0.8, "checkpoints": 0.1})
    methods = [_timed("(a) jaxmem run_sweep", 8, 1.0, 0.8, 2), _timed("(b) per-run jit", 8, 2.0), _timed("(c)", 8, 3.0)]
    result = {
        "family": family,
        "methods": methods,
        "engine": engine,
        "padding": 1.0,
        "flops_per_step": 1e6,
        "agreement": {"(b)": 0.0, "(c)": 0.0},
    }
    scaling = S.QUICK_SCALING
    cells = [
        {"N": n, "mode": mode, "timed": _timed("(a)", r, 0.1 * r + 0.2, 0.1 * r, r)}
        for n in scaling.sizes
        for r in scaling.runs
        for mode in ("one program", "default slots")
    ] + [{"N": n, "mode": "(b)", "timed": _timed("(b)", 4, 0.5)} for n in scaling.sizes]
    args = argparse.Namespace(quick=True)
    cpu = {"usable cores": 2, "device": "cpu x1 (cpu)"}
    text = S.render(cpu, [(0.1, 0.2, 0.3)] * 2, 100.0, [result], cells, scaling, args, 1.0)
    for heading in ("## Machine", "### assoc_memory", "## Scaling", "## Reading the tables"):
        assert heading in text
    assert "(b) takes 2.00× and (c) 3.00× jaxmem's run time" in text
    largest = max(scaling.runs)  # (b): 0.5 s for 4 runs; one program: 0.1·R + 0.2 s for R runs
    per_run = 1e3 * (0.1 * largest + 0.2) / largest
    assert f"Wall time per run at R = {largest}: {per_run:.2f} ms against (b)'s 125.00 ms" in text
    assert "keeps the 2-core CPU busy" in text
    gpu = S.render({**cpu, "device": "gpu x1 (NVIDIA H200)"}, [(0.1,) * 3] * 2, 1e5, [result], cells, scaling, args, 1)
    assert "On the GPU (NVIDIA H200)" in gpu and "CPU" not in gpu.split("## Reading the tables")[1]
