"""Reports of grid sweeps without a search (heatmap, floor, boundary, per-point metrics) and every
run metric side by side (final_metrics), on synthetic runs: no training."""

import json
import math

import numpy as np
import pandas as pd
import pytest

from jaxmem.report import write_report
from jaxmem.report.capacity.at_capacity import capacity_metrics_table
from jaxmem.report.grid.cells import heatmap_cells, point_cells
from jaxmem.report.grid.plot import boundary_path, cell_edges
from jaxmem.report.grid.tradeoff import analyse
from jaxmem.report.runs import best_runs, expand_final_metrics
from jaxmem.report.from_store import report
from jaxmem.report.success import with_rule_defaults
from jaxmem.persistence.store import Store, expand_config
from jaxmem.spec.sweep import SpecError, SuccessRule, stored_report_spec

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
HS = (1, 2, 4, 8, 16)
MS = (1, 8, 32, 64, 128)
D, D_H = 32, 8
HEATMAP = {
    "x": "d*d_h*H",
    "y": "d*m",
    "x_label": "attention params",
    "y_label": "MLP params",
    "threshold": 0.99,
    "lines": [
        {"x": [1280, 4700], "y": "2300 - x/2", "label": "paper boundary"},
        {"x": 1280, "y": [1660, 4300], "label": "paper floor"},
    ],
}


def options(table: dict, train: dict | None = None):
    """A `[report]` table (with the sweep's [train] table) as the report reads it."""
    return stored_report_spec({"report": table, "train": train or {}})


def heatmap_spec(table: dict, train: dict | None = None):
    return options({"heatmap": table}, train).heatmap


def stores(H, m):
    """The synthetic law: success iff attention ≥ 1024 and MLP + attention/2 ≥ 2300 (Fig 4 right's shape)."""
    attn, mlp = D * D_H * H, D * m
    return attn >= 1024 and mlp + attn / 2 >= 2300


def run_row(point, seed, lr, config, max_metric, final, **extra):
    return {
        "run_id": f"{point}-{seed}-{lr}",
        "point": point,
        "seed": seed,
        "lr": lr,
        "value": None,
        "round": 0,
        "config": json.dumps(config),
        "bucket": "b0",
        "max_metric": max_metric,
        "final_metric": final.get("accuracy") if final else None,
        "final_loss": final.get("loss") if final else None,
        "steps_run": 100,
        "steps_to_threshold": None,
        "diverged": bool(max_metric is None or (isinstance(max_metric, float) and math.isnan(max_metric))),
        "success": bool(max_metric is not None and max_metric >= 1.0),
        "wall_time_s": 0.5,
        "device": "cpu",
        "finished_at": 0.0,
        "final_metrics": json.dumps(final) if final is not None else None,
        **extra,
    }


def grid_runs(seeds=(0, 1)):
    """Raw runs (JSON config) over HS × MS: lr 1e-2 follows the law, lr 1e-3 is worse or diverged."""
    rows = []
    for H in HS:
        for m in MS:
            config = {"H": H, "m": m, "d": D, "d_h": D_H, "S": 32}
            acc = 1.0 if stores(H, m) else 0.3 + 0.01 * H + 0.001 * m
            for seed in seeds:
                final = {"loss": 1.0 - acc + 0.01, "accuracy": acc - 0.01, "exact_accuracy": acc - 0.02}
                rows.append(run_row(f"H{H}m{m}", seed, 1e-2, config, acc, final))
                bad = float("nan") if (H, m, seed) == (4, 64, 1) else acc - 0.2
                rows.append(run_row(f"H{H}m{m}", seed, 1e-3, config, bad, {"loss": 9.0, "accuracy": 0.0}))
    return pd.DataFrame(rows)


def expanded(raw):
    return expand_final_metrics(expand_config(raw))


def test_expand_final_metrics_spreads_json_and_fills_only_gaps():
    raw = pd.DataFrame(
        {
            "final_loss": [0.5, np.nan, np.nan, 0.7],
            "final_metrics": [
                json.dumps({"loss": 0.4, "accuracy": 0.9, "exact_accuracy": 0.8}),
                json.dumps({"loss": 0.3, "accuracy": 1.0}),
                None,
                "not json",
            ],
        }
    )
    out = expand_final_metrics(raw)
    assert "final_metrics" not in out
    assert out["final_loss"].tolist()[:2] == [0.5, 0.3] and out["final_loss"].iloc[3] == 0.7
    assert np.isnan(out["final_loss"].iloc[2])
    assert out["final_accuracy"].tolist()[:2] == [0.9, 1.0]
    assert out["final_exact_accuracy"].iloc[0] == 0.8 and out["final_exact_accuracy"].iloc[1:].isna().all()
    no_column = pd.DataFrame({"max_metric": [1.0]})
    assert expand_final_metrics(no_column).equals(no_column)


def test_best_runs_keeps_best_lr_per_point_and_seed():
    runs = expanded(grid_runs())
    best = best_runs(runs)
    assert len(best) == len(HS) * len(MS) * 2
    assert (best["lr"] == 1e-2).all()
    worst = best_runs(runs, "final_loss", better="min")
    assert (worst["lr"] == 1e-2).all()
    with pytest.raises(ValueError, match="not a run column"):
        best_runs(runs, "nope")


def test_heatmap_cells_floor_and_tradeoff_boundary():
    spec = heatmap_spec(HEATMAP)
    points = point_cells(expanded(grid_runs()), spec)
    assert len(points) == len(HS) * len(MS)
    row = points[(points["H"] == 4) & (points["m"] == 64)].iloc[0]
    assert row["x"] == 1024 and row["y"] == 2048 and row["max_metric"] == 1.0 and row["n_success"] == 2
    assert row["final_exact_accuracy"] == pytest.approx(0.98) and row["best_lr"] == 1e-2
    cells = heatmap_cells(points, spec)
    assert len(cells) == len(points)
    a = analyse(cells)
    floor = a["floor"]
    assert floor["floor_x"] == 1024 and floor["y_max"] == 128 * D
    assert floor["below_x"] == [256, 512] and floor["cells_below"] == 10 and floor["clean"] is True
    boundary = {r["x"]: r["y"] for r in a["boundary"]}
    assert boundary == {256: None, 512: None, 1024: 2048, 2048: 2048, 4096: 256}
    assert all(r["holes"] == 0 for r in a["boundary"])
    assert a["monotonicity"]["non_increasing"] is True and a["monotonicity"]["tradeoff"] is True


def test_cells_average_seeds_before_the_threshold():
    raw = grid_runs()
    hit = (raw["point"] == "H16m128") & (raw["seed"] == 1) & (raw["lr"] == 1e-2)
    raw.loc[hit, "max_metric"] = 0.9
    spec = heatmap_spec(HEATMAP)
    cells = heatmap_cells(point_cells(expanded(raw), spec), spec)
    cell = cells[(cells["x"] == 4096) & (cells["y"] == 4096)].iloc[0]
    assert cell["max_metric"] == pytest.approx(0.95) and cell["n_success"] == 1 and not cell["reaches"]
    # The column at x = 4096 now fails above its boundary: one hole.
    assert next(r for r in analyse(cells)["boundary"] if r["x"] == 4096)["holes"] == 1


def synthetic_cells(reaching):
    """Cells over x, y ∈ {1, 2, 3} reaching where (x, y) is in `reaching`."""
    rows = [{"x": x, "y": y, "reaches": (x, y) in reaching} for x in (1.0, 2.0, 3.0) for y in (1.0, 2.0, 3.0)]
    return pd.DataFrame(rows)


def test_boundary_that_rises_is_flagged_and_a_dirty_floor_is_reported():
    a = analyse(synthetic_cells({(1, 1), (2, 3), (3, 3)}))
    assert a["floor"]["floor_x"] == 2 and a["floor"]["clean"] is False
    assert a["floor"]["cells_below_reaching"] == 1
    assert [r["y"] for r in a["boundary"]] == [1, 3, 3] and a["boundary"][0]["holes"] == 2
    mono = a["monotonicity"]
    assert mono["non_increasing"] is False and mono["violations"] == [(1.0, 1.0, 2.0, 3.0)]
    assert mono["tradeoff"] is False


def test_no_floor_inside_the_grid_and_none_reaching():
    a = analyse(synthetic_cells({(x, y) for x in (1, 2, 3) for y in (1, 2, 3)}))
    assert a["floor"]["floor_x"] == 1 and a["floor"]["below_x"] == [] and a["floor"]["clean"] is False
    assert a["monotonicity"]["tradeoff"] is False and a["monotonicity"]["non_increasing"] is True
    none = analyse(synthetic_cells(set()))
    assert none["floor"]["floor_x"] is None and all(r["y"] is None for r in none["boundary"])
    # A boundary that appears and then disappears as x grows rises to "none".
    gone = analyse(synthetic_cells({(1, 3)}))["monotonicity"]
    assert gone["violations"] == [(1.0, 3.0, 2.0, None)]


def test_heatmap_spec_defaults_and_errors():
    assert options({}).heatmap is None
    spec = heatmap_spec({"x": "H", "y": "m"}, {"early_stop": 1.0})
    assert spec.threshold == 1.0 and spec.metric == "max_metric" and spec.x_label == "H"
    assert heatmap_spec({"x": "H", "y": "m"}, {"early_stop": False}).threshold == 0.99
    assert heatmap_spec({"x": "H", "y": "m"}).threshold == 0.99
    loss = heatmap_spec({"x": "H", "y": "m", "better": "min", "threshold": 0.1})
    assert loss.reaches([0.05, 0.2, float("nan")]).tolist() == [True, False, False]
    with pytest.raises(SpecError, match="report.heatmap.colour: unknown key"):
        heatmap_spec({"x": "H", "y": "m", "colour": "red"})
    with pytest.raises(SpecError, match="report.heatmap.y: missing"):
        heatmap_spec({"x": "H"})
    with pytest.raises(SpecError, match=r"report.heatmap.lines\[0\]: needs x and y, exactly one of x, y"):
        heatmap_spec({"x": "H", "y": "m", "lines": [{"x": 1, "y": 2}]})


def test_overlay_lines_in_plot_units():
    slanted, vertical = heatmap_spec(HEATMAP).lines
    sx, sy, vx, vy = (np.array(v) for v in (slanted.x, slanted.y, vertical.x, vertical.y))
    assert sx[0] == 1280 and sx[-1] == 4700
    np.testing.assert_allclose(sy, 2300 - sx / 2)
    assert (vx == 1280).all() and vy[0] == 1660 and vy[-1] == 4300
    assert vertical.label == "paper floor" and vertical.color == "red"


def test_cell_edges_and_boundary_staircase():
    np.testing.assert_allclose(cell_edges([1, 2, 4]), [0.5, 1.5, 3, 5])
    np.testing.assert_allclose(cell_edges([256, 2048]), [0, 1152, 2944])  # clipped at 0
    np.testing.assert_allclose(cell_edges([-1, 1]), [-2, 0, 2])
    rows = [{"x": 1.0, "y": None}, {"x": 2.0, "y": 2.0}, {"x": 4.0, "y": 1.0}]
    px, py = boundary_path(rows, np.array([1.0, 2.0, 4.0]), np.array([1.0, 2.0]))
    assert np.isnan(px[0]) and px[1:].tolist() == [1.5, 3, 3, 5] and py[1:].tolist() == [1.5, 1.5, 0.5, 0.5]


def test_write_report_grid_sweep(tmp_path):
    train = {"metric": "accuracy", "early_stop": 1.0}
    report_spec = options({"title": "trade-off", "heatmap": HEATMAP}, train)
    runs = expanded(grid_runs())
    paths = write_report(tmp_path, report_spec, pd.DataFrame(), runs, {}, train)
    assert [p.name for p in paths] == ["heatmap.csv", "heatmap.png", "verdicts.json", "report.md"]
    assert (tmp_path / "heatmap.png").read_bytes()[:8] == PNG_MAGIC
    csv = pd.read_csv(tmp_path / "heatmap.csv")
    assert len(csv) == 25 and {"x", "y", "max_metric", "final_exact_accuracy", "n_success", "reaches"} <= set(csv)
    assert csv["reaches"].sum() == sum(stores(H, m) for H in HS for m in MS)
    text = (tmp_path / "report.md").read_text()
    assert "at the largest MLP params (4096): **1024**" in text
    assert "below the floor (256, 512; 10 cells) fails at every MLP params: **PASS** (0 of 10 cells reach it)" in text
    assert "| 1024 | 2048 | 0 | 5 |" in text and "| 4096 | 256 | 0 | 5 |" in text and "| 256 | none | 0 | 5 |" in text
    assert "grows (no boundary counts as above the grid): **PASS**" in text
    assert "falls somewhere as attention params grows: **PASS** (MLP params = 2048 at attention params = 1024" in text
    assert "| 4096 | 0.438 | 0.448 | **1.000** | **1.000** | **1.000** |" in text  # the y = 4096 row of values
    assert "![heatmap](heatmap.png)" in text
    header = next(line for line in text.splitlines() if line.startswith("| H | m |"))
    assert header == (
        "| H | m | attention params | MLP params | seeds | best lr | max accuracy | final accuracy | "
        "final exact_accuracy | final loss | seeds at threshold |"
    )
    assert "| 4 | 64 | 1024 | 2048 | 2 | 0.01 | 1.0000 | 0.9900 | 0.9800 | 0.0100 | 2 |" in text
    assert "Probe runs: 100" in text and "Diverged: 1" in text


def test_heatmap_over_a_text_field_is_categorical(tmp_path):
    """x = "kind" (text values): the cells keep the text, the plot puts it on its ticks in sorted order,
    and report.md says the floor and boundary need ordered axes."""
    raw = grid_runs(seeds=(0,))
    kinds = {H: "wide" if H >= 4 else "narrow" for H in HS}
    raw["config"] = [json.dumps({**json.loads(c), "kind": kinds[json.loads(c)["H"]]}) for c in raw["config"]]
    spec = {"x": "kind", "y": "d*m", "x_label": "kind", "y_label": "MLP params", "threshold": 0.99}
    write_report(tmp_path, options({"heatmap": spec}), pd.DataFrame(), expanded(raw), {})
    cells = pd.read_csv(tmp_path / "heatmap.csv")
    assert sorted(set(cells["x"])) == ["narrow", "wide"] and len(cells) == 2 * len(MS)
    text = (tmp_path / "report.md").read_text()
    assert "has no floor or boundary" in text and "| MLP params \\ kind | narrow | wide |" in text
    assert (tmp_path / "heatmap.png").read_bytes()[:8] == PNG_MAGIC


def test_write_report_grid_sweep_without_heatmap(tmp_path):
    raw = grid_runs(seeds=(0,)).drop(columns="final_metrics")  # an old store: no final_metrics column
    paths = write_report(tmp_path, options({}), pd.DataFrame(), expanded(raw), {})
    assert [p.name for p in paths] == ["verdicts.json", "report.md"]
    text = (tmp_path / "report.md").read_text()
    assert "## Grid points" in text and "Heatmap" not in text
    assert "| H | m | seeds | best lr | max_metric | final loss |" in text


def search_and_runs():
    """Two searches at one point: capacities 40 and 60; runs at, below and above the capacity."""
    config = {"d": 8, "model": "mlp"}
    searches = pd.DataFrame(
        [
            {
                "point": "p",
                "seed": s,
                **config,
                "variable": "N",
                "capacity": c,
                "first_failure": c + 10,
                "censored": "",
                "rounds": 3,
                "probes": 3,
                "non_monotone": False,
                "params": 128.0,
                "bits": c * 3.0,
                "status": "done",
            }
            for s, c in ((0, 40.0), (1, 60.0))
        ]
    )
    rows = []
    for seed, values in ((0, (20, 40, 80)), (1, (30, 60, 90))):
        for value in values:
            for lr, acc in ((1e-2, 1.0 if value <= 60 else 0.7), (1e-3, 1.0 if value <= 30 else 0.5)):
                final = {"loss": 0.1 * value / 10 + lr, "accuracy": acc}
                row = run_row("p", seed, lr, config, acc, final, value=value)
                row["run_id"] = f"{seed}-{value}-{lr}"
                rows.append(row)
    return searches, expanded(pd.DataFrame(rows))


def test_capacity_metrics_at_the_largest_successful_probe(tmp_path):
    searches, runs = search_and_runs()
    table = capacity_metrics_table(searches, runs)
    assert len(table) == 1
    row = table.iloc[0]
    # Seed 0: value 40, lr 1e-2 (loss 0.41); seed 1: value 60, lr 1e-2 (loss 0.61).
    assert row["capacity"] == 50 and row["searches"] == 2 and row["max_metric"] == 1.0
    assert row["final_loss"] == pytest.approx((0.41 + 0.61) / 2)
    write_report(tmp_path, options({}), searches, runs, {}, {"metric": "accuracy"})
    text = (tmp_path / "report.md").read_text()
    assert "## Metrics at capacity" in text
    assert "| params | N (mean) | searches | max accuracy | final accuracy | final loss |" in text
    assert "| 128 | 50 | 2 | 1.0000 | 1.0000 | 0.5100 |" in text


def test_report_from_a_store_expands_final_metrics_in_runs_csv(tmp_path):
    resolved = {
        "experiment": "factual_recall",
        "train": {"metric": "accuracy", "early_stop": 1.0},
        "report": {"title": "t", "heatmap": {"x": "d*d_h*H", "y": "d*m", "threshold": 0.99}},
    }
    store = Store(tmp_path)
    store.set_meta({"experiment": "factual_recall", "resolved_spec": json.dumps(resolved), "elapsed_s": "1.0"})
    raw = grid_runs(seeds=(0,))
    raw.loc[0, "final_metrics"] = None  # a NULL cell, as an older engine wrote
    store.add_runs(raw.to_dict("records"))
    store.close()
    text = report(tmp_path).read_text()
    runs_csv = pd.read_csv(tmp_path / "runs.csv")
    assert "final_metrics" not in runs_csv
    assert {"final_accuracy", "final_exact_accuracy", "final_loss", "H", "m"} <= set(runs_csv)
    null = runs_csv["run_id"] == raw.loc[0, "run_id"]
    assert runs_csv.loc[null, "final_accuracy"].isna().all() and runs_csv.loc[~null, "final_accuracy"].notna().all()
    assert runs_csv.loc[~null & (runs_csv["lr"] == 1e-2), "final_exact_accuracy"].notna().all()
    assert (tmp_path / "heatmap.png").exists() and "**1024**" in text


def test_search_sweep_before_its_first_search_is_not_a_grid(tmp_path):
    _, runs = search_and_runs()
    paths = write_report(tmp_path, options({"heatmap": HEATMAP}), pd.DataFrame(), runs, {})
    assert [p.name for p in paths] == ["verdicts.json", "report.md"]
    text = (tmp_path / "report.md").read_text()
    assert "Grid points" not in text and "Heatmap" not in text and "Probe runs: 12" in text


# -- the success rule ----------------------------------------------------------------------------------


def loss_runs():
    """grid_runs judged by a loss: max_metric is each run's best (lowest) loss, 10·(1 − accuracy)."""
    raw = grid_runs()
    raw["max_metric"] = 10 * (1.0 - raw["max_metric"])
    return raw


def test_a_rule_at_most_words_best_and_sets_the_heatmap_threshold(tmp_path):
    rule = SuccessRule("loss", "at_most", 2.5)  # a threshold outside (0, 1]
    table = {"heatmap": {k: v for k, v in HEATMAP.items() if k != "threshold"}}
    report_spec = with_rule_defaults(options(table), table, rule)
    assert (report_spec.heatmap.better, report_spec.heatmap.threshold) == ("min", 2.5)
    kept = {"heatmap": HEATMAP}
    assert with_rule_defaults(options(kept), kept, rule).heatmap.threshold == 0.99  # the table's own
    other = {"heatmap": {**table["heatmap"], "metric": "final_exact_accuracy"}}
    assert with_rule_defaults(options(other), other, rule).heatmap.better == "max"  # not the judged metric

    write_report(tmp_path, report_spec, pd.DataFrame(), expanded(loss_runs()), {}, {"metric": "accuracy"}, success=rule)
    text = (tmp_path / "report.md").read_text()
    assert "Best loss over attention params" in text and "its value is ≤ 2.5" in text
    assert "| H | m | attention params | MLP params | seeds | best lr | best loss |" in text
    assert "- Success: loss ≤ 2.5 at a run's best evaluation" in text
    cells = pd.read_csv(tmp_path / "heatmap.csv")
    assert cells["reaches"].sum() == sum(stores(H, m) for H in HS for m in MS)
    assert "at the largest MLP params (4096): **1024**" in text  # the same floor as judged by accuracy


def test_search_metrics_at_capacity_take_the_best_run_by_the_rule(tmp_path):
    searches, runs = search_and_runs()
    runs["max_metric"] = 1.0 - runs["max_metric"]  # a loss: lower is better
    rule = SuccessRule("loss", "at_most", 0.05)
    write_report(tmp_path, options({}), searches, runs, {}, {"metric": "accuracy"}, success=rule)
    text = (tmp_path / "report.md").read_text()
    assert "| params | N (mean) | searches | best loss | final accuracy | final loss |" in text
    assert "| 128 | 50 | 2 | 0.0000 | 1.0000 | 0.5100 |" in text


# -- deterministic outputs -----------------------------------------------------------------------------


def test_ties_go_to_the_smaller_learning_rate_then_run_id_whatever_the_row_order():
    runs = expanded(grid_runs())
    tie = (runs["point"] == "H16m128") & (runs["seed"] == 0)
    runs.loc[tie, "max_metric"] = 1.0  # both learning rates reach 1.0
    for k in range(5):
        best = best_runs(runs.sample(frac=1, random_state=k))
        pick = best[(best["point"] == "H16m128") & (best["seed"] == 0)]
        assert pick["lr"].tolist() == [1e-3]
        assert best.equals(best_runs(runs))


def stored_sweep_folder(out, experiment, resolved, runs, searches=None):
    out.mkdir(exist_ok=True)
    store = Store(out)
    store.set_meta({"experiment": experiment, "resolved_spec": json.dumps(resolved), "elapsed_s": "1.0"})
    store.add_runs(runs.to_dict("records"))
    if searches is not None:
        store.add_searches(searches.to_dict("records"))
    store.close()


def outputs(folder):
    """Every text output of a report folder (report.md and the CSVs) and the Parquet tables."""
    texts = {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.suffix in (".md", ".csv")}
    tables = {p.name: pd.read_parquet(p) for p in sorted(folder.glob("*.parquet"))}
    return texts, tables


def search_store_rows():
    """The searches and raw runs of search_and_runs, with two learning rates tied at each capacity."""
    searches, _ = search_and_runs()
    searches["config"] = [json.dumps({"d": 8, "model": "mlp"})] * len(searches)
    rows = []
    for seed, capacity in ((0, 40), (1, 60)):
        for value in (20, capacity, 80):
            for lr in (1e-2, 1e-3):
                final = {"loss": value / 100 + lr, "accuracy": 1.0 if value <= capacity else 0.5}
                config = {"d": 8, "model": "mlp", "N": value}
                row = run_row(
                    "p", seed, lr, config, final["accuracy"], final, value=value, run_id=f"{seed}-{value}-{lr}"
                )
                rows.append(row)
    return searches.drop(columns=["d", "model"]), pd.DataFrame(rows)


@pytest.mark.parametrize("sweep", ["grid", "search"])
def test_shuffled_stores_give_identical_reports_and_tables(tmp_path, sweep):
    if sweep == "grid":
        raw, searches = grid_runs(), None
        raw.loc[(raw["point"] == "H16m128") & (raw["seed"] == 0), "max_metric"] = 1.0  # a tie between lrs
        experiment = "factual_recall"
        resolved = {"experiment": experiment, "train": {"metric": "accuracy"}, "report": {"heatmap": HEATMAP}}
    else:
        searches, raw = search_store_rows()
        experiment = "assoc_memory"
        resolved = {"experiment": experiment, "train": {"metric": "accuracy"}, "report": {}}
    results = []
    for k in range(3):
        out = tmp_path / f"order{k}"
        shuffled = raw.sample(frac=1, random_state=k)
        found = searches.sample(frac=1, random_state=k) if searches is not None else None
        stored_sweep_folder(out, experiment, resolved, shuffled, found)
        report(out)
        results.append(outputs(out))
    texts, tables = results[0]
    assert "report.md" in texts and "runs.csv" in texts and "runs.parquet" in tables
    for other_texts, other_tables in results[1:]:
        assert other_texts == texts
        assert other_tables.keys() == tables.keys()
        for name, table in tables.items():
            pd.testing.assert_frame_equal(other_tables[name], table)
    # write_report alone is as indifferent to the order of its frames
    runs = expanded(raw)
    direct = []
    for k in range(3):
        found = pd.DataFrame() if searches is None else expand_config(searches.sample(frac=1, random_state=k))
        write_report(
            tmp_path / f"direct{k}", options(resolved["report"]), found, runs.sample(frac=1, random_state=k), {}
        )
        direct.append(outputs(tmp_path / f"direct{k}")[0])
    assert direct[0] == direct[1] == direct[2]


def test_parquet_tables_read_back_as_the_csvs(tmp_path):
    searches, raw = search_store_rows()
    stored_sweep_folder(tmp_path, "assoc_memory", {"experiment": "assoc_memory", "report": {}}, raw, searches)
    report(tmp_path)
    for name in ("runs", "searches"):
        parquet = pd.read_parquet(tmp_path / f"{name}.parquet")
        csv = pd.read_csv(tmp_path / f"{name}.csv")
        # a CSV reads an empty text as NaN, and a column of them as numbers
        pd.testing.assert_frame_equal(parquet.replace({"": np.nan}), csv, check_dtype=False)
    assert "N" in pd.read_parquet(tmp_path / "runs.parquet")
    assert "censored" in pd.read_parquet(tmp_path / "searches.parquet")
