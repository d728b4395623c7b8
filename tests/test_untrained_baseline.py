"""The untrained baseline: every finished run keeps the metrics of its untrained model (its parameters at
initialisation, evaluated at step 0; at the test-time points too), stored as `untrained_<metric>`, and
report.md shows them beside the trained values of the judged metric."""

from __future__ import annotations

import json

import jax
import numpy as np
import pandas as pd
import pytest

import jaxmem
from helpers import EXP, run_program
from jaxmem.engine.executor import BucketRunner, compile_program
from jaxmem.engine.program import Settings
from jaxmem.persistence.store import load_results
from jaxmem.plan.buckets import bucket_of, padder, static_shape, traced_values
from jaxmem.plan.runs import make_run, run_key
from jaxmem.report import write_report
from jaxmem.report.final_eval import compare_section, split_untrained, untrained_section
from jaxmem.report.verdicts import stating
from jaxmem.spec.sweep import stored_report_spec

LINEAR = {"model": "linear", "d": 8, "N": 30}
EXACT = lambda n, *_: n  # noqa: E731
BIG = lambda n, *_: 2 * n + 3  # noqa: E731 - every size padded, by an awkward amount


def untrained_evaluation(config: dict, seed: int, problem_index: int) -> dict:
    """The experiment's metrics of `init`'s parameters, evaluated directly (unpadded, outside the engine)."""
    full = EXP.effective(config)
    shape = static_shape(EXP, full, EXACT)
    dyn = {k: np.asarray(v) for k, v in traced_values(EXP, full).items()}

    @jax.jit
    def evaluate():
        params, problem = EXP.init(run_key(seed, problem_index), shape, dyn)
        return EXP.evaluate(params, problem, shape, dyn)

    return {k: float(v) for k, v in evaluate().items()}


def test_the_untrained_metrics_of_a_padded_run_are_the_unpadded_inits_evaluation():
    padded = run_program([LINEAR], BIG, 2, 16, [1e-1], stop=2.0)  # run_program: seed 0, problem index 5
    direct = untrained_evaluation(LINEAR, 0, 5)
    assert set(padded.untrained) == set(direct) == set(EXP.metrics)
    for metric, value in direct.items():
        np.testing.assert_allclose(float(padded.untrained[metric][0]), value, rtol=1e-6, atol=1e-7, err_msg=metric)
    assert float(padded.last["loss"][0]) < 0.9 * direct["loss"], "16 steps trained nothing: a weak test"


def test_a_restored_bucket_hands_back_the_untrained_metrics_of_its_first_segment(tmp_path):
    """The checkpoint carries them: a run restored mid-training finishes with the metrics of its own
    initialisation, bit for bit."""
    runs = [make_run(EXP.complete(LINEAR), seed, 0.1, None, None, 0) for seed in (0, 1)]
    bucket = bucket_of(EXP, runs[0].config, padder(2.0))
    settings = Settings(steps=64, eval_every=8, metric="accuracy", hit_threshold=0.99, stop_threshold=2.0)
    program = compile_program(EXP, bucket, settings, 2, runs[0], jax.devices()[:1])
    lookup = {r.run_id: r for r in runs}.get
    first = BucketRunner(EXP, bucket, settings, program, runs[0], tmp_path, lookup)
    for run in runs:
        first.enqueue(run)
    assert first.step()[0] == []  # one block of 8 steps: nothing finished yet
    first.checkpoint(force=True)
    untrained = jax.device_get(first.state.untrained)
    first.close()

    restored = BucketRunner(EXP, bucket, settings, program, runs[0], tmp_path, lookup)
    finished = []
    while restored.has_work():
        finished += restored.step()[0]
    restored.close(remove_checkpoints=True)
    assert sorted(f.run.run_id for f in finished) == sorted(r.run_id for r in runs)
    for f in finished:
        slot = [r.run_id for r in runs].index(f.run.run_id)
        assert f.untrained == {k: float(v[slot]) for k, v in untrained.items()}
        direct = untrained_evaluation(LINEAR, f.run.seed, f.run.problem_index)
        np.testing.assert_allclose(f.untrained["loss"], direct["loss"], rtol=1e-6)


@pytest.fixture(scope="module")
def trained_sweep(tmp_path_factory):
    """A grid over N with test-time N, trajectories, a heatmap and a read-off (one compile)."""
    out = tmp_path_factory.mktemp("untrained")
    jaxmem.run(
        {
            "experiment": "assoc_memory",
            "seeds": [0, 1],
            "fixed": {"model": "linear", "d": 8},
            "grid": {"N": [8, 24]},
            "train": {"steps": 32, "eval_every": 16, "learning_rates": [1e-1]},
            "success": {"metric": "accuracy", "at_least": 0.9},
            "final_eval": {"N": [4, 8, 24]},
            "engine": {"record_trajectory": True},
            "report": {
                "heatmap": {"x": "N", "y": "d", "metric": "max_metric"},
                "final_eval": {"readoff": {"metric": "loss", "at_most": 1.0}},
            },
        },
        out,
    )
    return out


def test_every_stored_run_holds_its_untrained_metrics(trained_sweep):
    """Equal to the run's step-0 evaluation (its first trajectory point), and at the test-time point of
    its own N to its untrained metrics."""
    runs = load_results(trained_sweep, expand=False)
    steps = load_results(trained_sweep, "trajectories")
    at_points = load_results(trained_sweep, "final_eval").set_index(["run_id", "N"])
    assert len(runs) == 4
    for run in runs.itertuples():
        stored = json.loads(run.final_metrics)
        untrained = {m: stored[f"untrained_{m}"] for m in EXP.metrics}
        start = steps[(steps["run_id"] == run.run_id) & (steps["step"] == 0)]["metrics"].iloc[0]
        assert untrained == {m: json.loads(start)[m] for m in EXP.metrics}
        own = at_points.loc[(run.run_id, json.loads(run.config)["N"])]
        for metric, value in untrained.items():
            assert own[f"untrained_{metric}"] == pytest.approx(value, rel=1e-6, abs=1e-7), metric
        assert own["loss"] < own["untrained_loss"], "training did not lower the loss: a weak test"


def test_report_shows_the_untrained_model_beside_the_trained_one(trained_sweep):
    text = (trained_sweep / "report.md").read_text()
    grid = text.split("## Grid points", 1)[1]
    assert "| max accuracy | untrained accuracy | final accuracy |" in grid
    assert "### Untrained model" in text and "reach the threshold without training" in text
    baseline = text.split("### Untrained baseline", 1)[1]
    assert "trained / untrained" in baseline and "| setting | loss |" in baseline
    assert "untrained x* median" in text
    assert "| loss: untrained → last |" in text
    readoff = pd.read_csv(trained_sweep / "final_eval_readoff.csv")
    assert readoff["untrained_x_star"].notna().all()
    runs = pd.read_csv(trained_sweep / "runs.csv")
    assert {f"untrained_{m}" for m in EXP.metrics} <= set(runs.columns)


def test_metrics_at_capacity_show_the_untrained_judged_metric(tmp_path):
    from test_heatmap_report import search_and_runs

    searches, runs = search_and_runs()
    runs["untrained_accuracy"] = 0.25
    runs["untrained_loss"] = 2.0
    write_report(tmp_path, stored_report_spec({"report": {}, "train": {}}), searches, runs, {}, {"metric": "accuracy"})
    text = (tmp_path / "report.md").read_text()
    assert "| params | N (mean) | searches | max accuracy | untrained accuracy | final accuracy | final loss |" in text
    assert "| 128 | 50 | 2 | 1.0000 | 0.2500 | 1.0000 | 0.5100 |" in text


def test_the_untrained_baseline_of_a_text_axis_and_of_task_properties():
    """A text test-time axis is read at its last value in sorted order; a metric the parameters do not
    change (equal trained and untrained everywhere) is named, not tabulated."""
    frame = pd.DataFrame(
        {
            "run_id": ["a"] * 4,
            "seed": 0,
            "lr": 1.0,
            "distractors": ["random", "sink"] * 2,
            "l_ts": [1, 1, 32, 32],
            "icl_error": [0.5, 0.6, 0.1, 0.2],
            "untrained_icl_error": [0.5, 0.7, 0.4, 0.3],
            "share": [1.0, 0.0, 1.0, 0.0],
            "untrained_share": [1.0, 0.0, 1.0, 0.0],
        }
    )
    trained, untrained = split_untrained(frame)
    text = untrained_section(trained, untrained, "distractors", ["icl_error", "share"], ["l_ts"])
    assert "at the largest distractors (sink)" in text and "a property of the test tasks: share." in text
    assert "| l_ts=1 | 0.600 / 0.700 |" in text and "| l_ts=32 | 0.200 / 0.300 |" in text


def test_lowered_judges_the_paired_differences_of_trained_and_untrained_per_setting():
    """`lowered` (a comparison with untrained_<metric>): at the largest l_ts, per alpha_test, trained − untrained
    over three runs: below 0 beyond its interval at alpha_test = 0.4 (PASS), above 0 at 1.0 (FAIL, as ch7_lts
    quick at α′ = 1), across 0 at 0.7; `compare` against a number at the smallest l_ts, where kept."""
    rows = []
    differences = {0.4: (-0.3, -0.31, -0.29), 0.7: (-0.1, 0.1, 0.0), 1.0: (0.02, 0.015, 0.025)}
    for alpha, deltas in differences.items():
        for seed, delta in enumerate(deltas):
            for l_ts, error in ((8, 0.5), (16, 0.4)):
                row = {"run_id": f"r{seed}", "seed": seed, "lr": 1.0, "alpha_test": alpha, "l_ts": l_ts}
                rows.append({**row, "icl_error": error + delta, "untrained_icl_error": error})
    frame = pd.DataFrame(rows)
    spec = stored_report_spec({"report": {"final_eval": {"lowered": ["icl_error"]}}}).final_eval
    with stating() as claims:
        text = compare_section(frame, "l_ts", spec.comparisons[0], ["alpha_test"])
    assert [c.verdict.outcome for c in claims] == ["PASS", "INCONCLUSIVE", "FAIL"]
    assert claims[0].measured == pytest.approx(-0.3) and claims[0].interval[1] < 0 < claims[2].interval[0]
    assert "At the largest l_ts (16)" in text and "| alpha_test=1.0 | 0.420 / 0.400 |" in text
    above = {"metric": "icl_error", "above": 0.45, "at": "smallest", "where": {"alpha_test": [0.4, 1.0]}}
    compared = stored_report_spec({"report": {"final_eval": {"compare": above}}}).final_eval.comparisons
    with stating() as claims:
        text = compare_section(frame, "l_ts", compared[0], ["alpha_test"])
    assert [c.verdict.outcome for c in claims] == ["FAIL", "PASS"]  # at l_ts 8: 0.2 (0.4) and 0.52 (1.0)
    assert "At the smallest l_ts (8)" in text and "icl_error > 0.45" in text


def test_a_comparison_whose_where_keeps_no_run_is_not_testable_here():
    frame = pd.DataFrame([{"run_id": "r0", "seed": 0, "alpha_test": 0.4, "l_ts": 8, "icl_error": 0.5}])
    above = {"metric": "icl_error", "above": 0.45, "where": {"alpha_test": [0.9]}}
    compared = stored_report_spec({"report": {"final_eval": {"compare": above}}}).final_eval.comparisons
    with stating() as claims:
        text = compare_section(frame, "l_ts", compared[0], ["alpha_test"])
    assert [c.verdict.outcome for c in claims] == ["not testable here"] and "no run with a l_ts value" in text
