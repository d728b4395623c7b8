"""`[[report.relation]]` on synthetic runs and searches (no training): per-x quantiles with missing
values, linear and power fits, Spearman ρ with missing values ranked, the interior-minimum check, the
verdicts (PASS, FAIL, INCONCLUSIVE; more in tests/test_report_verdicts.py), the files, and the keys'
checks."""

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from jaxmem.report import write_report
from jaxmem.report.relations import per_x, relation_rows, spearman, summarise
from jaxmem.report.verdicts import FAIL, INCONCLUSIVE, PASS
from jaxmem.spec.report_tables import Context, read_report
from jaxmem.spec.sweep import stored_report_spec

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
ALPHAS = (0.2, 0.25, 0.4, 0.5)
SEEDS = (0, 1, 2)


def relation(table: dict, search: bool = False):
    spec = stored_report_spec({"report": {"relation": table}, **({"search": {"variable": "n"}} if search else {})})
    return spec.relations


def runs_frame() -> pd.DataFrame:
    """steps_to_threshold = 100/α + 10·(seed − 1), except seed 2 at the smallest α never gets there;
    final_test_loss is U-shaped in α (smallest at 0.25 and 0.4), well beyond its seed spread."""
    rows = []
    for alpha in ALPHAS:
        for seed in SEEDS:
            never = alpha == ALPHAS[0] and seed == 2
            rows.append(
                {
                    "run_id": f"{alpha}-{seed}",
                    "point": str(alpha),
                    "seed": seed,
                    "lr": 0.1,
                    "alpha": alpha,
                    "H": 1 + seed % 2,
                    "steps_to_threshold": math.nan if never else 100 / alpha + 10 * (seed - 1),
                    "final_test_loss": (alpha - 0.32) ** 2 + 0.001 * seed,
                    "max_metric": 1.0,
                    "success": not never,
                }
            )
    return pd.DataFrame(rows)


def test_per_x_counts_missing_and_takes_quantiles_of_the_rest():
    (rel,) = relation({"x": "1/alpha", "y": "steps_to_threshold"})
    table = per_x(relation_rows(rel, runs_frame(), pd.DataFrame()), rel.missing)
    first = table.iloc[0]  # x = 1/0.5 = 2
    assert first.x == pytest.approx(2) and first.rows == 3 and first.missing == 0
    assert first["median"] == pytest.approx(200) and (first["min"], first["max"]) == pytest.approx((190, 210))
    last = table.iloc[-1]  # x = 5: seeds 0 and 1 only
    assert last.rows == 3 and last.missing == 1 and last["median"] == pytest.approx(np.median([490, 500]))


def test_missing_high_ranks_above_every_value_in_rho_and_quantiles():
    runs = runs_frame()
    (high,) = relation({"x": "1/alpha", "y": "steps_to_threshold", "missing": "high"})
    (drop,) = relation({"x": "1/alpha", "y": "steps_to_threshold"})
    rows = relation_rows(high, runs, pd.DataFrame())
    x, y = rows["x"], rows["y"].fillna(math.inf)
    assert spearman(rows, "high") == pytest.approx(stats.spearmanr(x, y).statistic)
    kept = rows.dropna()
    assert spearman(rows, "drop") == pytest.approx(stats.spearmanr(kept["x"], kept["y"]).statistic)
    last = per_x(rows, "high").iloc[-1]
    assert last["max"] == math.inf and last["median"] == 500 and last.missing == 1  # [490, 500, ∞]: no ∞ − ∞
    assert (last["q25"], last["q75"]) == (495, math.inf)  # interpolated; towards ∞ the quantile is a bound
    assert per_x(relation_rows(drop, runs, pd.DataFrame()), "drop").iloc[-1]["max"] == 500


def outcomes(fit: dict) -> dict:
    """The outcome of each verdict of a group's result ("" without the check)."""
    return {k.removesuffix("_verdict"): v.outcome if v else "" for k, v in fit.items() if k.endswith("_verdict")}


def test_linear_fit_over_medians_and_its_verdicts():
    (rel,) = relation(
        {"x": "1/alpha", "y": "steps_to_threshold", "expect_slope": [90, 110], "min_r2": 0.99, "rank": "increasing"}
    )
    _, (fit,) = summarise(rel, relation_rows(rel, runs_frame(), pd.DataFrame()))
    medians = [200, 250, 400, 495]  # 100/α, the last over seeds 0 and 1 only
    line = stats.linregress([2, 2.5, 4, 5], medians)
    assert (fit["b"], fit["a"], fit["r2"], fit["n"]) == pytest.approx((line.slope, line.intercept, line.rvalue**2, 4))
    half = stats.t.ppf(0.975, 2) * line.stderr  # the slope's 95 % t-interval over 4 medians
    assert (fit["b_lo"], fit["b_hi"]) == pytest.approx((line.slope - half, line.slope + half))
    assert outcomes(fit) == {"slope": PASS, "r2": PASS, "rank": PASS, "monotone": "", "minimum": ""}
    assert fit["law_p_lo"] < 1 < fit["law_p_hi"] and not fit["law_p_lo"] <= 0 and not fit["law_p_hi"] >= 2
    (edge,) = relation({"x": "1/alpha", "y": "steps_to_threshold", "expect_slope": [97, 101]})  # b = 98.6 inside,
    _, (fit,) = summarise(edge, relation_rows(edge, runs_frame(), pd.DataFrame()))  # its interval not
    assert fit["slope_verdict"].outcome == INCONCLUSIVE and "crosses 97" in fit["slope_verdict"].reason
    (strict,) = relation({"x": "1/alpha", "y": "steps_to_threshold", "expect_slope": [0, 1], "rank": "decreasing"})
    _, (fit,) = summarise(strict, relation_rows(strict, runs_frame(), pd.DataFrame()))
    assert outcomes(fit) == {"slope": FAIL, "r2": "", "rank": FAIL, "monotone": "", "minimum": ""}
    (open_ended,) = relation({"x": "1/alpha", "y": "steps_to_threshold", "expect_slope": [0, math.inf]})  # b > 0
    fit = summarise(open_ended, relation_rows(open_ended, runs_frame(), pd.DataFrame()))[1][0]
    assert fit["slope_verdict"].outcome == PASS


def test_power_fit_recovers_the_exponent_and_the_u_shape_is_found():
    runs = runs_frame()
    (power,) = relation({"x": "alpha", "y": "steps_to_threshold", "fit": "power", "expect_slope": [-1.1, -0.9]})
    _, (fit,) = summarise(power, relation_rows(power, runs, pd.DataFrame()))
    assert fit["b"] == pytest.approx(-1, abs=0.05) and fit["slope_verdict"].outcome == PASS
    (u,) = relation({"x": "alpha", "y": "final_test_loss", "minimum": "interior", "fit": "none"})
    _, (fit,) = summarise(u, relation_rows(u, runs, pd.DataFrame()))
    assert fit["interior_minimum"] is True and fit["minimum_verdict"].outcome == PASS and "b" not in fit
    (monotone,) = relation({"x": "alpha", "y": "steps_to_threshold", "minimum": "interior"})
    _, (fit,) = summarise(monotone, relation_rows(monotone, runs, pd.DataFrame()))
    assert fit["interior_minimum"] is False and fit["minimum_verdict"].outcome == FAIL


def test_group_by_fits_each_group_and_searches_leave_censored_answers_out():
    (rel,) = relation({"x": "1/alpha", "y": "steps_to_threshold", "group_by": ["H"]})
    _, fits = summarise(rel, relation_rows(rel, runs_frame(), pd.DataFrame()))
    assert [f["group"] for f in fits] == ["H=1", "H=2"]
    searches = pd.DataFrame(
        {
            "alpha": [0.5, 0.5, 0.25, 0.25],
            "seed": [0, 1, 0, 1],
            "capacity": [10, 12, 40, 99],
            "censored": ["", "", "", "above"],
        }
    )
    (cap,) = relation({"x": "1/alpha", "y": "capacity"}, search=True)
    assert cap.over_searches
    table = per_x(relation_rows(cap, pd.DataFrame(), searches), cap.missing)
    assert table["missing"].tolist() == [0, 1] and table["median"].tolist() == [11, 40]


def test_a_search_censored_below_its_range_ranks_low_even_when_missing_ranks_high():
    """`goal = "smallest"`: a seed that succeeds at the lowest n probed (censored below) has the smallest
    answer, not a missing one; one never succeeding (censored above) ranks past every answer."""
    searches = pd.DataFrame(
        {
            "alpha": [0.5] * 4 + [0.25] * 4,
            "seed": [0, 1, 2, 3] * 2,
            "capacity": [8, 20, 30, 40, 50, 60, 70, 512],
            "censored": ["below", "", "", "", "", "", "", "above"],
        }
    )
    (cap,) = relation({"x": "alpha", "y": "capacity", "missing": "high"}, search=True)
    table = per_x(relation_rows(cap, pd.DataFrame(), searches), cap.missing).set_index("x")
    assert table.loc[0.5, "min"] == -math.inf and table.loc[0.5, "median"] == 25 and table.loc[0.5, "missing"] == 1
    assert table.loc[0.25, "max"] == math.inf and table.loc[0.25, "median"] == 65


def test_monotone_judges_the_medians_beyond_their_spread_with_bounds():
    """The spec's "N*(0.5) non-increasing in α*": the medians, not a Spearman ρ over every noisy seed; a
    step counts beyond the seed spread (the 25–75 % ranges), so a tie or a rise within it breaks nothing."""
    searches = pd.DataFrame(
        {
            "alpha": [0.42] * 3 + [0.46] * 3 + [0.5] * 3,
            "seed": [0, 1, 2] * 3,
            "capacity": [90, 512, 512, 40, 95, 91, 91, 30, 200],
            "censored": ["", "above", "above", "", "", "", "", "", ""],
        }
    )
    (down,) = relation({"x": "alpha", "y": "capacity", "missing": "high", "monotone": "non-increasing"}, search=True)
    _, (fit,) = summarise(down, relation_rows(down, pd.DataFrame(), searches))  # medians ∞, 91, 91
    assert fit["monotone_verdict"].outcome == PASS  # 25–75 %: ∞ – ∞, 65.5 – 93, 60.5 – 145.5
    (up,) = relation({"x": "alpha", "y": "capacity", "missing": "high", "monotone": "non-decreasing"}, search=True)
    assert summarise(up, relation_rows(up, pd.DataFrame(), searches))[1][0]["monotone_verdict"].outcome == FAIL
    one = searches[searches["alpha"] == 0.5]
    assert summarise(down, relation_rows(down, pd.DataFrame(), one))[1][0]["monotone_verdict"].reason == (
        "1 distinct x value"
    )
    flat = searches.assign(capacity=512, censored="above")  # every median a bound at ∞: no trend
    assert summarise(down, relation_rows(down, pd.DataFrame(), flat))[1][0]["monotone_verdict"].outcome == INCONCLUSIVE
    noisy = searches[searches["alpha"] > 0.42]  # 91 then 91: within the spread, and only two x
    assert summarise(down, relation_rows(down, pd.DataFrame(), noisy))[1][0]["monotone_verdict"].outcome == INCONCLUSIVE


def test_where_keeps_the_rows_with_the_listed_values():
    (rel,) = relation({"x": "1/alpha", "y": "steps_to_threshold", "where": {"H": 2}})
    rows = relation_rows(rel, runs_frame(), pd.DataFrame())
    assert len(rows) == 4 and rows["y"].notna().all()  # seed 1 only (H = 1 + seed % 2), one run per α
    (both,) = relation({"x": "1/alpha", "y": "steps_to_threshold", "where": {"H": [1, 2], "seed": [0, 2]}})
    assert len(relation_rows(both, runs_frame(), pd.DataFrame())) == 8


def test_a_search_takes_a_metric_axis_as_the_median_over_its_runs():
    """x = a measured property of the drawn problem (the same at every probe of a search)."""
    searches = pd.DataFrame(
        {"point": ["p", "p", "q"], "seed": [0, 1, 0], "capacity": [10, 20, 30], "censored": ["", "", ""]}
    )
    runs = pd.DataFrame(
        {"point": ["p", "p", "p", "q", "q"], "seed": [0, 0, 1, 0, 0], "final_a_inf": [0.5, 0.7, 0.9, 2.0, 2.0]}
    )
    (rel,) = relation({"x": "final_a_inf", "y": "capacity"}, search=True)
    rows = relation_rows(rel, runs, searches)
    assert rows["x"].tolist() == [0.6, 0.9, 2.0] and rows["y"].tolist() == [10, 20, 30]


def test_the_report_writes_the_files_and_the_section(tmp_path):
    tables = [
        {"x": "1/alpha", "y": "steps_to_threshold", "missing": "high", "rank": "increasing", "label": "T against 1/α"},
        {"x": "alpha", "y": "final_test_loss", "fit": "power", "minimum": "interior"},
    ]
    spec = stored_report_spec({"report": {"relation": tables}})
    names = [p.name for p in write_report(tmp_path, spec, pd.DataFrame(), runs_frame(), {})]
    assert {"relations.csv", "relation_fits.csv", "relations.png"} <= set(names)
    assert (tmp_path / "relations.png").read_bytes()[:8] == PNG_MAGIC
    fits = pd.read_csv(tmp_path / "relation_fits.csv")
    assert fits["relation"].tolist() == ["T against 1/α", "final_test_loss against alpha"]
    text = (tmp_path / "report.md").read_text()
    assert "## Relations" in text and "### T against 1/α" in text
    assert "| 5 | 3 | 1 | 500 | 495 – ∞ | 490 – ∞ |" in text  # linear quantiles, towards ∞ a bound
    assert "Expected: ρ ≥ 0.8: **PASS**" in text and "interior minimum: **PASS**" in text


def test_a_relation_whose_every_row_lacks_a_value_still_renders(tmp_path):
    """Every search censored (e.g. a baseline that never succeeds): no finite median to fit or to put on
    log axes; the medians show as ∞ and the plot is still written."""
    runs = runs_frame().assign(steps_to_threshold=math.nan)
    table = {"x": "alpha", "y": "steps_to_threshold", "fit": "power", "missing": "high", "expect_slope": [1, 2]}
    write_report(tmp_path, stored_report_spec({"report": {"relation": table}}), pd.DataFrame(), runs, {})
    assert (tmp_path / "relations.png").read_bytes()[:8] == PNG_MAGIC
    text = (tmp_path / "report.md").read_text()
    assert (
        "| 0.2 | 3 | 3 | ∞ | ∞ – ∞ | ∞ – ∞ |" in text and "b in [1, 2]: **INCONCLUSIVE** (0 distinct x values)" in text
    )


def problems_of(table, context: Context) -> list[str]:
    problems: list[str] = []
    read_report({"relation": table}, problems, context)
    return problems


def test_keys_and_names_are_checked():
    grid = Context(config=frozenset({"alpha", "n"}), metrics=frozenset({"test_error"}))
    assert problems_of({"x": "1/alpha", "y": "final_test_error / steps_run"}, grid) == []
    assert problems_of(
        [
            {
                "x": "alph",
                "y": "capacity",
                "fit": "cubic",
                "min_rank": 2,
                "group_by": ["H"],
                "where": {"model": 1},
                "monotone": "up",
            },
            {"y": "steps_run"},
            {"x": "alpha", "y": "steps_run", "fit": "none", "min_r2": 0.9},
        ],
        grid,
    ) == [
        "report.relation[0].x: 'alph' is not a config field, lr, seed or final_<metric> (did you mean 'alpha'?)",
        "report.relation[0].y: 'capacity' is not a config field, lr, seed, final_<metric>, rate_<metric> or a run "
        "quantity; allowed: alpha, final_loss, final_metric, final_test_error, lr, max_metric, n, rate_test_error, "
        "rate_test_error_r2, seed, steps_run, steps_to_threshold, wall_time_s",
        "report.relation[0].min_rank: must lie in [0, 1], got 2.0",
        "report.relation[0].group_by: 'H' is not a config field, lr or seed; allowed: alpha, lr, n, seed",
        "report.relation[0].where: 'model' is not a config field, lr or seed; allowed: alpha, lr, n, seed",
        "report.relation[0].fit: must be one of ['linear', 'power', 'none'], got 'cubic'",
        "report.relation[0].monotone: must be one of ['non-increasing', 'non-decreasing'], got 'up'",
        "report.relation[1].x: missing",
        'report.relation[2].min_r2: needs a fit, got fit = "none"',
    ]
    search = Context(config=frozenset({"alpha", "n"}), metrics=frozenset({"test_error"}), variable="n")
    assert problems_of({"x": "alpha", "y": "1/sqrt(capacity)"}, search) == []
    assert problems_of({"x": "alpha", "y": "capacity / steps_run"}, search) == [
        "report.relation[0].y: a search's capacity cannot be mixed with a run's quantities, got 'capacity / steps_run'"
    ]


def test_expect_level_judges_the_mean_over_the_rows_by_its_interval():
    """final_test_loss over 12 runs: (α − 0.32)² + 0.001·seed, mean 0.0148. A band holding its 95 % interval
    PASSes, one beside it FAILs, one through it is INCONCLUSIVE, two rows (where α = 0.5, seeds 0–1) too."""
    runs = runs_frame()
    values = runs["final_test_loss"].to_numpy()
    half = stats.t.ppf(0.975, values.size - 1) * values.std(ddof=1) / math.sqrt(values.size)
    found = {}
    for name, band in {"inside": [0, 0.05], "outside": [0.05, math.inf], "across": [0.015, 1]}.items():
        (rel,) = relation({"x": "alpha", "y": "final_test_loss", "fit": "none", "expect_level": band})
        (fit,) = summarise(rel, relation_rows(rel, runs, pd.DataFrame()))[1]
        found[name] = fit["level_verdict"].outcome
    assert found == {"inside": PASS, "outside": FAIL, "across": INCONCLUSIVE}
    assert (fit["level"], fit["level_lo"], fit["level_hi"]) == pytest.approx(
        (values.mean(), values.mean() - half, values.mean() + half)
    )
    (two,) = relation(
        {
            "x": "alpha",
            "y": "final_test_loss",
            "fit": "none",
            "expect_level": [0, 1],
            "where": {"alpha": 0.5, "seed": [0, 1]},
        }
    )
    (fit,) = summarise(two, relation_rows(two, runs, pd.DataFrame()))[1]
    assert (fit["level_verdict"].outcome, fit["level_verdict"].reason) == (INCONCLUSIVE, "2 rows")
