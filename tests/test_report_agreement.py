"""`[[report.agreement]]` on synthetic runs (no training): pairing on everything but the field, the
relative differences, the rtol verdict, the file, and the keys' checks."""

import numpy as np
import pandas as pd
import pytest

from jaxmem.report import write_report
from jaxmem.report.agreement import pairs, relative
from jaxmem.spec.report_tables import Context, read_report
from jaxmem.spec.sweep import stored_report_spec


def runs_frame() -> pd.DataFrame:
    """H × seed × reduced; the reduced path's loss is off by 1e-12 relative, its margin by 1e-6 at H = 4."""
    rows = []
    for H in (1, 4):
        for seed in (0, 1):
            for reduced in (False, True):
                loss = 0.1 * H + seed
                margin = 2.0 + seed
                rows.append(
                    {
                        "run_id": f"{H}{seed}{reduced}",
                        "point": f"{H}{reduced}",
                        "seed": seed,
                        "lr": 1.0,
                        "H": H,
                        "reduced": reduced,
                        "max_metric": 1.0,
                        "success": True,
                        "final_loss": loss * (1 + 1e-12 * reduced),
                        "final_margin": margin * (1 + (1e-6 if reduced and H == 4 else 0.0)),
                    }
                )
    return pd.DataFrame(rows)


def agreement(table: dict):
    (a,) = stored_report_spec({"report": {"agreement": table}}).agreements
    return a


def test_relative_difference():
    assert relative(np.array([1.0, 0.0, -2.0]), np.array([1.1, 0.0, 2.0])).tolist() == pytest.approx([0.1 / 1.1, 0, 2])


def test_runs_pair_on_everything_but_the_field():
    table = pairs(runs_frame(), agreement({"field": "reduced"}))
    assert len(table) == 8 and set(table["metric"]) == {"loss", "margin"}  # 4 pairs × 2 metrics
    margin = table[table["metric"] == "margin"].set_index("seed")
    assert table["reference"].eq(False).all() and table["reduced"].eq(True).all()
    assert margin["rel_diff"].max() == pytest.approx(1e-6, rel=1e-5) and margin["rel_diff"].min() == 0
    loss = table[table["metric"] == "loss"]
    assert loss["rel_diff"].max() == pytest.approx(1e-12, rel=1e-3)


def test_the_report_gives_a_verdict_per_metric(tmp_path):
    table = {"field": "reduced", "rtol": 1e-9, "label": "reduction"}
    write_report(tmp_path, stored_report_spec({"report": {"agreement": table}}), pd.DataFrame(), runs_frame(), {})
    text = (tmp_path / "report.md").read_text()
    assert "### reduction" in text and "reduced = True against reduced = False" in text
    assert "| loss | 4 |" in text and text.count("**PASS**") == 1 and text.count("**FAIL**") == 1
    assert len(pd.read_csv(tmp_path / "agreement.csv")) == 8


def test_keys_are_checked():
    problems: list[str] = []
    context = Context(config=frozenset({"H", "reduced"}), metrics=frozenset({"loss", "margin"}))
    read_report({"agreement": {"field": "reduce", "metrics": ["los"], "rtol": -1}}, problems, context)
    assert problems == [
        "report.agreement[0].field: 'reduce' is not a config field (did you mean 'reduced'?)",
        "report.agreement[0].metrics: 'los' is not a metric of the experiment (did you mean 'loss'?)",
        "report.agreement[0].rtol: must be a number >= 0, got -1",
    ]
