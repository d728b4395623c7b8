"""The gradient-flow integrator: θ̇ = −∇L solved by diffrax inside the bucket program."""

import json

import numpy as np
import pytest

import jaxmem
from jaxmem.driver.sweep import run_sweep
from jaxmem.spec.sweep import SpecError, parse


def flow_spec(eval_every: int, steps: int = 40, **train):
    return parse(
        {
            "experiment": "assoc_memory",
            "seeds": [0, 1],
            "fixed": {"model": "linear", "d": 8, "N": 24},
            "train": {
                "steps": steps,
                "eval_every": eval_every,
                "learning_rates": [5.0],  # time units per step: the flow runs to t = 200
                "integrator": "gradient_flow",
                **train,
            },
            "engine": {"record_trajectory": True},
        },
        name="flow",
    )


def trajectory(out):
    rows = jaxmem.load_results(out, "trajectories").sort_values(["run_id", "step"])
    return {run: [json.loads(m) for m in group["metrics"]] for run, group in rows.groupby("run_id")}, rows


@pytest.fixture(scope="module")
def fine(tmp_path_factory):
    out = tmp_path_factory.mktemp("fine")
    run_sweep(flow_spec(eval_every=4), out, quiet=True)
    return out


def test_loss_never_increases_along_gradient_flow_and_the_solver_reports_its_steps(fine):
    curves, rows = trajectory(fine)
    assert len(curves) == 2 and set(rows["step"]) == set(range(0, 41, 4))
    for metrics in curves.values():
        losses = np.array([m["loss"] for m in metrics])
        assert losses[-1] < 0.6 * losses[0]
        assert np.all(np.diff(losses) <= 1e-5 * losses[:-1]), losses  # dL/dt = −‖∇L‖² ≤ 0
        solver = [m["solver_steps"] for m in metrics]
        assert solver[0] == 0 and np.all(np.diff(solver) >= 1)


def test_the_flow_does_not_depend_on_where_evaluations_cut_it(fine, tmp_path):
    run_sweep(flow_spec(eval_every=20), tmp_path / "coarse", quiet=True)
    fine_runs = jaxmem.load_results(fine).set_index("run_id")
    coarse_runs = jaxmem.load_results(tmp_path / "coarse").set_index("run_id")
    np.testing.assert_allclose(coarse_runs["final_loss"], fine_runs.loc[coarse_runs.index, "final_loss"], rtol=1e-3)


def test_bad_integrator_settings_are_spec_errors():
    with pytest.raises(SpecError) as err:
        flow_spec(4, integrator="euler", rtol=0)
    assert "train.integrator: must be one of ['optax', 'gradient_flow']" in str(err.value)
    assert "train.rtol: must be > 0" in str(err.value)
