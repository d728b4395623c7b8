"""Evaluation schedules, precision, per-run step budgets and test-time axes ([final_eval]): each
through a whole tiny sweep, as a user runs them (two sweeps, one compile each)."""

from __future__ import annotations

import json
import math

import jax
import numpy as np
import pandas as pd
import pytest

import jaxmem
from jaxmem.engine.program import log_schedule
from jaxmem.persistence.store import load_results
from jaxmem.report.final_eval import stays_from
from jaxmem.spec.sweep import SpecError, parse

MEMORY = {"model": "mlp", "d": 8, "m": 16}


def spec(**sections) -> dict:
    return {"experiment": "assoc_memory", "seeds": [0, 1], "fixed": dict(MEMORY), **sections}


@pytest.fixture(scope="module")
def log_float64(tmp_path_factory):
    """A log schedule of 12 points over 1000 steps, in float64, with trajectories."""
    out = tmp_path_factory.mktemp("log64")
    train = {"steps": 1000, "eval_schedule": "log", "eval_points": 12, "precision": "float64"}
    raw = spec(train={**train, "learning_rates": [3e-2]}, engine={"record_trajectory": True})
    raw["fixed"]["N"] = 24
    jaxmem.run(raw, out)
    return out


@pytest.fixture(scope="module")
def budgets_and_final_eval(tmp_path_factory):
    """Step budgets 10·N + 5 (rounded up to blocks of 16) and test-time N ∈ {4, 8, 24, 40}."""
    out = tmp_path_factory.mktemp("final")
    raw = spec(
        grid={"N": [8, 24]},
        train={"steps": "10 * N + 5", "eval_every": 16, "learning_rates": [3e-2]},
        final_eval={"N": [4, 8, 24, 40]},
        report={"final_eval": {"readoff": {"metric": "loss", "at_most": 7.0}}},
    )
    jaxmem.run(raw, out)
    return out


def test_log_schedule_is_increasing_and_ends_at_the_budget():
    steps = log_schedule(10_000, 60)
    assert steps[0] == 1 and steps[-1] == 10_000 and list(steps) == sorted(set(steps))
    assert 40 <= len(steps) <= 60  # rounding merges the first points
    ratios = np.diff(np.log10(steps[20:]))
    assert np.allclose(ratios, 4 / 59, atol=0.01)  # evenly spaced in log once past the integers


def test_a_log_schedule_evaluates_and_stores_exactly_its_steps(log_float64):
    trajectory = load_results(log_float64, "trajectories")
    for _, run in trajectory.groupby("run_id"):
        assert list(run["step"]) == [0, *log_schedule(1000, 12)]


def test_a_float64_sweep_computes_in_float64_and_restores_the_mode(log_float64):
    losses = [json.loads(m)["loss"] for m in load_results(log_float64, "trajectories")["metrics"]]
    assert any(float(np.float32(v)) != v for v in losses), "every stored loss is a float32 number"
    assert not jax.config.jax_enable_x64


def test_step_budgets_follow_the_expression(budgets_and_final_eval):
    runs = load_results(budgets_and_final_eval)
    assert {(int(r.N), int(r.steps_run)) for r in runs.itertuples()} == {
        (n, math.ceil((10 * n + 5) / 16) * 16) for n in (8, 24)
    }


def test_final_eval_reads_every_point_off_the_trained_run(budgets_and_final_eval):
    table = load_results(budgets_and_final_eval, "final_eval")
    runs = load_results(budgets_and_final_eval).set_index("run_id")
    assert len(table) == 4 * len(runs)
    for run_id, rows in table.groupby("run_id"):
        assert list(rows["N"]) == [4, 8, 24, 40]
        assert (rows["trained_N"] == runs.loc[run_id, "N"]).all()
        own = rows[rows["N"] == runs.loc[run_id, "N"]].iloc[0]  # the run's own value: its final metrics
        final = json.loads(runs.loc[run_id, "final_metrics"])  # (another program: float32 rounding apart)
        np.testing.assert_allclose([own["loss"], own["accuracy"]], [final["loss"], final["accuracy"]], rtol=1e-5)
    assert (budgets_and_final_eval / "final_eval.csv").is_file()
    assert (budgets_and_final_eval / "final_eval.png").is_file()


@pytest.mark.parametrize(
    "sections, complaint",
    [
        ({"train": {"eval_schedule": "cubic"}}, "train.eval_schedule: must be one of"),
        ({"train": {"precision": "float16"}}, "train.precision: must be one of"),
        ({"train": {"eval_schedule": "log", "eval_points": 1}}, "train.eval_points: a log schedule needs"),
        ({"train": {"eval_schedule": "log", "steps": "10 * N"}}, "needs a fixed number of steps"),
        ({"train": {"steps": "10 * N - 1000"}}, "train.steps:"),
        ({"final_eval": {"modle": ["linear"]}}, "final_eval.modle: not a traced or size field"),
        ({"final_eval": {"N": []}}, "final_eval.N: empty list"),
        ({"final_eval": {"N": [0]}}, "final_eval.N: N must be >= 1"),
    ],
)
def test_bad_schedules_budgets_and_axes_are_named(sections, complaint):
    raw = spec(grid={"N": [8, 24]}, **sections)
    with pytest.raises(SpecError) as err:
        parse(raw, name="bad")
    assert complaint in str(err.value)


def test_stays_from_is_the_start_of_the_last_good_stretch():
    xs = np.array([1.0, 2.0, 4.0, 8.0])
    assert stays_from(xs, np.array([0.5, 0.1, 0.3, 0.1]), 0.2, at_most=True) == 8.0  # 4 dips out again
    assert stays_from(xs, np.array([0.1, 0.1, 0.1, 0.1]), 0.2, at_most=True) == 1.0
    assert stays_from(xs, np.array([0.1, 0.1, 0.1, 0.5]), 0.2, at_most=True) == math.inf
    assert stays_from(xs, np.array([0.1, 0.9, 0.95, 0.99]), 0.9, at_most=False) == 2.0


def test_the_report_reads_off_every_curve(budgets_and_final_eval):
    table = load_results(budgets_and_final_eval, "final_eval")
    readoff = pd.read_csv(budgets_and_final_eval / "final_eval_readoff.csv").set_index("run_id")
    for run_id, curve in table.groupby("run_id"):
        expected = stays_from(curve["N"].to_numpy(float), curve["loss"].to_numpy(float), 7.0, at_most=True)
        assert readoff.loc[run_id, "x_star"] == expected
    assert "smallest x with loss ≤ 7 from there on" in (budgets_and_final_eval / "report.md").read_text()


def test_a_traced_searched_variable_shares_one_program(tmp_path):
    """A search over a traced field (ntp_linear's support size) pads nothing: every probe runs in one
    bucket's program."""
    raw = {
        "experiment": "ntp_linear",
        "fixed": {"m": 8, "d": 8, "V": 6},
        "train": {"steps": 32, "eval_every": 32, "learning_rates": [1.0]},
        "search": {"variable": "support", "lo": 1, "hi": 5, "max_expand": 0},
        "success": {"metric": "loss", "at_most": 100.0},
    }
    jaxmem.run(raw, tmp_path)
    searches = load_results(tmp_path, "searches")
    assert len(load_results(tmp_path, "compiles")) == 1
    assert searches["capacity"].tolist() == [5.0] and searches["censored"].tolist() == ["above"]
