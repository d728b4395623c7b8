"""li_thesis ch6_pruning (Fig 6.5, R6.8): the sweep judges R6.8 by the thesis figure's metric, the OOD
classification error; the hinge loss is only drawn beside it, which the report's test-time section draws
(a subset of the metrics) without splitting curves by the metrics it leaves out."""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from jaxmem.report.final_eval import final_eval_sections
from jaxmem.spec import sweep as specmod
from jaxmem.spec.report_tables import FinalEvalSpec

SWEEP = Path(__file__).resolve().parents[1] / "sweeps" / "li_thesis" / "ch6_pruning.toml"


@pytest.mark.parametrize("preset", ["quick", "paper"])
def test_r6_8_is_judged_by_the_ood_classification_error(preset):
    final_eval = specmod.load(SWEEP, preset).report.final_eval
    assert final_eval.x == "prune_rate"
    assert final_eval.readoffs and {r.metric for r in final_eval.readoffs} == {"ood_error"}
    assert final_eval.metrics[0] == "ood_error" and "ood_hinge" in final_eval.metrics[1:]


def test_a_drawn_subset_of_metrics_keeps_one_curve_per_setting(tmp_path):
    """[report.final_eval] metrics draws some metrics: the others (which vary from row to row) must not
    split the curves (they did: one legend entry per row, and a legend too tall to draw raised)."""
    rng = np.random.default_rng(0)
    rows = [
        {"run_id": f"r{run}", "seed": run, "lr": 1.0, "prune_order": order, "prune_rate": rate}
        | {"ood_error": rate * (order == "large"), "ood_hinge": rng.uniform()}
        for run in range(40)
        for order in ("small", "large")
        for rate in (0.0, 0.5, 0.9)
    ]
    spec = FinalEvalSpec(x="prune_rate", metrics=("ood_error",))
    written = []
    sections = final_eval_sections(
        tmp_path, spec, pd.DataFrame(rows), ["prune_order", "prune_rate"], ["ood_error", "ood_hinge"], written
    )
    assert tmp_path / "final_eval.png" in written and sections[0] == "## Test-time axes"
