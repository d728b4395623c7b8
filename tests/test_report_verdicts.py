"""Verdicts with power (jaxmem.report.verdicts, jaxmem.report.relations, jaxmem.report.capacity.stable):
each check that used to pass by construction now says INCONCLUSIVE where the data cannot decide it, a
clear case still PASSes and a clear wrong one FAILs. Synthetic frames, no training."""

import math

import numpy as np
import pandas as pd

from jaxmem.report import write_report
from jaxmem.report.capacity.stable import stable_answer
from jaxmem.report.relations import expectations, relation_rows, summarise
from jaxmem.spec.sweep import stored_report_spec

SEEDS = (0, 1, 2)


def relation(table: dict, search: bool = True):
    spec = stored_report_spec({"report": {"relation": table}, **({"search": {"variable": "n"}} if search else {})})
    (rel,) = spec.relations
    return rel


def verdict_text(table: dict, runs: pd.DataFrame, searches: pd.DataFrame, search: bool = True) -> str:
    """report.md's "Expected: …" of a relation with one group."""
    rel = relation(table, search)
    _, (fit,) = summarise(rel, relation_rows(rel, runs, searches))
    return expectations(rel, fit)


def searches_at(xs: dict[float, list[float]], x: str = "alpha", censored: dict | None = None) -> pd.DataFrame:
    """One search per (x value, seed) with the answers listed; `censored`: {(x, seed): side}."""
    rows = []
    for value, answers in xs.items():
        for seed, answer in enumerate(answers):
            side = (censored or {}).get((value, seed), "")
            rows.append({x: value, "seed": seed, "capacity": answer, "censored": side})
    return pd.DataFrame(rows)


def runs_at(values: dict[float, list[float]]) -> pd.DataFrame:
    """One run per (σ_2, seed) with final_excess_avg listed."""
    rows = [{"sigma2": s, "seed": seed, "final_excess_avg": v} for s, vs in values.items() for seed, v in enumerate(vs)]
    return pd.DataFrame(rows)


# -- the slope: its sign and its 95 % interval ------------------------------------------------------------


def test_a_relation_over_two_distinct_x_is_inconclusive_not_pass():
    """ch3_gamma quick: at γ_d = 0.25 two of three searches are censored above, so its median is ∞ and
    the line goes through the two finite medians: R² = 1 and a slope of the wrong sign (was: PASS)."""
    searches = searches_at(
        {0.25: [83, 240, 240], 0.35: [34, 61, 34], 0.5: [29, 61, 45]},
        x="gamma_d",
        censored={(0.25, 1): "above", (0.25, 2): "above"},
    )
    table = {"x": "gamma_d**-2", "y": "capacity", "missing": "high", "min_r2": 0.9, "expect_slope": [0, math.inf]}
    text = verdict_text(table, pd.DataFrame(), searches)
    assert (
        text
        == "b in [0, inf]: **INCONCLUSIVE** (2 distinct x values); R² ≥ 0.9: **INCONCLUSIVE** (2 distinct x values)"
    )


def test_a_clear_slope_passes_a_wrong_sign_fails_and_a_noisy_one_is_inconclusive():
    clear = searches_at(
        {a: [100 / a + e + d for d in (-2, 0, 2)] for a, e in zip((0.2, 0.25, 0.4, 0.5), (3, -3, 3, -3))}
    )
    increasing = {"x": "1/alpha", "y": "capacity", "expect_slope": [0, math.inf]}
    assert verdict_text(increasing, pd.DataFrame(), clear) == "b in [0, inf]: **PASS**"
    decreasing = {**increasing, "expect_slope": [-math.inf, 0]}
    assert verdict_text(decreasing, pd.DataFrame(), clear) == (
        "b in [-inf, 0]: **FAIL** (slope CI [93.53, 108.1] outside it)"
    )
    noisy = searches_at({a: [100 + 40 * (-1) ** i] * 3 for i, a in enumerate((0.2, 0.25, 0.4, 0.5))})
    assert verdict_text(increasing, pd.DataFrame(), noisy) == "b in [0, inf]: **INCONCLUSIVE** (slope CI spans 0)"


# -- the interior minimum: beyond the seed spread -------------------------------------------------------------


def test_an_interior_minimum_within_the_seed_spread_is_inconclusive():
    """ch4_minority_cov quick: medians 1.565e-3, 1.563e-3, 1.569e-3, 1.580e-3 over σ_2 = 0.1 … 3, 0.1 %
    apart, while each σ_2's ten seeds spread over ±2e-4 (was: interior minimum PASS)."""
    spread = np.linspace(-2e-4, 2e-4, 10)
    medians = {0.1: 1.565e-3, 0.5: 1.563e-3, 1.0: 1.569e-3, 3.0: 1.580e-3}
    runs = runs_at({s: list(m + spread) for s, m in medians.items()})
    table = {"x": "sigma2", "y": "final_excess_avg", "minimum": "interior"}
    text = verdict_text(table, runs, pd.DataFrame(), search=False)
    assert text == "interior minimum: **INCONCLUSIVE** (minimum within the seed spread)"
    deeper = {0.1: 2.0e-3, 0.5: 1.5e-3, 1.0: 1.7e-3, 3.0: 2.5e-3}  # a U deeper than the spread
    u_shape = runs_at({s: list(m + spread) for s, m in deeper.items()})
    assert verdict_text(table, u_shape, pd.DataFrame(), search=False) == "interior minimum: **PASS**"
    rising = runs_at({s: list(1e-3 * (1 + s) + spread / 20) for s in medians})  # smallest at σ_2 = 0.1
    assert verdict_text(table, rising, pd.DataFrame(), search=False) == (
        "interior minimum: **FAIL** (smallest median at an end, below every interior x beyond the seed spread)"
    )


# -- a law against its free-exponent neighbours -------------------------------------------------------------


def test_a_law_the_range_cannot_tell_from_its_neighbours_is_inconclusive():
    """R2.2: N* = a + b·α*^-2 over α* ∈ [0.42, 0.5]: a smooth decreasing N* ∝ α*^-4 (with 1 % noise) fits
    the line in α*^-2 with R² = 0.995 (was: PASS); the free exponent's interval holds the claimed 1 and
    the neighbour 2 (α*^-4) alike."""
    alphas = (0.42, 0.44, 0.46, 0.48, 0.50)
    noise = (1.01, 0.99, 1.0, 1.01, 0.99)
    searches = searches_at({a: [20 * a**-4 * e] * 3 for a, e in zip(alphas, noise)})
    table = {"x": "alpha**-2", "y": "capacity", "min_r2": 0.9}
    assert verdict_text(table, pd.DataFrame(), searches) == (
        "R² ≥ 0.9: **INCONCLUSIVE** (not distinguishable: a + b·x^p fits alike at p = 2 "
        "(95 % interval of p [0.27, 4.32]))"
    )
    wide = searches_at({x: [(5 + 3 * x) * e] * 3 for x, e in zip((1, 2, 4, 8, 16, 32), noise + (1.0,))}, x="m")
    line = {"x": "m", "y": "capacity", "min_r2": 0.9}
    assert verdict_text(line, pd.DataFrame(), wide) == "R² ≥ 0.9: **PASS** (free exponent p in [0.97, 1.04])"
    square = searches_at({x: [x * x * e] * 3 for x, e in zip((1, 2, 4, 8, 16, 32), noise + (1.0,))}, x="m")
    assert verdict_text(line, pd.DataFrame(), square) == (
        "R² ≥ 0.9: **FAIL** (free exponent p = 2.01, 95 % interval [2, 2.03], excludes the claimed 1)"
    )
    three = searches_at({a: [20 * a**-4 * e] * 3 for a, e in zip(alphas[::2], noise)})
    assert verdict_text(table, pd.DataFrame(), three) == (
        "R² ≥ 0.9: **INCONCLUSIVE** (3 distinct x values: a + b·x^p fits any 3 points)"
    )


# -- a non-monotone search: the rule's definition, and a flag -------------------------------------------------

PROBES = {  # (alpha, seed): {l_tr: success}; seed 0 at α = 0.3 succeeds at 3, fails at 4 and 5, succeeds from 6
    (0.3, 0): {1: False, 2: False, 3: True, 4: False, 5: False, 6: True, 8: True, 32: True},
    (0.3, 1): {1: False, 2: False, 3: False, 4: True, 8: True, 32: True},
    **{(a, s): {1: False, 2: True, 4: True, 32: True} for a in (0.6, 0.9) for s in (0, 1)},
}


def ltr_store() -> tuple[pd.DataFrame, pd.DataFrame]:
    """ch6_alpha_ltr quick (goal "smallest" over l_tr): its searches as the brackets answered them, and
    every probe's run."""
    searches, runs = [], []
    for (alpha, seed), probes in PROBES.items():
        point = f"a{alpha}"
        answer = 3 if (alpha, seed) == (0.3, 0) else min(v for v, ok in probes.items() if ok)
        searches.append(
            {
                "point": point,
                "seed": seed,
                "alpha": alpha,
                "variable": "l_tr",
                "capacity": float(answer),
                "first_failure": float(max(v for v in probes if v < answer)),
                "censored": "",
                "rounds": 3,
                "probes": len(probes),
                "non_monotone": (alpha, seed) == (0.3, 0),
                "params": 100.0,
                "bits": math.nan,
                "status": "done",
            }
        )
        for value, ok in probes.items():
            runs.append(
                {
                    "run_id": f"{point}-{seed}-{value}",
                    "point": point,
                    "seed": seed,
                    "lr": 1.0,
                    "value": value,
                    "alpha": alpha,
                    "l_tr": value,
                    "max_metric": 0.0 if ok else 0.5,
                    "success": ok,
                }
            )
    return pd.DataFrame(searches), pd.DataFrame(runs)


def ltr_report(tmp_path, answer: str | None) -> str:
    report = {"x": "alpha", "fit": "l_tr", "expect_slope": [-1.3, -0.7], "relation": {"x": "alpha", "y": "capacity"}}
    spec = stored_report_spec(
        {"report": {**report, **({"search_answer": answer} if answer else {})}, "search": {"goal": "smallest"}}
    )
    searches, runs = ltr_store()
    write_report(tmp_path, spec, searches, runs, {})
    return (tmp_path / "report.md").read_text()


def test_a_non_monotone_search_uses_the_stable_answer_and_is_flagged(tmp_path):
    """ch6_alpha_ltr: '3.5 [3, 4]' at α = 0.3 came from seed 0's noisy success at l_tr = 3; the rule's
    definition, the smallest l_tr from which every larger one succeeds, gives 6 and a median of 5."""
    text = ltr_report(tmp_path, "stable")
    assert "| 0.3 | 100 | 5 | 4.5 – 5.5 | 2/2 | – | 5 ± 1.414 |" in text
    assert (
        "Non-monotone searches (a probe succeeded beyond one that failed): 1 of 6. alpha=0.3, seed 0: probes "
        "1 ✗, 2 ✗, 3 ✓, 4 ✗, 5 ✗, 6 ✓, 8 ✓, 32 ✓ → 6. The tables use the stable answers "
        '(`search_answer = "stable"`): the smallest probed value from which every larger one succeeds.'
    ) in text
    slope = np.polyfit(np.log([0.3, 0.6, 0.9]), np.log([5, 2, 2]), 1)[0]
    assert f"- Slope: **{slope:.3f}** (95 % CI [-5.302, 3.529])" in text  # three points: one degree of freedom
    assert "- Expected slope in [-1.3, -0.7]: **INCONCLUSIVE** (slope CI [-5.302, 3.529] crosses -1.3 and -0.7)" in text
    assert "| 0.3 | 2 | 0 | 5 | 4.5 – 5.5 | 4 – 6 |" in text  # the relation's table, flagged under it
    assert "Non-monotone searches among these: 1 (alpha=0.3, seed 0; see the Capacity section)." in text


def test_the_bracket_answer_stays_the_default_and_the_search_is_still_flagged(tmp_path):
    text = ltr_report(tmp_path, None)
    assert "| 0.3 | 100 | 3.5 | 3.25 – 3.75 | 2/2 | – | 3.5 ± 0.7071 |" in text
    assert '→ 3 (stable: 6). The tables use the searches\' brackets; `[report] search_answer = "stable"`' in text


def test_the_stable_answer_of_either_goal_and_its_censoring():
    probes = [(1, True), (2, False), (3, True), (4, True)]
    assert stable_answer(probes, "smallest") == (3.0, 2.0, "")  # from 3 on every probe succeeds
    assert stable_answer(probes, "largest") == (1.0, 2.0, "")  # up to 1 every probe succeeds
    capacity, first_failure, side = stable_answer([(1, True), (2, True)], "smallest")
    assert (capacity, side) == (1.0, "below") and math.isnan(first_failure)  # every probe succeeds
    capacity, first_failure, side = stable_answer([(1, True), (2, True)], "largest")
    assert (capacity, side) == (2.0, "above") and math.isnan(first_failure)
    assert stable_answer([(1, True), (2, False)], "smallest") is None  # the largest probe fails: censored above
    assert stable_answer([(1, False), (2, True)], "largest") is None


def test_a_power_law_is_told_apart_from_an_exponential_over_a_wide_range():
    """fit = "power": ln y = a + b·ln x is the free-exponent family's p = 0, its neighbours ln y linear in
    x (an exponential) and in 1/x."""
    ms = (1, 2, 4, 8, 16, 32)
    power = searches_at({m: [3 * m**0.7 * e] * 3 for m, e in zip(ms, (1.01, 0.99, 1.0, 1.01, 0.99, 1.0))}, x="m")
    table = {"x": "m", "y": "capacity", "fit": "power", "min_r2": 0.9, "expect_slope": [0.6, 0.8]}
    assert verdict_text(table, pd.DataFrame(), power) == (
        "b in [0.6, 0.8]: **PASS**; R² ≥ 0.9: **PASS** (free exponent p in [-0.03, 0.03])"
    )


def test_a_yes_no_level_is_judged_by_its_exact_binomial_interval():
    """Three runs all succeeding: the t-interval has zero width ([1, 1]: PASS against ≥ 0.9); the exact
    binomial interval of 3 of 3 is [0.29, 1]: INCONCLUSIVE. 40 of 40 decide it; 0 of 40 FAIL it."""
    from jaxmem.report.verdicts import mean_in_band

    verdict, mean, (low, high) = mean_in_band([1.0, 1.0, 1.0], (0.9, math.inf))
    assert verdict.outcome == "INCONCLUSIVE" and mean == 1.0 and 0.29 < low < 0.3 and high == 1.0
    assert mean_in_band(np.ones(40), (0.9, math.inf))[0].outcome == "PASS"
    assert mean_in_band(np.zeros(40), (0.9, math.inf))[0].outcome == "FAIL"
    assert mean_in_band([0.95, 0.97, 0.99], (0.9, math.inf))[2][0] > 0.9  # continuous values: the t-interval
