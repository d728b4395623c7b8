"""General report fits on synthetic stores (no training): linear fits with intercept, per-point ratios,
the success map of a search's probes, and phase diagrams of grid sweeps."""

import dataclasses
import math

import numpy as np
import pandas as pd
import pytest

from jaxmem.report import write_report
from jaxmem.report.capacity.linear import fit_line, linear_fit, linear_section
from jaxmem.report.capacity.ratio import ratio_cell, ratio_summary, ratio_table, with_ratios
from jaxmem.report.capacity.success_map import probe_table
from jaxmem.report.grid.phase import crossing, phase_boundaries
from jaxmem.spec.report_tables import Context, read_report
from jaxmem.spec.sweep import SpecError, SuccessRule, stored_report_spec

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
OFFSETS = (-1.0, 0.0, 0.0, 1.0)  # per seed: the answers scatter symmetrically about the law
PROBES = (4, 8, 12, 16, 24, 32, 48, 64)
RULE = SuccessRule("test_error", "at_most", 1e-2)


def options(table: dict, search: bool = True):
    """A `[report]` table of a search sweep (goal "smallest") as the report reads it."""
    return stored_report_spec({"report": table, **({"search": {"goal": "smallest"}} if search else {})})


def n_star(m_T: int) -> float:
    """The synthetic law n* = 5 + 2.5 n_cnt with n_cnt = 2 m_T d / k = 4 m_T (d = 8, k = 4)."""
    return 5 + 2.5 * 4 * m_T


def searches_frame(m_Ts=(1, 2, 4)) -> pd.DataFrame:
    rows = []
    for m_T in m_Ts:
        for seed, offset in enumerate(OFFSETS):
            capacity = n_star(m_T) + offset
            rows.append(
                {
                    "point": f"m{m_T}",
                    "seed": seed,
                    "d": 8,
                    "k": 4,
                    "m_T": m_T,
                    "variable": "n",
                    "capacity": capacity,
                    "first_failure": capacity - 1,
                    "censored": "",
                    "rounds": 3,
                    "probes": 8,
                    "non_monotone": False,
                    "params": 128.0 * m_T,
                    "bits": np.nan,
                    "status": "done",
                }
            )
    return pd.DataFrame(rows)


def runs_frame(searches: pd.DataFrame) -> pd.DataFrame:
    """Probes of every search: lr 1e-2 succeeds from the search's answer up, lr 1e-3 never."""
    rows = []
    for s in searches.itertuples():
        for value in PROBES:
            for lr in (1e-2, 1e-3):
                ok = lr == 1e-2 and value >= s.capacity
                rows.append(
                    {
                        "run_id": f"{s.point}-{s.seed}-{value}-{lr}",
                        "point": s.point,
                        "seed": s.seed,
                        "lr": lr,
                        "value": value,
                        "d": 8,
                        "k": 4,
                        "m_T": s.m_T,
                        "n": value,
                        "max_metric": 0.005 if ok else 0.5,
                        "success": ok,
                    }
                )
    return pd.DataFrame(rows)


# -- linear fits -----------------------------------------------------------------------------------------


def test_fit_line_exact_noisy_and_degenerate():
    x = np.array([1.0, 2.0, 4.0, 8.0])
    exact = fit_line(x, 3 + 2 * x)
    assert (exact["a"], exact["b"], exact["r2"], exact["n"]) == (pytest.approx(3), pytest.approx(2), 1.0, 4)
    assert exact["a_se"] == pytest.approx(0, abs=1e-9) and exact["b_se"] == pytest.approx(0, abs=1e-9)
    noisy = fit_line(x, 3 + 2 * x + np.array([0.5, -0.5, -0.5, 0.5]))
    assert 0.9 < noisy["r2"] < 1 and noisy["b_se"] > 0 and noisy["a_se"] > noisy["b_se"]
    assert np.isnan(fit_line(x[:2], x[:2])["b_se"]) and fit_line(x[:2], x[:2])["r2"] == 1.0  # two points: no se
    assert math.isnan(fit_line([2.0, 2.0], [1.0, 3.0])["b"])  # one distinct x
    assert math.isnan(fit_line(x, np.ones(4))["r2"]) and fit_line(x, np.ones(4))["b"] == pytest.approx(0)


def test_linear_fit_recovers_intercept_and_slope_with_per_seed_spread_and_verdicts():
    table = {"fit_linear": {"x": "2*m_T*d/k", "x_label": "n_cnt", "expect_slope": [2, 3], "min_r2": 0.99}}
    spec = options(table).fit_linear[0]
    result = linear_fit(spec, searches_frame(), "n")
    assert (result["a"], result["b"], result["r2"]) == (pytest.approx(5), pytest.approx(2.5), pytest.approx(1))
    mean, std, count = result["seed_b"]
    assert mean == pytest.approx(2.5) and std == pytest.approx(0) and count == 4
    assert result["slope_verdict"].outcome == "PASS"  # 3 distinct x on an exact line: a point interval
    assert result["r2_verdict"].reason == "3 distinct x values: a + b·x^p fits any 3 points"  # INCONCLUSIVE
    frame = pd.concat([searches_frame().assign(inputs="boolean"), searches_frame().assign(inputs="gaussian")])
    frame.loc[frame["inputs"] == "gaussian", "capacity"] *= 2
    grouped = dataclasses.replace(spec, group_by=("inputs",))
    gaussian = linear_fit(grouped, frame[frame["inputs"] == "gaussian"], "n")
    assert gaussian["b"] == pytest.approx(5) and gaussian["a"] == pytest.approx(10)
    text = linear_section((grouped,), frame, "n")
    assert "| n = a + b · n_cnt (inputs=boolean) | 5.000 ±" in text and "(inputs=gaussian) | 10.000 ±" in text
    halved = options({"fit_linear": [{"x": "m_T", "y": "n / 2", "expect_slope": [0, 1]}]}).fit_linear[0]
    result = linear_fit(halved, searches_frame(), "n")
    assert result["b"] == pytest.approx(5) and result["a"] == pytest.approx(2.5)
    assert result["slope_verdict"].outcome == "FAIL"


# -- ratios ------------------------------------------------------------------------------------------------


def test_ratio_per_point_median_and_range_and_expectation():
    ratio = options({"ratio": {"expr": "n / (2*m_T*d/k)", "label": "n*/n_cnt", "expect": [2, 4]}}).ratios[0]
    searches = searches_frame()
    table = ratio_table(ratio, searches, "n")
    assert table.loc["m1", "median"] == pytest.approx(15 / 4) and table.loc["m1", "min"] == pytest.approx(14 / 4)
    assert table.loc["m4", "max"] == pytest.approx(46 / 16) and table.loc["m4", "n"] == 4
    points = with_ratios(searches[["point"]].drop_duplicates(), (ratio,), searches, "n")
    assert ratio_cell(points.iloc[0].to_dict(), ratio) == "3.75 (3.5–4)"
    assert "medians in [2, 4]: 3 of 3, **PASS**" in ratio_summary(ratio, table)
    tight = dataclasses.replace(ratio, expect=(3.0, 4.0))
    assert "2 of 3, **FAIL**" in ratio_summary(tight, table)


# -- success map ---------------------------------------------------------------------------------------------


def test_probe_table_counts_a_probe_successful_at_any_learning_rate():
    searches = searches_frame()
    spec = options({"success_map": {"x": "m_T"}})
    table = probe_table(spec, runs_frame(searches)).set_index(["x", "value"])
    # m_T = 1: answers 14, 15, 15, 16 -> n = 16 succeeds for all four seeds, 12 for none.
    assert (table.loc[(1.0, 16), "seeds"], table.loc[(1.0, 16), "successes"]) == (4, 4)
    assert table.loc[(1.0, 12), "rate"] == 0 and table.loc[(2.0, 24), "rate"] == 0.25  # answers 24, 25, 25, 26
    assert set(table.reset_index()["group"]) == {"all"}


def test_write_report_with_linear_fit_ratio_and_success_map(tmp_path):
    table = {
        "x": "m_T",
        "fit": "n",
        "group_by": ["d"],
        "fit_linear": {"x": "2*m_T*d/k", "x_label": "n_cnt", "y_label": "n*", "min_r2": 0.9},
        "ratio": {"expr": "n / (2*m_T*d/k)", "label": "n*/n_cnt"},
        "success_map": {"x": "m_T", "y_scale": "linear"},
    }
    searches = searches_frame()
    paths = write_report(tmp_path, options(table), searches, runs_frame(searches), {}, success=RULE)
    names = [p.name for p in paths]
    assert names == ["capacity.csv", "capacity.png", "success_map.csv", "success_map.png", "verdicts.json", "report.md"]
    assert (tmp_path / "success_map.png").read_bytes()[:8] == PNG_MAGIC
    csv = pd.read_csv(tmp_path / "capacity.csv")
    assert {"n*/n_cnt median", "n*/n_cnt min", "n*/n_cnt max"} <= set(csv.columns)
    text = (tmp_path / "report.md").read_text()
    assert "| mean ± std (answered) | n*/n_cnt median (min–max) | bits/param |" in text
    assert "| 15 ± 0.8165 | 3.75 (3.5–4) |" in text
    assert "- n*/n_cnt: point medians 2.812–3.75 over 3 points (single searches 2.75–4)." in text
    fit = next(line for line in text.splitlines() if line.startswith("| n* = a + b · n_cnt |"))
    assert fit.startswith("| n* = a + b · n_cnt | 5.000 ± ") and "| 1.0000 | 3 | 2.500 ± " in fit  # se ~ 1e-15
    assert fit.endswith("(4 seeds) | R² ≥ 0.9: **INCONCLUSIVE** (3 distinct x values: a + b·x^p fits any 3 points) |")
    assert "## Success map" in text and "![success map](success_map.png)" in text
    assert "| d=8 | 1 | 4: 0/4 · 8: 0/4 · 12: 0/4 · 16: 4/4 · 24: 4/4" in text
    assert "| 14, 15, 15, 16 |" in text


def test_a_search_sweep_without_a_finished_search_still_maps_its_probes(tmp_path):
    """A capped or interrupted search sweep whose probes ran but none of whose searches finished: the
    report draws the success map of the probes so far (the phase diagram), with no answers yet."""
    searches = searches_frame()
    table = {"x": "m_T", "success_map": {"x": "m_T"}}
    paths = write_report(
        tmp_path, options(table), searches.iloc[:0], runs_frame(searches), {}, success=RULE, search_variable="n"
    )
    assert [p.name for p in paths] == ["success_map.csv", "success_map.png", "verdicts.json", "report.md"]
    text = (tmp_path / "report.md").read_text()
    assert "No search has finished yet" in text and "| 1 | 4: 0/4 · 8: 0/4 · 12: 0/4 · 16: 4/4" in text


def test_a_point_at_x_zero_is_answered_and_fitted_linearly_but_not_by_the_power_law(tmp_path):
    """x = m_T = 0 (e.g. σ = 0 or ‖μ‖ = 0 in the thesis's sweeps): its searches count as answered and
    enter the linear fit; only the power law and the log-log plot leave it out."""
    searches = searches_frame(m_Ts=(0, 1, 2))
    table = {"x": "m_T", "fit_linear": {"x": "m_T", "y": "n"}}
    write_report(tmp_path, options(table), searches, runs_frame(searches), {}, success=RULE)
    text = (tmp_path / "report.md").read_text()
    assert pd.read_csv(tmp_path / "capacity.csv").set_index("m_T").loc[0, "n_seeds"] == 4
    fit = next(line for line in text.splitlines() if line.startswith("| n = a + b · m_T |"))
    assert "| 1.0000 | 3 |" in fit  # the three points, m_T = 0 included: n* = 5 + 10 m_T exactly
    assert "1 grid points had no answered search (or an x ≤ 0" in text  # the power law's two points


def test_without_the_new_keys_the_capacity_report_is_unchanged(tmp_path):
    searches = searches_frame()
    write_report(tmp_path, options({"x": "m_T"}), searches, runs_frame(searches), {}, success=RULE)
    text = (tmp_path / "report.md").read_text()
    assert "Linear fits" not in text and "Success map" not in text and "Ratios" not in text
    assert not (tmp_path / "success_map.csv").exists()
    assert "| n median | 25–75 % | answered | censored | mean ± std (answered) | bits/param |" in text


# -- the keys ------------------------------------------------------------------------------------------------


def problems_of(table: dict, context: Context) -> list[str]:
    problems: list[str] = []
    read_report(table, problems, context)
    return problems


def test_keys_are_typed_checked_and_suggested():
    context = Context(config=frozenset({"m_T", "d", "k", "n"}), variable="n", goal="smallest")
    good = {"fit_linear": {"x": "2*m_T*d/k", "expect_slope": [0, math.inf]}, "ratio": {"expr": "n/m_T"}}
    good |= {"success_map": {"x": "m_T"}, "search_answer": "stable"}
    assert problems_of(good, context) == []
    bad = {
        "fit_linear": [{"x": "m_t", "expect_slop": [1, 2]}, {"y": "n", "min_r2": "high"}],
        "ratio": {"expr": "n / n_cnt", "expect": [4, 2]},
        "success_map": {"x": "m_T", "y_scale": "logit", "group_by": ["dd"]},
        "fit_lineer": {},
        "search_answer": "smallest",
    }
    problems = problems_of(bad, context)
    expected = [
        "report.fit_lineer: unknown key (did you mean 'fit_linear'?)",
        "report.fit_linear[0].expect_slop: unknown key (did you mean 'expect_slope'?)",
        "report.fit_linear[0].x: 'm_t' is not a config field, params or bits (did you mean 'm_T'?)",
        "report.fit_linear[1].x: missing",
        "report.fit_linear[1].min_r2: must be a finite number, got 'high'",
        "report.ratio[0].expr: 'n_cnt' is not a config field, params or bits; allowed: bits, d, k, m_T, n, params",
        "report.ratio[0].expect: lo must not exceed hi, got [4.0, 2.0]",
        "report.success_map.y_scale: must be one of ['log', 'linear'], got 'logit'",
        "report.success_map.group_by: 'dd' is not a config field (did you mean 'd'?)",
        "report.search_answer: must be one of ['bracket', 'stable'], got 'smallest'",
    ]
    assert sorted(problems) == sorted(expected)
    grid = Context(config=frozenset({"m_T", "d", "k"}))
    assert problems_of({"ratio": {"expr": "d"}, "search_answer": "stable"}, grid) == [
        "report.ratio: needs a [search]",
        "report.search_answer: needs a [search]",
    ]


def test_heatmap_levels_and_shade_are_checked():
    read = lambda heatmap: stored_report_spec({"report": {"heatmap": {"x": "a", "y": "b", **heatmap}}}).heatmap  # noqa: E731
    assert read({}).levels == () and read({}).shade == "metric"
    assert read({"levels": [0.9, 0.5], "shade": "success_rate"}).levels == (0.5, 0.9)
    for bad in ([0.5, 0.5], [0, 0.5], [1.5], [], "0.5"):
        with pytest.raises(SpecError, match="report.heatmap.levels: must be a list of distinct numbers in"):
            read({"levels": bad})
    with pytest.raises(SpecError, match="report.heatmap.shade: must be one of"):
        read({"shade": "rate"})


# -- phase diagrams --------------------------------------------------------------------------------------------


def test_crossing_interpolates_from_the_grid_value_below():
    ys, rates = [10.0, 20.0, 40.0, 80.0], [0.0, 0.25, 0.75, 1.0]
    assert crossing(ys, rates, 0.5) == {"y": 40.0, "crossing": 30.0, "below_grid": False, "dips": 0}
    assert crossing(ys, rates, 0.9)["crossing"] == pytest.approx(40 + 0.15 / 0.25 * 40)
    assert crossing(ys, [0.5, 1.0, 0.25, 1.0], 0.5) == {"y": 10.0, "crossing": 10.0, "below_grid": True, "dips": 1}
    never = crossing(ys, [0.0] * 4, 0.5)
    assert never["y"] is None and math.isnan(never["crossing"])


def phase_runs(seeds=range(4)):
    """A grid over (alpha, n): seed s succeeds iff n ≥ (8 + 8 s) / alpha, so the rate climbs with n."""
    rows = []
    for alpha in (1.0, 2.0):
        for n in (4, 8, 16, 32, 64):
            for seed in seeds:
                ok = n >= (8 + 8 * seed) / alpha
                rows.append(
                    {
                        "run_id": f"{alpha}-{n}-{seed}",
                        "point": f"a{alpha}n{n}",
                        "seed": seed,
                        "lr": 0.01,
                        "value": None,
                        "alpha": alpha,
                        "n": n,
                        "max_metric": 0.001 if ok else 0.5,
                        "success": ok,
                    }
                )
    return pd.DataFrame(rows)


def test_phase_boundaries_per_level():
    cells = pd.DataFrame({"x": [1.0] * 3, "y": [8.0, 16.0, 32.0], "n_success": [1, 2, 4], "seeds": [4] * 3})
    rows = phase_boundaries(cells.assign(success_rate=cells["n_success"] / cells["seeds"]), (0.5, 0.9))
    assert rows[0.5][0]["y"] == 16.0 and rows[0.5][0]["crossing"] == 16.0
    assert rows[0.9][0]["y"] == 32.0 and rows[0.9][0]["crossing"] == pytest.approx(16 + 0.4 / 0.5 * 16)


def test_write_report_grid_phase_diagram(tmp_path):
    heatmap = {"x": "alpha", "y": "n", "levels": [0.5, 0.9], "shade": "success_rate"}
    spec = stored_report_spec({"report": {"heatmap": heatmap}, "train": {"metric": "test_error"}})
    spec = dataclasses.replace(spec, heatmap=dataclasses.replace(spec.heatmap, better="min", threshold=1e-2))
    paths = write_report(tmp_path, spec, pd.DataFrame(), phase_runs(), {}, success=RULE)
    assert [p.name for p in paths] == ["heatmap.csv", "heatmap.png", "verdicts.json", "report.md"]
    cells = pd.read_csv(tmp_path / "heatmap.csv")
    assert cells.loc[(cells["x"] == 1) & (cells["y"] == 16), "success_rate"].item() == 0.5
    text = (tmp_path / "report.md").read_text()
    assert "### Phase diagram: success rate over seeds" in text
    # alpha = 1: rates 0, 1/4, 2/4, 1, 1 at n = 4 ... 64; alpha = 2: 1/4, 2/4, 1, 1, 1.
    assert "| 1 | 16 (grid 16) | 28.8 (grid 32) |" in text  # 90 %: 16 + 0.4 / 0.5 · 16
    assert "| 2 | 8 (grid 8) | 14.4 (grid 16) |" in text
    assert "| 16 | 2/4 | 4/4 |" in text and "| 4 | 0/4 | 1/4 |" in text


def test_a_heatmap_without_levels_has_no_rate_column(tmp_path):
    spec = stored_report_spec({"report": {"heatmap": {"x": "alpha", "y": "n"}}})
    write_report(tmp_path, spec, pd.DataFrame(), phase_runs(), {})
    assert "success_rate" not in pd.read_csv(tmp_path / "heatmap.csv").columns
    assert "Phase diagram" not in (tmp_path / "report.md").read_text()
