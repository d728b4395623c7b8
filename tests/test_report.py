"""Tests for jaxmem.report: fits on synthetic capacity laws, collapse, exclusions, written files."""

import math

import numpy as np
import pandas as pd
import pytest

from jaxmem.report import collapse_stats, fit_power_law, point_table, summarise, write_report
from jaxmem.report.capacity.censored import quantile
from jaxmem.report.capacity.fit import apply_fit
from jaxmem.report.capacity.searches import usable_mask
from jaxmem.report.files import commit, staged, write_text
from jaxmem.spec.sweep import SuccessRule, stored_report_spec

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def options(table: dict):
    """A `[report]` table as the report reads it."""
    return stored_report_spec({"report": table})


def solve_n_log_n(target, c):
    """N with c·N·ln N = target (Newton, vectorised)."""
    target = np.asarray(target, dtype=float)
    n = target / (c * np.log(target))
    for _ in range(50):
        n = n - (c * n * np.log(n) - target) / (c * (np.log(n) + 1))
    return n


def linear_am_searches(ds=(8, 16, 32, 64, 128, 256), seeds=(0, 1, 2), noise=0.0, rng_seed=0):
    """Searches from the linear-AM law 1.3·N ln N = d², with multiplicative seed noise."""
    rng = np.random.default_rng(rng_seed)
    rows = []
    for d in ds:
        n_star = solve_n_log_n(d * d, 1.3)
        for seed in seeds:
            n = float(n_star * math.exp(noise * rng.standard_normal()))
            rows.append(search_row(f"d{d}", seed, {"model": "linear", "d": d}, n, d * d, n * math.log2(n)))
    return pd.DataFrame(rows)


def mlp_searches(offsets=(1.0, 1.0, 1.0, 1.0), ds=(8, 16, 32, 64), seeds=(0, 1)):
    """Searches from 0.35·N ln N = md for m/d ∈ {1,2,4,8}, capacity scaled per group by `offsets`."""
    rows = []
    for ratio, offset in zip((1, 2, 4, 8), offsets):
        for d in ds:
            m = ratio * d
            n = float(solve_n_log_n(m * d, 0.35)) * offset
            for seed in seeds:
                config = {"d": d, "m": m, "m_over_d": float(ratio)}
                rows.append(search_row(f"d{d}_r{ratio}", seed, config, n, 2 * m * d, n * math.log2(n)))
    return pd.DataFrame(rows)


def search_row(point, seed, config, capacity, params, bits, censored=""):
    return {
        "point": point,
        "seed": seed,
        **config,
        "variable": "N",
        "capacity": capacity,
        "first_failure": capacity * 1.05,
        "censored": censored,
        "rounds": 5,
        "probes": 10,
        "non_monotone": False,
        "params": float(params),
        "bits": bits,
        "status": "done",
    }


def runs_frame():
    return pd.DataFrame(
        {
            "run_id": [0, 1, 2, 3],
            "point": ["d8"] * 4,
            "seed": [0, 0, 1, 1],
            "lr": [1e3, 1e-2, 1e3, 1e3],
            "value": [10, 20, 10, 20],
            "max_metric": [1.0, 0.3, 1.0, float("nan")],
            "final_loss": [0.01, 2.0, 0.01, float("nan")],
            "steps_run": [100, 4096, 90, 5],
            "steps_to_threshold": [80, float("nan"), 70, float("nan")],
            "diverged": [False, False, False, True],
            "success": [True, False, True, False],
            "wall_time_s": [1.5, 2.5, 1.0, 0.5],
            "device": ["cpu"] * 4,
            "compiles": [1, 0, 0, 1],
        }
    )


def test_fit_power_law_exact():
    x = np.array([1.0, 10.0, 100.0, 1000.0])
    slope, intercept = fit_power_law(x, 3.0 * x**0.7)
    assert slope == pytest.approx(0.7)
    assert math.exp(intercept) == pytest.approx(3.0)


def test_fit_power_law_degenerate_and_invalid():
    assert all(math.isnan(v) for v in fit_power_law([5.0, 5.0], [1.0, 2.0]))
    with pytest.raises(ValueError):
        fit_power_law([1.0, 2.0], [0.0, 1.0])


def test_slope_recovered_with_fit_transform():
    searches = linear_am_searches(noise=0.05)
    s = summarise(options({"fit": "N*log(N)", "expect_slope": [0.9, 1.1]}), searches)
    assert s["slope"] == pytest.approx(1.0, abs=0.03)
    assert s["slope_seed_mean"] == pytest.approx(1.0, abs=0.05)
    assert 0 < s["slope_seed_std"] < 0.1
    assert s["n_seed_fits"] == 3
    assert s["n_points"] == 6 and s["excluded"] == 0
    assert s["pass"].outcome == "PASS" and s["slope_lo"] < 1 < s["slope_hi"]
    # 1.3·N ln N = params  →  prefactor of N ln N vs params is 1/1.3.
    assert math.exp(s["intercept"]) == pytest.approx(1 / 1.3, rel=0.15)


def test_fit_transform_changes_slope():
    searches = linear_am_searches()
    raw = summarise(options({}), searches)["slope"]
    fitted = summarise(options({"fit": "N*log(N)"}), searches)["slope"]
    assert fitted == pytest.approx(1.0, abs=1e-6)
    # N alone grows slower than d² because of the log: local slope ≈ 1.7/2.
    assert 0.8 < raw < 0.9
    assert summarise(options({"expect_slope": [0.95, 1.05]}), searches)["pass"].outcome == "FAIL"


def test_apply_fit_uses_expression():
    np.testing.assert_allclose(apply_fit("N*log2(N)", "N", [2.0, 8.0]), [2.0, 24.0])
    np.testing.assert_allclose(apply_fit(None, "N", [3.0]), [3.0])


def test_collapse_perfect_groups():
    spec = options({"fit": "N*log(N)", "group_by": ["m_over_d"], "collapse": True})
    c = summarise(spec, mlp_searches())["collapse"]
    assert c["rms"] < 1e-6 and c["max_abs"] < 1e-6
    assert c["spread"] == pytest.approx(1.0, abs=1e-6)
    assert set(c["groups"]) == {"m_over_d=1", "m_over_d=2", "m_over_d=4", "m_over_d=8"}
    assert all(g["slope"] == pytest.approx(1.0, abs=1e-6) for g in c["groups"].values())


def test_collapse_offset_groups():
    spec = options({"fit": "N*log(N)", "group_by": ["m_over_d"], "collapse": True})
    c = summarise(spec, mlp_searches(offsets=(1.0, 2.0, 4.0, 8.0)))["collapse"]
    assert c["rms"] > 0.3
    assert c["max_abs"] > c["rms"]
    assert c["spread"] > 8.0


def test_collapse_stats_direct():
    x = np.array([1.0, 10.0, 1.0, 10.0])
    y = np.array([1.0, 10.0, 2.0, 20.0])
    c = collapse_stats(x, y, ["a", "a", "b", "b"], slope=1.0, intercept=math.log(math.sqrt(2)))
    assert c["rms"] == pytest.approx(math.log(2) / 2)
    assert c["spread"] == pytest.approx(2.0)
    assert c["x_mid"] == pytest.approx(math.sqrt(10))


def test_censored_and_nan_excluded():
    searches = linear_am_searches()
    extra = pd.DataFrame(
        [
            search_row("d8", 3, {"model": "linear", "d": 8}, 1e6, 64, 1e6, censored="above"),
            search_row("d16", 3, {"model": "linear", "d": 16}, float("nan"), 256, float("nan"), censored="below"),
            search_row("d512", 0, {"model": "linear", "d": 512}, float("nan"), 512**2, float("nan")),
        ]
    )
    s_clean = summarise(options({"fit": "N*log(N)"}), searches)
    s = summarise(options({"fit": "N*log(N)"}), pd.concat([searches, extra], ignore_index=True))
    assert s["excluded"] == 3
    assert s["excluded_points"] == 1
    assert s["n_points"] == 6
    assert s["slope"] == pytest.approx(s_clean["slope"])


def test_usable_mask_treats_missing_censored_as_uncensored():
    searches = linear_am_searches(ds=(8, 16), seeds=(0,))
    searches["censored"] = [np.nan, "above"]
    assert usable_mask(searches, "params").tolist() == [True, False]


def test_point_table_aggregates_seeds():
    searches = linear_am_searches(ds=(8, 16), seeds=(0, 1, 2), noise=0.1)
    table = point_table(searches)
    assert len(table) == 2
    row = table[table["point"] == "d8"].iloc[0]
    caps = searches[searches["point"] == "d8"]["capacity"]
    assert row["capacity_mean"] == pytest.approx(caps.mean())
    assert row["capacity_min"] == pytest.approx(caps.min())
    assert row["capacity_max"] == pytest.approx(caps.max())
    assert row["n_seeds"] == 3 and row["d"] == 8 and row["model"] == "linear"


def test_write_report_files(tmp_path):
    spec = options(
        {
            "title": "MLP AM capacity",
            "fit": "N*log(N)",
            "x_label": "md",
            "guide": {"expr": "2*0.35*N*log(N)", "label": "2md = 2·0.35·N ln N (paper)"},
            "group_by": ["m_over_d"],
            "expect_slope": [0.9, 1.1],
            "collapse": True,
        }
    )
    searches = mlp_searches()
    meta = {"spec": "nichani24/mlp_am", "preset": "tiny", "device": "cpu", "wall_time_s": 125.0, "git": "abc"}
    paths = write_report(tmp_path, spec, searches, runs_frame(), meta)
    assert [p.name for p in paths] == ["capacity.csv", "capacity.png", "verdicts.json", "report.md"]
    assert (tmp_path / "capacity.png").read_bytes()[:8] == PNG_MAGIC

    csv = pd.read_csv(tmp_path / "capacity.csv")
    assert len(csv) == searches["point"].nunique()
    assert {"m_over_d", "params", "capacity_mean", "capacity_std", "n_seeds", "bits_per_param_mean"} <= set(csv.columns)

    text = (tmp_path / "report.md").read_text()
    slope = summarise(spec, searches)["slope"]
    assert f"**{slope:.3f}**" in text and "**PASS**" in text
    assert "nichani24/mlp_am" in text and "2.1 min" in text and "git: abc" in text
    assert "Probe runs: 4" in text and "Diverged: 1" in text and "Successful: 2" in text
    assert "compiles (total): 2" in text
    assert "RMS residual" in text and "![capacity](capacity.png)" in text
    table_lines = [line for line in text.splitlines() if line.startswith("| 1 |") or line.startswith("| 8 |")]
    assert table_lines[0].startswith("| 1 |") and table_lines[-1].startswith("| 8 |")


def test_write_report_fail_verdict_without_groups(tmp_path):
    searches = linear_am_searches().drop(columns=["model"])
    write_report(tmp_path, options({"expect_slope": [1.5, 2.0]}), searches, pd.DataFrame(), {})
    text = (tmp_path / "report.md").read_text()
    assert "**FAIL**" in text and "No probe runs recorded." in text


def test_write_report_empty_searches(tmp_path):
    empty = pd.DataFrame(columns=["point", "seed", "variable", "capacity", "censored", "params", "bits"])
    paths = write_report(tmp_path, options({"fit": "N*log(N)", "group_by": ["m_over_d"]}), empty, runs_frame(), {})
    assert [p.name for p in paths] == ["verdicts.json", "report.md"]
    assert not (tmp_path / "capacity.png").exists()
    text = (tmp_path / "report.md").read_text()
    assert "Probe runs: 4" in text and "Fitted slope" not in text


# -- censored searches ---------------------------------------------------------------------------------


def test_censored_quantiles_count_censored_searches_as_bounds():
    rank, value = np.array([0, 0, 1]), np.array([10.0, 20.0, 64.0])
    assert quantile(rank, value, 0.5) == (20.0, "")
    assert quantile(rank, value, 0.25) == (15.0, "")
    assert quantile(rank, value, 0.75) == (42.0, "above")  # between 20 and a search above 64: at least 42
    assert quantile(np.array([-1, 0, 0]), np.array([8.0, 10.0, 20.0]), 0.25) == (9.0, "below")
    assert quantile(np.array([1, 1]), np.array([64.0, 64.0]), 0.5) == (64.0, "above")
    unknown = quantile(np.array([-1, 1]), np.array([8.0, 64.0]), 0.5)
    assert math.isnan(unknown[0]) and unknown[1] == "both"
    assert math.isnan(quantile(np.array([]), np.array([]), 0.5)[0])


def censored_searches():
    """d8: three answers and one search censored above (its hi, 64, succeeded); d16: two answers, one
    censored below (even lo = 16 failed) and one without a capacity."""
    rows = [search_row("d8", s, {"d": 8}, n, 64, n * math.log2(n)) for s, n in enumerate((20.0, 10.0, 30.0))]
    rows.append(search_row("d8", 3, {"d": 8}, 64.0, 64, 384.0, censored="above"))
    rows += [search_row("d16", s, {"d": 16}, n, 256, n * math.log2(n)) for s, n in enumerate((40.0, 50.0))]
    rows.append(search_row("d16", 2, {"d": 16}, float("nan"), 256, float("nan"), censored="below"))
    rows.append(search_row("d16", 3, {"d": 16}, float("nan"), 256, float("nan")))
    frame = pd.DataFrame(rows)
    frame.loc[frame["censored"] == "above", "first_failure"] = float("nan")
    frame.loc[frame["censored"] == "below", "first_failure"] = 16.0
    return frame


def test_point_table_aggregates_censored_searches_as_quantiles():
    table = point_table(censored_searches()).set_index("point")
    d8, d16 = table.loc["d8"], table.loc["d16"]
    assert (d8["n_searches"], d8["n_seeds"], d8["n_above"], d8["n_below"]) == (4, 3, 1, 0)
    assert d8["capacity_median"] == 25.0 and d8["capacity_median_censored"] == ""  # (20 + 30) / 2
    assert d8["capacity_q75"] == pytest.approx(30 + 0.25 * 34) and d8["capacity_q75_censored"] == "above"
    assert d8["capacity_mean"] == 20.0  # over the answered searches only
    assert (d16["n_searches"], d16["n_seeds"], d16["n_below"]) == (4, 2, 1)  # the row without capacity: neither
    assert d16["capacity_median"] == 40.0 and d16["capacity_median_censored"] == ""
    assert d16["capacity_q25"] == pytest.approx(16 + 0.5 * 24) and d16["capacity_q25_censored"] == "below"


def test_capacity_section_and_fit_state_how_censored_searches_count(tmp_path):
    rule = SuccessRule("loss", "at_most", 5.0)
    write_report(tmp_path, options({}), censored_searches(), pd.DataFrame(), {}, success=rule)
    text = (tmp_path / "report.md").read_text()
    assert "Largest N reaching the success threshold (loss ≤ 5 at a run's best evaluation)" in text
    assert "| 8 | 64 | 25 | 17.5 – ≥ 38.5 | 3/4 | 1 above | 20 ± 10 |" in text
    assert "| 16 | 256 | 40 | ≤ 28 – 45 | 2/4 | 1 below | 45 ± 7.071 |" in text
    assert "Left out of those means: 3 of 8 searches, 1 censored above and 1 below the range searched" in text
    csv = pd.read_csv(tmp_path / "capacity.csv", keep_default_na=False)
    assert set(csv["capacity_q75_censored"]) == {"above", ""}


def test_a_threshold_search_words_smallest_and_bounds_by_its_goal(tmp_path):
    """goal = "smallest": a search censored below stored lo as its capacity (lo already succeeded)."""
    searches = pd.DataFrame(
        [search_row("p", 0, {"m": 4}, 3.0, 16, 1.0), search_row("p", 1, {"m": 4}, 1.0, 16, 1.0, censored="below")]
    )
    searches.loc[1, "first_failure"] = float("nan")
    smallest = stored_report_spec({"report": {}, "search": {"goal": "smallest"}})
    write_report(tmp_path, smallest, searches, pd.DataFrame(), {})
    text = (tmp_path / "report.md").read_text()
    assert "Smallest N reaching the success threshold" in text
    assert "| 16 | ≤ 2 | ≤ 1.5 – ≤ 2.5 | 1/2 | 1 below | 3 |" in text


def test_report_md_is_replaced_at_once(tmp_path, monkeypatch):
    path = tmp_path / "report.md"
    write_text(path, "old\n")
    monkeypatch.setattr("os.replace", lambda *a: (_ for _ in ()).throw(OSError("disk full")))
    with pytest.raises(OSError, match="disk full"):
        write_text(path, "new\n")
    assert path.read_text() == "old\n" and [p.name for p in tmp_path.iterdir()] == ["report.md"]


def test_reference_verdicts_count_unverified_instances_apart():
    import pandas as pd

    from jaxmem.report.checks.references import verdicts

    host = pd.Series([1.0, 0.0, float("nan"), 1.0, float("nan")])
    engine = pd.Series([1.0, 0.0, 1.0, 0.0, 0.0])
    assert verdicts(host, engine) == "2/3 agree, 2 unverified (the host reached no verdict)"
    assert verdicts(host.fillna(1.0), engine) == "3/5 agree"


def test_capacity_tables_show_the_effective_config(tmp_path):
    """capacity.csv, searches.csv and report.md show what the programs ran: a linear memory's m = 1 and
    no bias, and M = "N" (it follows the searched variable), not the stored M = 0, m = 0, mlp_bias = True;
    a ratio naming M takes N's value there."""
    import json

    from jaxmem.persistence.store import Store
    from jaxmem.report.from_store import report

    stored = {"model": "linear", "M": 0, "m": 0, "mlp_bias": True, "init": "standard", "loss_form": "log_softmax"}
    rows = linear_am_searches(ds=(8, 16), seeds=(0, 1))
    rows = rows.assign(unit=rows["point"] + "/" + rows["seed"].astype(str))
    rows["config"] = [json.dumps({**stored, "d": int(d)}) for d in rows.pop("d")]
    report_table = {"ratio": {"expr": "N / M", "label": "N/M", "expect": [1, 1]}}
    store = Store(tmp_path)
    resolved = {"experiment": "assoc_memory", "search": {"variable": "N"}, "report": report_table}
    store.set_meta({"experiment": "assoc_memory", "resolved_spec": json.dumps(resolved), "elapsed_s": "1.0"})
    store.add_searches(rows.drop(columns="model").to_dict("records"))
    store.close()
    text = report(tmp_path).read_text()
    for name in ("capacity.csv", "searches.csv"):
        table = pd.read_csv(tmp_path / name)
        assert (table["M"] == "N").all() and (table["m"] == 1).all() and not table["mlp_bias"].any(), name
    assert pd.read_csv(tmp_path / "capacity.csv")["d"].tolist() == [8, 16]  # sorted by x (params = d²)
    assert "- N/M: point medians 1–1 over 2 points" in text and "**INCONCLUSIVE** (2 points)" in text


def test_a_committed_report_removes_the_figures_it_no_longer_draws(tmp_path):
    """A heatmap taken out of the spec: the next report's commit removes the old heatmap.png (a gallery would
    show it), keeps the figures it drew again and files that are no report figure."""
    for name in ("heatmap.png", "relations.png", "notes.png"):
        (tmp_path / name).write_text("old")
    with staged() as stage:
        write_text(tmp_path / "relations.png", "new")
        commit(stage, tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.png", "relations.png"]
    assert (tmp_path / "relations.png").read_text() == "new"
