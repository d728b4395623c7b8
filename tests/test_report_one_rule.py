"""One rule for every verdict (jaxmem.report.verdicts): a PASS needs an interval inside the claim's band
from 3 or more distinct x (or the stated minimum), a check with nothing to judge is "not testable here",
one claim gets one verdict (the rest are diagnostics), and every verdict is recorded in verdicts.json.
Synthetic frames, no training; each test failed on the code before."""

import json

import numpy as np
import pandas as pd

from jaxmem.report import write_report

from jaxmem.report.capacity.linear import linear_section
from jaxmem.report.capacity.ratio import ratio_summary
from jaxmem.report.final_eval import idle_axes, readoff_section, readoff_summary, readoff_table
from jaxmem.report.grid.markdown import boundary_text, floor_text
from jaxmem.report.grid.tradeoff import analyse
from jaxmem.report.partial import VERDICT
from jaxmem.report.relations import expectations, relation_rows, summarise
from jaxmem.report.trajectory.escape import escape_verdict, fit_line
from jaxmem.report.trajectory.markdown import escape_claim
from jaxmem.report.verdicts import stating
from jaxmem.spec.report_tables import Readoff
from jaxmem.spec.sweep import stored_report_spec

READOFF = Readoff("id_error", True, 0.01, "alpha_test", "minimal l_ts (R6.4)", (-1.3, -0.7))


def readoff_lines(medians: dict[float, float]) -> list[str]:
    """The verdict lines of a read-off whose x* per α' is `medians` (three seeds alike)."""
    table = pd.DataFrame(
        [{"run_id": f"{a}-{s}", "seed": s, "alpha_test": a, "x_star": v} for a, v in medians.items() for s in range(3)]
    )
    summary, slopes = readoff_summary(table, READOFF, ["alpha_test"])
    return [line for line in readoff_section(table, summary, slopes, READOFF, "l_ts").splitlines() if "slope" in line]


def test_a_flat_then_drop_readoff_on_three_points_does_not_pass():
    """x* = 8, 8, 2 at α' = 0.25, 0.5, 1: slope −1.0, inside [−1.3, −0.7], was "(expected [-1.3, -0.7]: PASS)"."""
    (line,) = readoff_lines({0.25: 8, 0.5: 8, 1.0: 2})
    assert line == (
        "- all runs: slope of ln x* against ln alpha_test = -1.000 ± 0.577 (95 % CI [-8.336, 6.336]) over 3 finite "
        "medians; expected in [-1.3, -0.7]: **INCONCLUSIVE** (slope CI [-8.336, 6.336] crosses -1.3 and -0.7)"
    )


def test_a_five_point_readoff_whose_interval_crosses_the_band_is_inconclusive():
    """R6.4-like: slope −1.25 over 5 medians, its 95 % interval [−1.79, −0.71] reaching past −1.3 (was PASS on
    the point estimate)."""
    alphas = np.array([0.2, 0.4, 0.6, 0.8, 1.0])
    (line,) = readoff_lines(dict(zip(alphas, 2.0 * alphas**-1.2 * np.array([1.0, 1.25, 0.8, 1.2, 0.9]))))
    assert line.endswith(
        "= -1.250 ± 0.169 (95 % CI [-1.788, -0.7118]) over 5 finite medians; expected in [-1.3, -0.7]: "
        "**INCONCLUSIVE** (slope CI [-1.788, -0.7118] crosses -1.3)"
    )
    (clean,) = readoff_lines(dict(zip(alphas, 2.0 * alphas**-1.0 * np.array([1.0, 1.01, 0.99, 1.0, 1.01]))))
    assert clean.endswith("expected in [-1.3, -0.7]: **PASS**")


def test_a_readoff_equal_along_a_test_time_axis_is_listed_once():
    """The in-domain error does not depend on the OOD noise: one read-off per run, not one per K'."""
    rows = []
    for run, alpha in [(run, alpha) for run in range(2) for alpha in (0.2, 0.4, 0.6)]:
        for l_ts in (1, 2, 4, 8):
            for noise in (0.5, 5.0):
                ood = 1.0 / (l_ts * alpha) + noise
                rows.append({"run_id": f"r{run}", "seed": 0, "lr": 1.0, "alpha_test": alpha, "l_ts": l_ts})
                rows[-1].update(ood_noise=noise, id_error=1.0 / (l_ts * alpha), ood_error=ood)
    frame = pd.DataFrame(rows)
    axes, metrics = ["alpha_test", "l_ts", "ood_noise"], ["id_error", "ood_error"]
    assert idle_axes(frame, "l_ts", "id_error", axes) == ["ood_noise"]
    assert idle_axes(frame, "l_ts", "ood_error", axes) == []
    table = readoff_table(frame, "l_ts", READOFF, axes, metrics, ["ood_noise"])
    assert len(table) == 6 and "ood_noise" not in table  # was 12 rows, each result twice


# -- heatmap checks: "not testable here" with nothing to judge, else a verdict, never a bold yes / no ------


def heatmap_checks(values: dict[tuple[float, float], float]) -> list[str]:
    """The floor and boundary lines of a heatmap of c_bias over (d, k) whose threshold is at most 0.46."""
    spec = stored_report_spec({"report": {"heatmap": {"x": "d", "y": "k", "threshold": 0.46, "better": "min"}}}).heatmap
    cells = pd.DataFrame([{"x": x, "y": y, "c": v} for (x, y), v in values.items()])
    analysis = analyse(cells.assign(reaches=spec.reaches(cells["c"])))
    text = floor_text(spec, analysis["floor"], "c", analysis["floor_verdict"]) + "\n" + boundary_text(spec, analysis)
    return [line for line in text.splitlines() if VERDICT.search(line)]


def test_a_heatmap_with_no_cell_at_its_threshold_is_not_testable_here():
    """e1_phase1_bias: c_bias 0.462–0.497, no cell at or below 0.46 (was "never rises: **yes**")."""
    lines = heatmap_checks({(d, k): 0.47 + 0.001 * d for d in (8, 16, 32) for k in (1, 2, 4)})
    assert [line.split(": ")[-1] for line in lines] == [
        "**not testable here** (no x reaches the threshold at the largest y)",
        "**not testable here** (no cell reaches the threshold)",
        "**not testable here** (no cell reaches the threshold)",
    ]


def test_a_heatmap_over_one_x_is_not_testable_and_over_two_inconclusive():
    """ch4_error_n: a single d (was "never rises: **yes**"); two x cannot decide a trend either."""
    one = heatmap_checks({(8, k): 0.4 for k in (1, 2, 4)})
    assert all("**not testable here** (" in line for line in one) and any("(a single x value)" in line for line in one)
    two = heatmap_checks({(d, k): 0.4 if d == 8 else 0.5 for d in (4, 8) for k in (1, 2, 4)})
    assert [line.split(": ")[-1] for line in two] == ["**INCONCLUSIVE** (2 distinct x values)"] * 3
    boundaries = heatmap_checks({(d, k): 0.4 if d < 16 and k >= 2 else 0.5 for d in (4, 8, 16) for k in (1, 2, 4)})
    assert "**INCONCLUSIVE** (2 x values with a boundary)" in boundaries[-1]
    three = heatmap_checks({(d, k): 0.4 if k >= 64 / d else 0.5 for d in (4, 8, 16, 32) for k in (1, 2, 4, 8)})
    assert [line.split(": ")[-1].split(" (")[0] for line in three] == ["**PASS**"] * 3


# -- a stated minimum of points: the escape-time law and the ratio in range --------------------------------


def escape_row(x: list[float], y: list[float], predicted: float) -> dict:
    row = {"crossing": "relation learned", "predicted": predicted, **fit_line(x, y)}
    row["ratio"] = row["slope"] / predicted
    verdict = escape_verdict(row, 0.1)
    return {**row, "verdict": verdict.outcome, "reason": verdict.reason}


def test_an_escape_law_on_two_runs_is_inconclusive_and_written_bold():
    """Two runs lie on their line exactly: slope = predicted, no standard error (was "| PASS |", which the
    partial-sweep pattern and the gallery missed)."""
    two = escape_row([1.0, 2.0], [10.0, 20.0], 10.0)
    assert (two["verdict"], two["reason"]) == ("INCONCLUSIVE", "2 distinct x values")
    assert VERDICT.search(escape_claim(two, "all runs", 0.1))
    five = escape_row([1.0, 2.0, 3.0, 4.0, 5.0], [10.1, 19.9, 30.0, 40.1, 49.9], 10.0)
    assert escape_claim(five, "all runs", 0.1) == "**PASS**"
    off = escape_row([1.0, 2.0, 3.0, 4.0, 5.0], [12.1, 23.9, 36.0, 48.1, 59.9], 10.0)
    assert escape_claim(off, "all runs", 0.1).startswith("**FAIL** (slope CI [")


def test_a_ratio_range_check_on_one_point_is_inconclusive():
    """One grid point with its median inside [1, 3]: was "1 of 1, **PASS**"."""
    spec = stored_report_spec({"report": {"ratio": {"expr": "n / d", "expect": [1, 3]}}, "search": {"variable": "n"}})
    (ratio,) = spec.ratios

    def summary(medians: list[float]) -> str:
        table = pd.DataFrame({"median": medians, "min": medians, "max": medians, "n": 3})
        return ratio_summary(ratio, table)

    assert summary([2.0]).endswith("medians in [1, 3]: 1 of 1, **INCONCLUSIVE** (1 point).")
    assert summary([2.0, 2.5, 1.5]).endswith("3 of 3, **PASS**.")
    assert summary([2.0, 4.0]).endswith("1 of 2, **FAIL**.")  # a median outside contradicts it at any count


# -- one law, one verdict: a linear fit of a relation's law is a diagnostic ---------------------------------

LAW = {"x": "alpha**-2", "expect_slope": [0, float("inf")], "min_r2": 0.9}


def test_a_law_checked_as_a_relation_and_a_linear_fit_gets_one_verdict_and_one_diagnostic():
    """ch2_alpha: N* = a + b·α*⁻² as a relation (its medians) and as fit_linear (per-point means), was two
    verdicts ("b in [0, inf]: **PASS**" and "**INCONCLUSIVE**"), now one verdict and one diagnostic."""
    answers = {0.42: [40, 48, 128], 0.46: [32, 40, 30], 0.5: [24, 20, 26]}
    searches = pd.DataFrame(
        [
            {"point": f"a{a}", "alpha": a, "seed": seed, "capacity": n, "censored": ""}
            for a, ns in answers.items()
            for seed, n in enumerate(ns)
        ]
    )
    relation = {"label": "R2.2: N* = a + b·α*^-2", "y": "capacity", "fit": "linear", **LAW}
    spec = stored_report_spec({"report": {"fit_linear": LAW, "relation": relation}, "search": {"variable": "n"}})
    (rel,) = spec.relations
    with stating() as claims:
        _, (fit,) = summarise(rel, relation_rows(rel, pd.DataFrame(), searches))
        verdicts = expectations(rel, fit)
        fits = linear_section(spec.fit_linear, searches, "n", spec.relations)
    row = next(line for line in fits.splitlines() if line.startswith("| n = a + b · alpha**-2"))
    assert row.endswith(
        '| diagnostic, not a verdict (the claim is the relation "R2.2: N* = a + b·α*^-2"): b in [0, inf]: '
        "INCONCLUSIVE (slope CI spans 0); R² ≥ 0.9: INCONCLUSIVE (3 distinct x values: a + b·x^p fits any 3 points) |"
    )
    assert not VERDICT.search(row) and VERDICT.search(verdicts)
    assert [(c.section, c.diagnostic) for c in claims] == [("Relations / R2.2: N* = a + b·α*^-2", False)] * 2 + [
        ("Linear fits", True)
    ] * 2
    assert len(VERDICT.findall(linear_section(spec.fit_linear, searches, "n"))) == 2  # no relation: verdicts


# -- verdicts.json: every verdict report.md states, in one machine-readable form ---------------------------


def test_verdicts_json_holds_every_verdict_of_report_md_and_the_diagnostics(tmp_path):
    """A ch2_alpha-like search sweep: the relation's two checks, the ratio's, the linear fit's two as
    diagnostics; one entry per claim with its measured value, interval, band, outcome and reason."""
    answers = {0.42: [40, 48, 56], 0.46: [32, 40, 36], 0.5: [24, 28, 26]}
    searches = pd.DataFrame(
        [
            {"point": f"a{a}", "seed": seed, "alpha": a, "variable": "n", "capacity": float(n), "first_failure": n / 2}
            | {"censored": "", "rounds": 3, "probes": 3, "non_monotone": False, "params": 100.0, "bits": np.nan}
            | {"status": "done"}
            for a, ns in answers.items()
            for seed, n in enumerate(ns)
        ]
    )
    relation = {"label": "R2.2", "y": "capacity", "fit": "linear", **LAW}
    ratio = {"expr": "n * alpha**2", "label": "N*·α*²", "expect": [5, 10]}
    table = {"x": "alpha", "fit_linear": LAW, "relation": relation, "ratio": ratio}
    spec = stored_report_spec({"report": table, "search": {"variable": "n", "goal": "smallest"}})
    paths = write_report(tmp_path, spec, searches, pd.DataFrame(), {"spec": "ch2_alpha", "preset": "quick"})
    assert [p.name for p in paths][-2:] == ["verdicts.json", "report.md"]
    stated = json.loads((tmp_path / "verdicts.json").read_text())
    assert (stated["spec"], stated["preset"], stated["seeds"], stated["partial"]) == (
        "ch2_alpha",
        "quick",
        [0, 1, 2],
        "",
    )
    entries = stated["verdicts"]
    text = (tmp_path / "report.md").read_text()
    verdicts = [e for e in entries if not e["diagnostic"]]
    assert len(verdicts) == len(VERDICT.findall(text)) == 3  # the ratio's, the relation's b and R²
    assert [e["section"] for e in entries] == [
        "Capacity",
        "Linear fits",
        "Linear fits",
        "Relations / R2.2",
        "Relations / R2.2",
    ]
    slope = entries[3]
    assert slope["claim"] == "b in [0, inf]" and slope["band"] == [0.0, None] and slope["outcome"] == "PASS"
    assert slope["interval"][0] > 0 and slope["interval"][0] < slope["measured"] < slope["interval"][1]
    assert entries[0]["outcome"] == "PASS" and entries[0]["band"] == [5.0, 10.0]
    assert entries[1]["diagnostic"] and entries[1]["claim"] == "n = a + b · alpha**-2: b in [0, inf]"
    assert all(e["preset"] == "quick" and e["seeds"] == [0, 1, 2] for e in entries)
    assert set(entries[0]) == {
        "section",
        "claim",
        "measured",
        "interval",
        "band",
        "outcome",
        "reason",
        "diagnostic",
        "preset",
        "seeds",
    }
