"""NTP sweeps end to end: the separability-threshold search (goal "smallest") against a brute-force
float64 LP scan, the report's reference checks, and the trajectory rates and trends."""

import math

import numpy as np
import pandas as pd
import pytest

from jaxmem.spec import sweep as specmod
from jaxmem.driver.sweep import run_sweep
from jaxmem.plan.buckets import host_run
from jaxmem.experiments.thrampoulidis24 import ntp_linear as nt
from jaxmem.report.trajectory.markdown import rates_section
from jaxmem.report.trajectory.rates import rate_tables
from jaxmem.persistence.store import load_results

SEEDS = [0, 1, 2]
POINT = {"m": 8, "V": 5, "support": 2}


def smallest_separable_d(seed: int) -> int:
    """Brute force on the host: the first d whose instance the HiGHS LP finds NTP-separable."""
    point = nt.EXPERIMENT.complete({**POINT})
    for d in range(1, 4 * POINT["m"]):
        if nt.host_check(host_run(nt.EXPERIMENT, {**point, "d": d}, seed, "d"))["separable"] == 1.0:
            return d
    raise AssertionError("no separable d found")


@pytest.mark.slow  # ~18 s; goal = "smallest" searches are unit-tested in test_search.py
def test_separability_threshold_search_finds_the_smallest_separable_d(tmp_path):
    raw = {
        "experiment": "ntp_linear",
        "seeds": SEEDS,
        "fixed": POINT,
        "train": {"steps": 0, "eval_every": 1, "metric": "separable", "learning_rates": [1.0]},
        "search": {"variable": "d", "goal": "smallest", "lo": "1", "hi": "m", "threshold": 1.0, "resolution": 0.0},
        "engine": {"search_pad_floor": 1.0},
        "report": {"references": True, "x": "m", "fit": "d"},
    }
    out = tmp_path / "out"
    report = run_sweep(specmod.parse(raw, name="tiny_separability"), out, quiet=True)
    searches = load_results(out, "searches").sort_values("seed")
    found = searches["capacity"].astype(int).tolist()
    assert found == [smallest_separable_d(s) for s in SEEDS]
    assert (searches["first_failure"] == searches["capacity"] - 1).all(), "the value just below fails"
    text = report.read_text()
    assert "Smallest d reaching the success threshold" in text
    checked = pd.read_csv(out / "references.csv")
    assert len(checked) == 2 * len(SEEDS)  # both sides of every threshold
    assert (checked["separable"] == checked["engine_separable"]).all()
    assert f"| separable | {len(checked)}/{len(checked)} agree |" in text
    assert (out / "instance.png").stat().st_size > 0


def test_an_instance_failing_the_precondition_is_rejected_and_reported(tmp_path):
    """d = 1 < the separability threshold: the run is recorded untrained and named in the report."""
    raw = {
        "experiment": "ntp_linear",
        "seeds": [0],
        "fixed": POINT,
        "grid": {"d": [1, 12]},
        "train": {"steps": 30, "eval_every": 10, "learning_rates": [1.0]},
    }
    out = tmp_path / "out"
    report = run_sweep(specmod.parse(raw, name="tiny_rejected"), out, quiet=True)
    runs = load_results(out).sort_values("d")
    assert runs["steps_run"].tolist() == [0, 30]
    text = report.read_text()
    assert "## Rejected instances" in text and "1 of 2 runs" in text and "| compatible, separable |" in text


def frame_of(steps, columns: dict) -> pd.DataFrame:
    return pd.DataFrame({"run_id": "r", "step": steps, "point": "p", "seed": 0, "lr": 1.0, **columns})


def test_rates_fit_log_and_power_laws_and_trends_count_moves_against():
    steps = np.array([1, 10, 100, 1000, 2000, 5000, 10000], float)
    cos = np.array([0.1, 0.5, 0.4, 0.8, 0.9, 0.95, 0.97])
    frame = frame_of(steps, {"w": 2.5 * np.log(steps) + 1.0, "gap": 3.0 / steps, "cos": cos, "target": 2.0})
    table = {
        "rates": [
            {"metric": "w", "scale": "log", "predicted": "target", "tolerance": 0.3, "label": "norm"},
            {"metric": "gap", "scale": "loglog", "predicted": "-1", "label": "gap"},
        ],
        "trends": [{"metric": "cos", "direction": "increasing", "label": "cos"}],
    }
    spec = specmod.stored_report_spec({"report": {"trajectory": table}}).trajectory
    runs = pd.DataFrame({"run_id": ["r"], "panel": ["all"], "series": ["all"], "seed": [0]})
    rates, trends = rate_tables(frame, runs, spec)
    norm, gap = rates.set_index("rate").loc["norm"], rates.set_index("rate").loc["gap"]
    assert math.isclose(norm["slope"], 2.5) and math.isclose(norm["ratio"], 1.25) and norm["within"]
    assert norm["from_step"] == 1000 and norm["n"] == 4  # the last decade only
    assert math.isclose(gap["slope"], -1.0) and gap["within"]
    trend = trends.iloc[0]
    assert trend["against"] == 1 and math.isclose(trend["worst"], 0.1) and trend["last"] == 0.97
    text = rates_section(rates, trends, spec)
    assert "| norm | all runs | 1 |" in text and "| cos | all runs | 0/1 | 1 |" in text
