"""Reports of trajectory sweeps (jaxmem.report.trajectory: stages, escape) on synthetic stores whose
curves have known crossings, plateaus and escape slopes: no training."""

import json
import math
import re

import numpy as np
import pandas as pd
import pytest

from jaxmem.report import write_report
from jaxmem.report.from_store import report, stored_sweep
from jaxmem.report.trajectory.data import planned_runs
from jaxmem.report.trajectory.escape import escape_fits, fit_line
from jaxmem.report.trajectory.guides import rate_guides
from jaxmem.report.trajectory.markdown import rates_section
from jaxmem.report.trajectory.rates import rate_columns, rate_tables
from jaxmem.report.verdicts import stating
from jaxmem.report.trajectory.report import panel_title
from jaxmem.report.trajectory.stages import crossing_verdict, first_crossing, plateau
from jaxmem.spec.sweep import SpecError, stored_report_spec
from jaxmem.spec.report_tables import Context, read_report
from jaxmem.persistence.store import Store, load_results

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
LR = 0.1
LAMBDA_R, LAMBDA_S = 0.07655, 0.02923  # Nichani et al. §6.3, Fig 5
EVERY, STEPS, WIDTH = 64, 8192, 1000
ALPHAS = (1e-3, 1e-4, 1e-5, 1e-6, 1e-7)
JITTER = 8.0  # seed 0 crosses JITTER steps late, seed 1 JITTER early: the mean law is unchanged
FACTOR = {"population": 1.0, "sampled": 1.2}  # the sampled model escapes 20% slower
TRAJECTORY = {
    "metrics": ["loss", "relation_loss", "subject_loss"],
    "group_by": ["model"],
    "references": [{"y": "log(32)", "label": "ln |A|"}, {"y": "log(D)", "label": "ln D"}],
    "stages": [
        {"from": 0, "to": 1800, "label": "Stage 1: Init"},
        {"from": 1800, "to": 5000, "label": "Stage 2: Hallucination"},
        {"from": 5000, "to": 8192, "label": "Stage 3: Convergence"},
    ],
    "crossings": [
        {"metric": "relation_loss", "below": "log(4)/2", "label": "relation learned"},
        {"metric": "subject_loss", "below": "log(S/2)/2", "label": "subject learned"},
    ],
    "plateau": {"metric": "loss", "near": "log(D)", "tol": 0.1, "label": "hallucination"},
    "escape": {
        "x": "log(1/init_scale)",
        "x_label": "ln(1/α)",
        "predicted": {"relation learned": "1/(lr*0.07655)", "subject learned": "1/(lr*0.02923)"},
    },
}


def options(table: dict):
    """A `[report]` table as the report reads it."""
    return stored_report_spec({"report": table})


def trajectory_spec(table: dict):
    return options({"trajectory": table}).trajectory


def ramp(step, centre):
    """1 before centre − WIDTH/2, 0 after centre + WIDTH/2, linear between: crosses 1/2 at `centre`."""
    return np.clip(0.5 + (centre - step) / WIDTH, 0.0, 1.0)


def escape_steps(model, alpha, seed):
    """The designed crossing steps: ln(1/α)/(lr·λ) (× the model's factor), ± JITTER by seed."""
    shift = JITTER if seed == 0 else -JITTER
    e = math.log(1 / alpha)
    return FACTOR[model] * e / (LR * LAMBDA_R) + shift, FACTOR[model] * e / (LR * LAMBDA_S) + shift


def curves(model, alpha, seed, steps=STEPS):
    """loss = ln4·u_r + ln8·u_s: ln 32 at init, a plateau at ln 8 after the relation ramp, 0 at the end."""
    t_r, t_s = escape_steps(model, alpha, seed)
    grid = np.arange(0, steps + 1, EVERY)
    u_r, u_s = ramp(grid, t_r), ramp(grid, t_s)
    metrics = {"relation_loss": math.log(4) * u_r, "subject_loss": math.log(8) * u_s}
    metrics["loss"] = metrics["relation_loss"] + metrics["subject_loss"]
    metrics["accuracy"] = 1.0 - 0.875 * u_s
    return grid, metrics


def run_id(model, alpha, seed):
    return f"{model}-{alpha:g}-{seed}"


def run_row(model, alpha, seed, steps=STEPS, diverged=False):
    config = {"model": model, "init_scale": alpha, "S": 16, "R": 4, "D": 8}
    return {
        "run_id": run_id(model, alpha, seed),
        "point": f"{model}-{alpha:g}",
        "seed": seed,
        "lr": LR,
        "value": None,
        "round": 0,
        "config": config,
        "bucket": "b0",
        "max_metric": 1.0,
        "final_metric": 1.0,
        "final_loss": 0.0,
        "steps_run": steps,
        "steps_to_threshold": None,
        "diverged": diverged,
        "success": True,
        "wall_time_s": 0.1,
        "device": "cpu",
        "finished_at": 0.0,
        "final_metrics": {"loss": 0.0},
    }


def points(model, alpha, seed, steps=STEPS):
    grid, metrics = curves(model, alpha, seed, steps)
    return [
        (run_id(model, alpha, seed), int(s), {k: float(v[i]) for k, v in metrics.items()}) for i, s in enumerate(grid)
    ]


def fig5_store(out, report_spec, models=("population", "sampled"), seeds=(0, 1)):
    store = Store(out)
    resolved = {"experiment": "sequential_learning", "train": {"learning_rates": [LR]}, "report": report_spec}
    store.set_meta({"experiment": "sequential_learning", "resolved_spec": json.dumps(resolved), "elapsed_s": "1.0"})
    for model in models:
        for alpha in ALPHAS:
            for seed in seeds:
                store.add_runs([run_row(model, alpha, seed)], points(model, alpha, seed))
    store.close()


# -- the rules ---------------------------------------------------------------------------------------


def test_first_crossing_interpolates_between_the_evaluations_around_it():
    steps, values = [0, 10, 20, 30], [1.0, 0.8, 0.2, 0.1]
    assert first_crossing(steps, values, 0.5) == pytest.approx(15.0)
    assert first_crossing(steps, values, 0.8) == 10.0  # reached exactly at an evaluation
    assert first_crossing(steps, values, 1.5) == 0.0  # already past at the first evaluation
    assert math.isnan(first_crossing(steps, values, 0.0))  # never
    assert first_crossing(steps, [0.0, 0.4, 1.0, 1.0], 0.7, "above") == pytest.approx(15.0)
    # NaN evaluations are skipped: the crossing interpolates between the finite neighbours 0 and 20
    assert first_crossing(steps, [1.0, math.nan, 0.0, 0.0], 0.25) == pytest.approx(15.0)
    # it is the FIRST crossing that counts, even if the metric comes back up later
    assert first_crossing([0, 1, 2, 3, 4], [1, 0, 1, 1, 0], 0.5) == pytest.approx(0.5)
    assert math.isnan(first_crossing([], [], 0.5))


def test_plateau_first_last_length_and_contiguity():
    steps = np.arange(0, 100, 10)
    values = np.array([3.0, 2.5, 2.1, 2.05, 2.3, 2.07, 2.09, 1.0, 0.5, 0.1])
    found = plateau(steps, values, near=2.079, tol=0.1)
    assert found == {"first": 20.0, "last": 60.0, "length": 40.0, "in_band": 4, "between": 5}
    assert plateau(steps, values, near=5.0, tol=0.1)["in_band"] == 0
    assert math.isnan(plateau(steps, values, near=5.0, tol=0.1)["first"])


def test_fit_line_slope_and_standard_error():
    x = np.array([1.0, 2.0, 3.0, 4.0])
    y = 3.0 + 2.0 * x + np.array([0.1, -0.1, -0.1, 0.1])
    fit = fit_line(x, y)
    sxx = 5.0
    assert fit["slope"] == pytest.approx(2.0) and fit["intercept"] == pytest.approx(3.0)
    assert fit["slope_se"] == pytest.approx(math.sqrt(0.04 / 2 / sxx))
    assert math.isnan(fit_line([1.0, 1.0], [2.0, 3.0])["slope"])
    assert math.isnan(fit_line([1.0, 2.0], [2.0, 3.0])["slope_se"])  # two points: a slope, no error


def test_trajectory_spec_defaults_and_errors():
    spec = trajectory_spec({})
    assert spec.x == "step" and spec.metrics is None and spec.crossings == () and spec.escape is None
    full = trajectory_spec(TRAJECTORY)
    assert [c.label for c in full.crossings] == ["relation learned", "subject learned"]
    assert full.escape.y == "step" and full.escape.group_by == ("model",) and full.escape.tolerance == 0.1
    assert full.plateaus[0].near == "log(D)" and full.stages[1].start == 1800
    bad = {
        "report.trajectory.bogus: unknown key": {"bogus": 1},
        "report.trajectory.x: must be one of ['step', 'time'], got 'epoch'": {"x": "epoch"},
        "crossings[0]: needs exactly one of below, above": {"crossings": [{"metric": "loss"}]},
        "crossings[0]: needs exactly one of": {"crossings": [{"metric": "loss", "below": 1, "above": 2}]},
        "stages[0]: to (1) must be larger than from (5)": {"stages": [{"from": 5, "to": 1}]},
        "plateau[0].tol: missing": {"plateau": {"metric": "loss", "near": 1}},
        "escape: needs report.trajectory.crossings": {"escape": {"x": "log(1/init_scale)"}},
        "escape.predicted.b: unknown key": {
            "crossings": [{"metric": "loss", "below": 1, "label": "a"}],
            "escape": {"x": "a", "predicted": {"b": 1}},
        },
        "references[0].y: cannot parse expression": {"references": [{"y": "log(("}]},
        "crossings[0].lable: unknown key (did you mean 'label'?)": {
            "crossings": [{"metric": "loss", "below": 1, "lable": "a"}]
        },
    }
    for message, table in bad.items():
        with pytest.raises(SpecError, match=re.escape(message)):
            trajectory_spec(table)


# -- the report ----------------------------------------------------------------------------------------


def test_fig5_sweep_crossings_plateau_and_escape_law(tmp_path):
    fig5_store(tmp_path, {"title": "Fig 5", "trajectory": TRAJECTORY})
    text = report(tmp_path).read_text()
    for name in ("trajectory.png", "escape.png"):
        assert (tmp_path / name).read_bytes()[:8] == PNG_MAGIC
    stages = pd.read_csv(tmp_path / "stages.csv").set_index("run_id")
    assert len(stages) == 2 * len(ALPHAS) * 2

    for model in FACTOR:
        for alpha in ALPHAS:
            for seed in (0, 1):
                row = stages.loc[run_id(model, alpha, seed)]
                t_r, t_s = escape_steps(model, alpha, seed)
                assert row["relation learned [step]"] == pytest.approx(t_r, abs=1e-6)
                assert row["subject learned [step]"] == pytest.approx(t_s, abs=1e-6)
                assert row["relation learned [time]"] == pytest.approx(t_r * LR, abs=1e-6)
                assert row["relation learned [level]"] == pytest.approx(math.log(4) / 2)
                assert row["subject learned [level]"] == pytest.approx(math.log(8) / 2)
                # plateau |loss − ln 8| ≤ 0.1: from the end of the relation ramp to the start of the subject ramp
                first = math.ceil((t_r + WIDTH * (0.5 - 0.1 / math.log(4))) / EVERY) * EVERY
                last = math.floor((t_s - WIDTH * (0.5 - 0.1 / math.log(8))) / EVERY) * EVERY
                assert row["plateau hallucination: first [step]"] == first
                assert row["plateau hallucination: last [step]"] == last
                assert row["plateau hallucination: length [step]"] == last - first
                assert row["plateau hallucination: in_band"] == row["plateau hallucination: between"]

    # the escape law: slope = factor / (lr λ) exactly (the ± jitter averages out at every x); its standard
    # error from residuals of exactly ±JITTER: sqrt(n JITTER² / (n − 2) / Sxx)
    x = np.log(1 / np.array(ALPHAS))
    n, sxx = 2 * len(ALPHAS), 2 * float(((x - x.mean()) ** 2).sum())
    se = math.sqrt(n * JITTER**2 / (n - 2) / sxx)
    spec = trajectory_spec(TRAJECTORY)
    fits = escape_fits(stages.reset_index(), spec, ["model", "init_scale", "S", "R", "D"]).set_index(
        ["crossing", "group"]
    )
    for model, factor in FACTOR.items():
        for label, lam in (("relation learned", LAMBDA_R), ("subject learned", LAMBDA_S)):
            fit = fits.loc[(label, f"model={model}")]
            assert fit["slope"] == pytest.approx(factor / (LR * lam), rel=1e-9)
            assert fit["slope_se"] == pytest.approx(se, rel=1e-6)
            assert fit["predicted"] == pytest.approx(1 / (LR * lam))
            assert fit["ratio"] == pytest.approx(factor, rel=1e-9)
            assert fit["verdict"] == ("PASS" if model == "population" else "FAIL")
            assert fit["n"] == n

    # report.md: every section, the verdicts and the predicted slopes
    for heading in ("## Trajectories", "### Crossing times", "### Plateaus", "### Escape-time law"):
        assert heading in text
    assert "![trajectory](trajectory.png)" in text and "![escape](escape.png)" in text
    assert text.count("| **PASS** |") == 2 and text.count("| **FAIL** (slope CI [") == 2
    assert "130.6" in text and "342.1" in text  # 1/(lr λ_r), 1/(lr λ_s)
    assert "ln |A| = 3.466" in text and "ln D = 2.079" in text
    assert "20 runs with recorded trajectories (20 finished)" in text
    assert "| model=population, init_scale=1e-07 | 2 |" in text  # per panel and series


def test_trajectories_csv_is_wide_with_time_config_and_metrics(tmp_path):
    fig5_store(tmp_path, {"trajectory": {"x": "time", "x_scale": "log", "seeds": "band"}}, models=("population",))
    report(tmp_path)
    table = pd.read_csv(tmp_path / "trajectories.csv")
    expected = {"run_id", "step", "time", "status", "seed", "lr", "model", "init_scale", "S", "loss", "accuracy"}
    assert expected <= set(table.columns)
    assert len(table) == len(ALPHAS) * 2 * (STEPS // EVERY + 1)
    assert np.allclose(table["time"], table["step"] * LR)
    one = table[table["run_id"] == run_id("population", 1e-5, 0)].sort_values("step")
    _, metrics = curves("population", 1e-5, 0)
    assert np.allclose(one["relation_loss"], metrics["relation_loss"])
    assert (table["status"] == "finished").all()
    pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "trajectories.parquet"), table)
    assert (tmp_path / "trajectory.png").read_bytes()[:8] == PNG_MAGIC
    assert not (tmp_path / "stages.csv").exists() and not (tmp_path / "escape.png").exists()


def test_gradient_flow_time_units_for_crossings_and_escape(tmp_path):
    spec = {
        **TRAJECTORY,
        "x": "time",
        "escape": {**TRAJECTORY["escape"], "predicted": {"relation learned": "1/0.07655"}},
    }
    fig5_store(tmp_path, {"trajectory": spec}, models=("population",))
    text = report(tmp_path).read_text()
    assert "fitted slope [times per unit x]" in text and "13.06" in text  # 1/λ_r in time units
    assert text.count("| **PASS** |") == 1 and "**FAIL**" not in text
    assert "relation learned [time]" in text


def test_sweep_without_trajectories_writes_nothing_trajectory_related(tmp_path):
    store = Store(tmp_path)
    resolved = {"experiment": "sequential_learning", "report": {"trajectory": TRAJECTORY}}
    store.set_meta({"experiment": "sequential_learning", "resolved_spec": json.dumps(resolved), "elapsed_s": "1.0"})
    store.add_runs([run_row("population", 1e-5, 0)])
    store.close()
    text = report(tmp_path).read_text()
    for name in ("trajectories.csv", "trajectory.png", "stages.csv", "escape.png"):
        assert not (tmp_path / name).exists()
    assert "Trajectories" not in text and "Crossing" not in text
    paths = write_report(tmp_path / "direct", options({}), pd.DataFrame(), pd.DataFrame(), {}, None, pd.DataFrame())
    assert [p.name for p in paths] == ["verdicts.json", "report.md"]


def test_mid_sweep_runs_in_flight_get_their_config_from_the_plan(tmp_path):
    """A grid sweep half done: two runs finished, two still running (trajectories but no runs row yet, and
    only their first quarter of steps). The plan gives the running runs their config."""
    resolved = {
        "experiment": "assoc_memory",
        "seeds": [0, 1],
        "fixed": {"model": "linear", "d": 8, "N": 16},
        "grid": {"M": [4, 8]},
        "train": {"steps": STEPS, "eval_every": EVERY, "learning_rates": [LR]},
        "report": {
            "trajectory": {
                "metrics": ["loss"],  # relation_loss's curves, stored as an assoc_memory metric
                "group_by": ["M"],
                "crossings": [{"metric": "loss", "below": "log(4)/2", "label": "learned"}],
                "references": [{"y": "log(M)", "label": "ln M"}],
            }
        },
    }
    plan = planned_runs(stored_sweep(resolved)).sort_values(["M", "seed"]).reset_index(drop=True)
    assert len(plan) == 4 and set(plan["M"]) == {4, 8}
    store = Store(tmp_path)
    store.set_meta({"experiment": "assoc_memory", "resolved_spec": json.dumps(resolved), "elapsed_s": "1.0"})
    for i, run in enumerate(plan.to_dict("records")):
        grid, metrics = curves("population", 1e-4 if i < 2 else 1e-7, 0)
        done = i < 2
        cut = len(grid) if done else len(grid) // 4  # running runs have reached step 2048 only
        traj = [(run["run_id"], int(grid[j]), {"loss": float(metrics["relation_loss"][j])}) for j in range(cut)]
        if done:
            row = run_row("population", 1e-4, run["seed"])
            row.update(run_id=run["run_id"], point=run["point"], config={k: run[k] for k in ("model", "d", "N", "M")})
            store.add_runs([row], traj)
        else:
            store.add_runs([], traj)
    store.close()

    text = report(tmp_path).read_text()
    table = pd.read_csv(tmp_path / "trajectories.csv")
    status = table.groupby("run_id")["status"].first()
    assert sorted(status) == ["finished", "finished", "running", "running"]
    assert table["M"].notna().all()  # the running runs' config came from the plan
    stages = pd.read_csv(tmp_path / "stages.csv").set_index("run_id")
    t_early, _ = escape_steps("population", 1e-4, 0)
    assert stages.loc[plan["run_id"][0], "learned [step]"] == pytest.approx(t_early, abs=1e-6)
    # M = 8 runs (α = 1e-7) cross at ≈ 2113 > 2048: not yet
    assert stages.loc[plan["run_id"][2:], "learned [step]"].isna().all()
    assert "2 finished, 2 running" in text and "not yet" in text
    assert "ln M = 1.386" in text and "ln M = 2.079" in text  # a reference line per panel
    assert (tmp_path / "trajectory.png").read_bytes()[:8] == PNG_MAGIC


def test_unknown_metric_or_field_is_an_error(tmp_path):
    fig5_store(tmp_path, {"trajectory": {"metrics": ["los"]}}, models=("population",), seeds=(0,))
    with pytest.raises(ValueError, match="not recorded"):
        report(tmp_path)
    raw = load_results(tmp_path, "trajectories")
    runs = load_results(tmp_path)
    with pytest.raises(ValueError, match="not config fields"):
        write_report(tmp_path, options({"trajectory": {"group_by": ["modle"]}}), pd.DataFrame(), runs, {}, None, raw)
    with pytest.raises(ValueError, match="unknown names"):
        spec = {"crossings": [{"metric": "loss", "below": "log(Q)"}]}
        write_report(tmp_path, options({"trajectory": spec}), pd.DataFrame(), runs, {}, None, raw)


def test_search_sweep_with_trajectories_and_an_open_probe(tmp_path):
    """Search sweeps may record trajectories too (capacity files and trajectory files side by side); a
    probe still in flight has no config anywhere (the plan of a search is not known up front)."""
    from jaxmem.spec.sweep import load

    resolved = load("tests/specs/tiny_mlp.toml").resolved
    assert planned_runs(stored_sweep(resolved)).empty
    store = Store(tmp_path)
    store.set_meta({"experiment": "assoc_memory", "resolved_spec": json.dumps(resolved), "elapsed_s": "1.0"})
    rows, traj = [], []
    for n in (8, 16, 32):
        row = run_row("mlp", 1e-5, 0)
        row.update(run_id=f"n{n}", point="p", value=n, config={"model": "mlp", "d": 8, "m": 8, "N": n}, success=n < 32)
        rows.append(row)
        traj += [
            (f"n{n}", s, {"loss": math.log(n) * math.exp(-s / 100), "accuracy": 1 - math.exp(-s / 50)})
            for s in range(0, 512, 32)
        ]
    traj += [("open-probe", s, {"loss": 1.0, "accuracy": 0.5}) for s in (0, 32)]
    search = {
        "unit": "p/0",
        "point": "p",
        "seed": 0,
        "config": {"model": "mlp", "d": 8, "m": 8},
        "variable": "N",
        "capacity": 16.0,
        "first_failure": 32.0,
        "censored": "",
        "rounds": 2,
        "probes": 3,
        "non_monotone": False,
        "params": 128.0,
        "bits": 64.0,
        "status": "done",
    }
    store.add_runs(rows, traj)
    store.add_searches([search])
    store.close()
    spec = {"crossings": [{"metric": "accuracy", "above": 0.99, "label": "fit"}], "references": [{"y": "log(d)"}]}
    resolved["report"] = {"trajectory": spec}
    store = Store(tmp_path)
    store.set_meta({"resolved_spec": json.dumps(resolved)})
    store.close()
    text = report(tmp_path).read_text()
    for name in ("capacity.csv", "trajectories.csv", "trajectory.png", "stages.csv"):
        assert (tmp_path / name).exists()
    stages = pd.read_csv(tmp_path / "stages.csv").set_index("run_id")
    # accuracy 1 − e^{−s/50} ≥ 0.99 at s = 50 ln 100 = 230.3, interpolated between the evaluations at 224 and 256
    a, b = 1 - math.exp(-224 / 50), 1 - math.exp(-256 / 50)
    assert stages.loc["n8", "fit [step]"] == pytest.approx(224 + (0.99 - a) * 32 / (b - a))
    assert stages.loc["open-probe", "status"] == "running" and math.isnan(stages.loc["open-probe", "fit [step]"])
    assert "## Capacity" in text and "3 finished, 1 running" in text
    assert "N=8" in text and "log(d) = 2.079" in text  # one colour per N
    # a reference line is one value per panel: N varies inside the panel
    spec["references"] = [{"y": "log(N)"}]
    store = Store(tmp_path)
    store.set_meta({"resolved_spec": json.dumps(resolved)})
    store.close()
    with pytest.raises(ValueError, match="constant within the panel"):
        report(tmp_path)


def test_the_documented_example_is_a_valid_table():
    import tomllib

    from jaxmem.spec import report_tables as module

    block = module.__doc__.split("Example")[1].split("\nRules")[0]
    text = "\n".join(line[4:] for line in block.splitlines()[1:])
    spec = options(tomllib.loads(text)["report"]).trajectory
    assert [c.label for c in spec.crossings] == ["relation learned", "subject learned"]
    assert spec.escape.predicted["subject learned"] == "1/(lr*0.02923)" and len(spec.stages) == 3


def test_predicted_rates_are_drawn_over_the_fitted_steps_only():
    """The guides of trajectory.png: t⁻¹ through the last mean of a loss gap falling as 3/t, and
    ‖W^mm‖·ln t (here 4 ln t against a curve rising as 2 ln t) through the last mean, over the last decade."""
    steps = np.unique(np.geomspace(1, 10_000, 41).round())
    frame = pd.DataFrame({"run_id": "r", "step": steps, "gap": 3 / steps, "w": 2 * np.log(steps) + 1, "wmm": 4.0})
    spec = trajectory_spec(
        {
            "rates": [
                {"metric": "gap", "scale": "loglog", "decades": 1, "predicted": "-1", "label": "gap ~ 1/t"},
                {"metric": "w", "scale": "log", "decades": 1, "predicted": "wmm", "label": "w ~ wmm ln t"},
            ]
        }
    )
    runs = pd.DataFrame([{"run_id": "r", "panel": "all", "series": "all", "seed": 0}])
    rates, _ = rate_tables(frame, runs, spec)
    guides = rate_guides(spec, rates, frame, lambda metric, group: metric if metric != "w" or group == "all" else None)
    (gap,), (w,) = guides["gap"], guides["w"]
    assert gap.x[0] == pytest.approx(1000) and gap.x[-1] == pytest.approx(10_000)
    assert np.allclose(gap.y, 3 / gap.x) and gap.label == "predicted: gap ~ 1/t"
    assert w.y[-1] == pytest.approx(2 * math.log(10_000) + 1)
    assert np.allclose(w.y, w.y[-1] + 4 * np.log(w.x / 10_000))  # twice the curve's slope: they part to the left
    assert rate_guides(spec, rates, frame, lambda metric, group: None) == {}
    assert panel_title("gap · optimizer=gd", "gap", spec) == "gap, rate gap ~ 1/t, optimizer = gd"


def test_a_linear_rate_is_fitted_inside_its_window_and_drawn_against_time():
    """metric = 2·0.9^step until it hits a floor of 1e-12: scale "exp" over the window (1e-9, 1e-2] of the
    first value fits ln 0.9 per step; without the window the floor would flatten the slope."""
    steps = np.arange(0, 400, 5.0)
    metric = np.maximum(2 * 0.9**steps, 1e-12)
    lr = 0.5
    frame = pd.DataFrame({"run_id": "r", "step": steps, "time": lr * steps, "g": metric})
    table = {"metric": "g", "scale": "exp", "window": [1e-9, 1e-2], "predicted": "log(0.9)", "label": "v"}
    spec = trajectory_spec({"x": "time", "rates": [table]})
    runs = pd.DataFrame([{"run_id": "r", "panel": "all", "series": "all", "seed": 0}])
    rates, _ = rate_tables(frame, runs, spec)
    (row,) = rates.to_dict("records")
    inside = steps[(metric / 2 > 1e-9) & (metric / 2 <= 1e-2)]
    assert (row["from_step"], row["to_step"], row["n"]) == (inside.min(), inside.max(), inside.size)
    assert row["slope"] == pytest.approx(math.log(0.9)) and row["within"]
    floored = trajectory_spec({"rates": [{"metric": "g", "scale": "exp", "decades": 1}]})
    (flat,) = rate_tables(frame, runs, floored)[0].to_dict("records")
    assert abs(flat["slope"] / math.log(0.9) - 1) > 0.2  # the floor is inside the last decade: the fit is off
    (guide,) = rate_guides(spec, rates, frame, lambda metric, group: metric)["g"]
    assert guide.x[-1] == pytest.approx(lr * inside.max())
    assert np.allclose(guide.y, 2 * 0.9 ** (guide.x / lr), rtol=1e-9)  # per step, drawn in time units
    problems: list[str] = []
    read_report({"trajectory": {"rates": [{"metric": "loss", "scale": "exp", "window": [0, 1]}]}}, problems, Context())
    assert problems == [
        "report.trajectory.rates[0].window: lo must be > 0 (a ratio to the first value), got [0.0, 1.0]"
    ]


def rate_runs(slopes: dict, falls: dict) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Runs r<H>_<seed> of a loss falling as k^slope and a margin that falls by `falls` once, one series per H."""
    steps = np.geomspace(1, 10_000, 21)
    frames, rows = [], []
    for (H, seed), slope in slopes.items():
        margin = np.linspace(1, 2, steps.size) - np.where(np.arange(steps.size) == 10, falls.get((H, seed), 0), 0)
        frames.append(pd.DataFrame({"run_id": f"r{H}_{seed}", "step": steps, "loss": steps**slope, "margin": margin}))
        rows.append({"run_id": f"r{H}_{seed}", "panel": "all", "series": f"H={H}", "seed": seed, "H": H})
    return pd.concat(frames, ignore_index=True), pd.DataFrame(rows)


def test_rate_and_trend_verdicts_read_the_runs_interval_and_where_keeps_runs():
    """H = 1: three runs at slopes −0.98, −1.0, −1.02 against −1 (±20 %): PASS; H = 2: −0.5 ± 0.01: FAIL; H = 4:
    two runs: INCONCLUSIVE. The margin trend: H = 2's seed 1 falls once (FAIL), H = 1's three runs rise (PASS).
    With where = {H = 1} only H = 1's runs are measured."""
    slopes = {(1, 0): -0.98, (1, 1): -1.0, (1, 2): -1.02, (2, 0): -0.49, (2, 1): -0.5, (2, 2): -0.51}
    frame, runs = rate_runs({**slopes, (4, 0): -1.0, (4, 1): -1.0}, {(2, 1): 0.5})
    rate = {"metric": "loss", "scale": "loglog", "decades": 2, "predicted": "-1", "tolerance": 0.2, "label": "1/k"}
    spec = trajectory_spec({"rates": [rate], "trends": [{"metric": "margin", "label": "margin"}]})
    rates, trends = rate_tables(frame, runs, spec)
    with stating() as claims:
        text = rates_section(rates, trends, spec)
    outcomes = {(c.section.split(" / ")[1], c.claim.split("(")[1].split(")")[0]): c.verdict.outcome for c in claims}
    assert outcomes == {
        ("Asymptotic rates", "H=1"): "PASS",
        ("Asymptotic rates", "H=2"): "FAIL",
        ("Asymptotic rates", "H=4"): "INCONCLUSIVE",
        ("Trends", "H=1"): "PASS",
        ("Trends", "H=2"): "FAIL",
        ("Trends", "H=4"): "INCONCLUSIVE",
    }
    h1 = next(c for c in claims if "H=1" in c.claim and "rates" in c.section)
    assert h1.measured == pytest.approx(1.0) and 0.8 < h1.interval[0] < 1 < h1.interval[1] < 1.2
    assert h1.band == (0.8, 1.2)
    assert "1 of 3 runs move against it" in text and "(2 runs)" in text
    kept = trajectory_spec(
        {"rates": [{**rate, "where": {"H": 1}}], "trends": [{"metric": "margin", "where": {"H": [1, 4]}}]}
    )
    rates, trends = rate_tables(frame, runs, kept)
    assert set(rates["series"]) == {"H=1"} and set(trends["series"]) == {"H=1", "H=4"}


def test_a_crossing_states_whether_every_run_reaches_it_in_order():
    """Three finished runs reaching both stages in order: PASS; a run reaching the second stage first, or a
    finished run never reaching it: FAIL; one still running before it, or two runs: INCONCLUSIVE."""
    nan = math.nan
    finished = np.ones(3, bool)
    assert crossing_verdict(np.array([5.0, 6, 7]), finished, np.array([1.0, 2, 3])).outcome == "PASS"
    early = crossing_verdict(np.array([5.0, 1, 7]), finished, np.array([1.0, 2, 3]))
    assert (early.outcome, early.reason) == ("FAIL", "1 of 3 runs never reach it or reach it first")
    assert crossing_verdict(np.array([5.0, nan, 7]), finished).outcome == "FAIL"
    running = crossing_verdict(np.array([5.0, nan, 7]), np.array([True, False, True]))
    assert (running.outcome, running.reason) == ("INCONCLUSIVE", "1 of 3 runs still running before it")
    assert crossing_verdict(np.array([5.0, 6]), finished[:2]).reason == "2 runs"
    problems: list[str] = []
    crossings = [{"metric": "loss", "below": 1, "label": "a"}, {"metric": "loss", "below": 0.5, "after": "b"}]
    read_report({"trajectory": {"crossings": crossings}}, problems, Context())
    assert problems == ["report.trajectory.crossings[1].after: no other crossing is labelled 'b'"]
    crossings = [{"metric": "loss", "below": 1}, {"metric": "loss", "below": 2, "reached": True}]
    crossings.append({"metric": "loss", "below": 0.5, "after": "loss ≤ 1"})  # a descriptive one states none
    assert [c.judged for c in trajectory_spec({"crossings": crossings}).crossings] == [False, True, True]


def test_a_runs_first_rate_on_a_metric_is_a_relation_quantity():
    """rate_<metric> and rate_<metric>_r2: each run's slope (and R²) of the first rate on that metric, here
    ln g ∝ −c·t with c = 0.01·(1 + C); a run whose values the window never holds has none."""
    steps = np.arange(0, 1000, 10)
    raw, rows = [], []
    for i, C in enumerate((0.0, 1.0, 2.0)):
        g = np.exp(-0.01 * (1 + C) * steps) if C else np.full(steps.size, 1.0)
        raw += [{"run_id": f"r{i}", "step": int(t), "metrics": json.dumps({"g": float(v)})} for t, v in zip(steps, g)]
        rows.append({"run_id": f"r{i}", "point": f"p{i}", "seed": 0, "lr": 1.0, "C": C, "config": "{}"})
    first = {"metric": "g", "scale": "exp", "window": [1e-9, 0.5], "label": "window"}
    spec = trajectory_spec({"rates": [first, {"metric": "g", "scale": "exp", "label": "last decade"}]})
    rated = rate_columns(pd.DataFrame(raw), pd.DataFrame(rows), spec).set_index("C")
    assert np.isnan(rated.loc[0.0, "rate_g"])  # never below half its start: no window
    assert rated.loc[[1.0, 2.0], "rate_g"].tolist() == pytest.approx([-0.02, -0.03])
    assert rated.loc[[1.0, 2.0], "rate_g_r2"].tolist() == pytest.approx([1.0, 1.0])
    assert rate_columns(pd.DataFrame(raw), pd.DataFrame(rows), trajectory_spec({})).equals(pd.DataFrame(rows))


def test_a_config_field_named_step_keeps_apart_from_the_evaluated_step(tmp_path):
    store = Store(tmp_path)
    table = {"trajectory": {"group_by": ["step"], "metrics": ["loss"]}}
    resolved = {"experiment": "sequential_learning", "train": {"learning_rates": [LR]}, "report": table}
    store.set_meta({"experiment": "sequential_learning", "resolved_spec": json.dumps(resolved), "elapsed_s": "1.0"})
    row = run_row("population", 1e-5, 0)
    store.add_runs([{**row, "config": {**row["config"], "step": 7}}], points("population", 1e-5, 0))
    store.close()
    text = report(tmp_path).read_text()
    table = pd.read_csv(tmp_path / "trajectories.csv")
    assert (table["config_step"] == 7).all() and table["step"].tolist() == list(range(0, STEPS + 1, EVERY))
    assert "| step=7 | 1 | 8192 |" in text
