"""A report of an unfinished sweep says so: in its first line, in the heading of every section of results,
in the answered counts and on every verdict; a finished sweep's report never says "partial"."""

import json
import math

import pandas as pd

from helpers import ROOT
from jaxmem.driver.sweep import claim, run_sweep
from jaxmem.persistence.progress import PLANNED, Found, planned
from jaxmem.persistence.store import Store, load_results
from jaxmem.report import from_store
from jaxmem.report.from_store import report
from jaxmem.report.partial import marked, partial_of
from jaxmem.spec.sweep import load

LINEAR = ROOT / "tests" / "specs" / "tiny_linear.toml"
STOPPED_AT = 1_700_000_000.0  # 2023-11-14T22:13:20Z
SEEDS = (0, 1, 2)


def search_rows(units: list[tuple[int, int]]) -> list[dict]:
    """Searches of a linear memory of width d (params d², answer from 1.3·N ln N = d²) at (d, seed)."""
    rows = []
    for d, seed in units:
        n = 4.0 * d ** (2 / 1.7) * (1 + 0.01 * seed)
        rows.append(
            {
                "unit": f"d{d}/{seed}",
                "point": f"d{d}",
                "seed": seed,
                "config": json.dumps({"model": "linear", "d": d}),
                "variable": "N",
                "capacity": n,
                "first_failure": 1.05 * n,
                "censored": "",
                "rounds": 5,
                "probes": 10,
                "non_monotone": False,
                "params": float(d * d),
                "bits": n * math.log2(n),
                "status": "done",
            }
        )
    return rows


def search_store(folder, units: list[tuple[int, int]]):
    """A store of a search sweep over d ∈ {8, 16, 32, 64} × 3 seeds (its planned totals), holding the
    searches of `units`, its last row written at STOPPED_AT."""
    resolved = {
        "experiment": "assoc_memory",
        "search": {"variable": "N"},
        "report": {"expect_slope": [0.5, 1.5], "ratio": {"expr": "N / d", "label": "N/d", "expect": [0, 1000]}},
    }
    store = Store(folder)
    store.set_meta(
        {
            "experiment": "assoc_memory",
            "resolved_spec": json.dumps(resolved),
            "elapsed_s": "1.0",
            PLANNED: planned(4, len(SEEDS), 1, True),
        }
    )
    store.add_searches(search_rows(units))
    store.add_compile("b0", {"d": 8}, 4, 0.5, STOPPED_AT)
    store.close()
    return folder


def test_a_report_of_an_interrupted_search_sweep_says_it_is_partial(tmp_path):
    """Two of four grid points hold searches (three and one of three seeds): 4 of 12 searches finished."""
    folder = search_store(tmp_path, [(8, s) for s in SEEDS] + [(16, 0)])
    lines = report(folder).read_text().splitlines()
    text = "\n".join(lines)
    assert lines[:3] == [
        "# Capacity report",
        "",
        "partial: 2 of 4 grid points with results, 8 of 12 searches not finished; sweep interrupted at "
        "2023-11-14T22:13:20.000Z (its last stored result).",
    ]
    assert "## Capacity (partial: 4 of 12 searches)" in lines
    assert "## Fitted slope (partial: 4 of 12 searches)" in lines
    capacity = [line for line in lines if line.startswith("| 8 |") or line.startswith("| 16 |")]
    assert " 3/3 |" in capacity[0] and " 1/3 (2 not finished) |" in capacity[1]
    assert "- Expected slope in [0.5, 1.5]: **INCONCLUSIVE** (2 distinct x values) (on a partial sweep)" in lines
    assert "**INCONCLUSIVE** (2 points) (on a partial sweep)." in text  # the ratio's verdict: 2 points, 3 needed
    assert "## Sweep (partial" not in text and "## Runs (partial" not in text


def test_a_finished_sweeps_report_never_says_partial(tmp_path):
    folder = search_store(tmp_path, [(d, s) for d in (8, 16, 32, 64) for s in SEEDS])
    text = report(folder).read_text()
    assert "partial" not in text.lower()
    assert "- Expected slope in [0.5, 1.5]: **PASS**\n" in text and "| 3/3 |" in text


def test_a_report_of_an_interrupted_grid_sweep_notes_its_heatmap_points_and_checks(tmp_path):
    """A grid of 4 points × 1 seed × 2 learning rates stopped after 5 of its 8 runs (3 points)."""
    resolved = {"experiment": "assoc_memory", "report": {"heatmap": {"x": "d", "y": "N", "metric": "max_metric"}}}
    store = Store(tmp_path)
    store.set_meta(
        {"experiment": "assoc_memory", "resolved_spec": json.dumps(resolved), PLANNED: planned(4, 1, 2, False)}
    )
    rows = [
        {
            "run_id": f"d{d}N{n}lr{lr}",
            "point": f"d{d}N{n}",
            "seed": 0,
            "lr": lr,
            "config": json.dumps({"model": "linear", "d": d, "N": n}),
            "bucket": "b0",
            "max_metric": 0.95,
            "diverged": False,
            "success": True,
            "finished_at": STOPPED_AT,
            "final_metrics": json.dumps({"accuracy": 0.9}),
        }
        for d, n in ((4, 8), (8, 8), (4, 16))
        for lr in (0.3, 3.0)
    ]
    store.add_runs(rows[:5])
    store.close()
    lines = report(tmp_path).read_text().splitlines()
    assert lines[2] == (
        "partial: 3 of 4 grid points with results, 3 of 8 runs not finished; sweep interrupted at "
        "2023-11-14T22:13:20.000Z (its last stored result)."
    )
    for heading in ("## Heatmap", "### Values", "## Grid points"):
        assert f"{heading} (partial: 5 of 8 runs)" in lines
    assert any(
        line.endswith(
            "grows (no boundary counts as above the grid): **not testable here** (no cell reaches the threshold) "
            "(on a partial sweep)"
        )
        for line in lines
    )


def test_a_running_grid_sweeps_headline_and_a_store_without_planned_totals():
    running = partial_of(
        Found(3, 0, 4, 8, False, points=2), 1, "running: pid 5 on host h, last heartbeat 1 s ago", STOPPED_AT
    )
    assert running.headline() == (
        "partial: 1 of 2 grid points with results, 5 of 8 runs not finished; sweep running (pid 5 on host h, "
        "last heartbeat 1 s ago), last result at 2023-11-14T22:13:20.000Z."
    )
    assert running.note() == "(partial: 3 of 8 runs)" and running.per_point is None
    old = partial_of(Found(7, 2, None, None, True), 2, "idle", None)
    assert old.headline() == (
        "partial: 2 grid points with results, 2 searches finished (the planned totals are not recorded); "
        "sweep interrupted before storing a result."
    )


def test_marked_notes_headings_and_verdict_lines_but_not_table_cells():
    partial = partial_of(Found(3, 0, 4, 8, False, points=2), 1, "idle", STOPPED_AT)
    section = "\n".join(
        [
            "## Heatmap",
            "",
            "### Values",
            "| x | verdict |",
            "|---|---|",
            "| 1 | **PASS** |",
            "- Boundary never rises as d grows: **not testable here** (a single x value)",
            "- all runs: slope 1.2 over 3 finite medians; expected in [1, 2]: **PASS**",
            "- Expected: interior minimum: **INCONCLUSIVE** (minimum within the seed spread)",
            "Runs PASS when within 10%.",
        ]
    )
    assert marked(section, partial).split("\n") == [
        "## Heatmap (partial: 3 of 8 runs)",
        "",
        "### Values (partial: 3 of 8 runs)",
        "| x | verdict |",
        "|---|---|",
        "| 1 | **PASS** |",
        "- Boundary never rises as d grows: **not testable here** (a single x value) (on a partial sweep)",
        "- all runs: slope 1.2 over 3 finite medians; expected in [1, 2]: **PASS** (on a partial sweep)",
        "- Expected: interior minimum: **INCONCLUSIVE** (minimum within the seed spread) (on a partial sweep)",
        "Runs PASS when within 10%.",
    ]
    assert marked(section, None) == section


def test_a_finished_tiny_sweep_and_its_first_two_runs(tmp_path):
    """The tiny linear sweep (1 point × 2 seeds × 2 learning rates): its report never says partial; a
    folder the driver claimed for it holding two of its runs reports 1 of 1 grid point, 2 of 4 runs."""
    finished = tmp_path / "finished"
    text = run_sweep(load(LINEAR), finished, quiet=True).read_text()
    assert "partial" not in text.lower() and "## Trajectories\n" in text
    (tmp_path / "stopped").mkdir()
    store = Store(tmp_path / "stopped")
    claim(store, load(LINEAR))
    store.add_runs(load_results(finished, expand=False).head(2).to_dict("records"))
    store.close()
    lines = report(tmp_path / "stopped").read_text().splitlines()
    assert lines[2].startswith(
        "partial: 1 of 1 grid points with results, 2 of 4 runs not finished; sweep interrupted at"
    )
    assert "## Grid points (partial: 2 of 4 runs)" in lines


def test_a_report_racing_the_sweeps_end_leaves_the_final_report(tmp_path, monkeypatch):
    """Issue 36: a `jaxmem report` that read the store while the sweep ran and wrote its files after the
    sweep's own final report left a stale partial report.md (and plots) in a finished folder. Here the
    sweep's last searches are stored and its final report written between the racing report's reads and
    its writes: the racing report sees the store changed and renders again."""
    every = [(d, s) for d in (8, 16, 32, 64) for s in SEEDS]
    folder = search_store(tmp_path, every[:4])
    real_write_report = from_store.write_report

    def sweep_ends_meanwhile(*args, **kwargs):
        monkeypatch.setattr(from_store, "write_report", real_write_report)  # once
        store = Store(folder)
        store.add_searches(search_rows(every[4:]))
        store.close()
        assert "partial" not in report(folder).read_text()  # the sweep's own final report
        return real_write_report(*args, **kwargs)

    monkeypatch.setattr(from_store, "write_report", sweep_ends_meanwhile)
    assert "partial" not in report(folder).read_text().lower()
    assert len(load_results(folder, "searches")) == len(pd.read_csv(folder / "searches.csv")) == len(every)
    assert not json.loads((folder / "verdicts.json").read_text())["partial"]
    assert not list(folder.glob(".*.partial"))
