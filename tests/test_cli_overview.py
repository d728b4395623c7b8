"""The researcher's view (issue 19): status, resume messages, dry-run totals, --set, list, compare, exports."""

import json
import subprocess
import sys
import time

import pandas as pd
import pytest

import jaxmem
from helpers import cli as call, ROOT
from jaxmem.cli import estimate, overrides
from jaxmem.cli.main import main
from jaxmem.plan import search
from jaxmem.persistence.progress import Found, checkpointed
from jaxmem.driver.sweep import claim, run_sweep
from jaxmem.persistence.store import CHECKED, Store
from jaxmem.report.columns import tables
from jaxmem.report.export import effective_point, exported_runs
from jaxmem.spec.sweep import SpecError, load

LINEAR = ROOT / "tests" / "specs" / "tiny_linear.toml"


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """The tiny linear sweep (4 runs, one bucket), finished."""
    out = tmp_path_factory.mktemp("linear")
    run_sweep(load(LINEAR), out, quiet=True)
    return out


def test_status_of_a_finished_sweep_says_so_without_jax(finished):
    script = f"import sys; from jaxmem.cli.main import main; main(['status', {str(finished)!r}]); "
    script += "print('jax' in sys.modules)"
    started = time.perf_counter()
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT)
    assert time.perf_counter() - started < 10  # about a second on an idle machine; no JAX import
    assert result.stdout.splitlines()[0].endswith(": finished")
    assert "4 of 4 runs done" in result.stdout and result.stdout.strip().endswith("False")


def test_a_finished_sweep_rerun_says_it_is_complete(finished, capsys):
    run_sweep(load(LINEAR), finished, quiet=True)
    assert "sweep complete (4 of 4 runs done): nothing to run, rewriting the report" in capsys.readouterr().err


def test_status_of_an_interrupted_and_a_fresh_folder(tmp_path, finished, capsys):
    store = Store(tmp_path)
    claim(store, load(LINEAR))
    store.close()
    assert "not started" in call(capsys, "status", tmp_path)[1]
    store = Store(tmp_path)
    store.add_runs(jaxmem.load_results(finished, expand=False).head(2).to_dict("records"))
    store.close()
    code, out, _ = call(capsys, "status", tmp_path)
    assert code == 0 and ": interrupted" in out and "2 of 4 runs done" in out and "resume with `jaxmem run" in out


def test_resume_lines():
    assert Found(0, 0, 4, 8, False).resume_line() == ""
    assert Found(8, 0, 4, 8, False).resume_line().startswith("sweep complete (8 of 8 runs done)")
    line = Found(86, 3, 24, None, True, inflight=11, inflight_buckets=2).resume_line()
    assert (
        line
        == "resuming: 86 runs done, 3 of 24 searches done; 11 in-flight runs in checkpoints of 2 bucket(s) to restore"
    )


def test_checkpointed_reads_the_newest_slot_table(tmp_path):
    for step, slots in ((3, ["a", None]), (4, ["b", "c"])):
        (tmp_path / "bkt" / str(step) / "meta").mkdir(parents=True)
        (tmp_path / "bkt" / str(step) / "meta" / "metadata").write_text(json.dumps({"slots": slots}))
    assert checkpointed(tmp_path) == {"bkt": ["b", "c"]}


def test_set_overrides_win_over_the_preset_and_are_stored(tmp_path):
    raw = {"seeds": [0], "grid": {"d": [4]}, "presets": {"quick": {"seeds": [0, 1]}}}
    out = overrides.apply(raw, ["seeds=5", "grid.d=[8, 16]", "fixed.model=mlp"])
    assert out["seeds"] == out["presets"]["quick"]["seeds"] == 5 and out["grid"]["d"] == [8, 16]
    assert out["fixed"]["model"] == "mlp" and raw["seeds"] == [0]
    for bad, words in (("seeds", "PATH=VALUE"), ("grid.d=[4,", "not a TOML value"), ("seeds.x=1", "not a table")):
        with pytest.raises(SpecError, match=words):
            overrides.apply(raw, [bad])


def test_run_set_reaches_the_validated_spec(capsys):
    code, out, _ = call(capsys, "run", LINEAR, "--set", "seeds=3", "--set", "train.steps=64", "--dry-run")
    assert code == 0 and "1 points x 3 seeds" in out
    code, _, err = call(capsys, "run", LINEAR, "--set", "train.stpes=3", "--dry-run")
    assert code == 2 and "train.stpes" in err and "did you mean 'steps'" in err


def test_dry_run_totals_and_a_folder_of_another_sweep(finished, capsys):
    code, out, _ = call(capsys, "run", LINEAR, "--set", "seeds=3", "--dry-run", "--out", finished)
    assert code == 0
    assert "first round: 6 runs" in out and "peak memory per device" in out and "sized for this machine" in out
    assert "holds a different sweep" in out and "exit 4" in out and "seeds" in out
    assert "holds this sweep already" in call(capsys, "run", LINEAR, "--dry-run", "--out", finished)[1]


def test_worst_probes_bound_every_monotone_search():
    spec = load(ROOT / "tests" / "specs" / "tiny_mlp.toml").search
    bracket = search.start(spec, 8, 64)
    worst = estimate.worst_probes(spec, bracket, cost=float)
    for t in range(7, 65):
        assert sum(estimate.probed(spec, bracket, lambda v: v <= t)) <= sum(worst)


def test_sweep_name_typo_is_suggested_and_list_shows_descriptions(capsys):
    code, _, err = call(capsys, "run", "fig1_linaer")
    assert code == 2 and "did you mean 'fig1_linear'?" in err
    code, out, _ = call(capsys, "list")
    assert "nichani24/fig1_linear  [gpu, paper, quick]  Fig 1" in out
    assert "metrics (each run's evaluations; final_<name> in runs.csv): loss, accuracy, exact_accuracy" in out


def test_version(capsys):
    with pytest.raises(SystemExit):
        main(["--version"])
    assert capsys.readouterr().out.strip() == f"jaxmem {jaxmem.__version__}"


def test_every_stored_column_is_documented(capsys):
    documented = tables()
    for table, columns in CHECKED.items():
        assert set(columns) == set(documented[table]), table
    assert (
        "best_<metric>" in call(capsys, "list", "--columns")[1]
        or "best_accuracy" in call(capsys, "list", "--columns")[1]
    )


def test_compare(finished, tmp_path, capsys):
    code, out, _ = call(capsys, "compare", finished, finished)
    assert code == 0 and "results agree" in out
    store = Store(tmp_path)
    claim(store, load(LINEAR))
    rows = jaxmem.load_results(finished, expand=False)
    rows.loc[0, "max_metric"] += 0.5
    store.add_runs(rows.head(3).to_dict("records"))
    store.close()
    code, out, _ = call(capsys, "compare", finished, tmp_path)
    assert code == 1 and "1 only in the first" in out and "max_metric differs in 1" in out


def test_exported_runs_show_the_effective_config_and_named_metrics(finished):
    from jaxmem.experiments.registry import get

    runs = exported_runs(jaxmem.load_results(finished, expand=False), "accuracy", get("assoc_memory"))
    assert (runs["M"] == runs["N"]).all() and (runs["m"] == 1).all() and not runs["mlp_bias"].any()
    assert {"best_accuracy", "final_accuracy", "final_loss"} <= set(runs) and "max_metric" not in runs
    assert runs["finished_at"].str.match(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z").all()
    csv = pd.read_csv(finished / "runs.csv")
    assert "best_accuracy" in csv and (csv["M"] == csv["N"]).all()


def test_exported_searches_name_the_fields_that_follow_the_searched_variable():
    from jaxmem.experiments.registry import get

    point = json.loads(effective_point(json.dumps({"model": "linear", "d": 8}), get("assoc_memory"), "N"))
    assert point == {**point, "M": "N", "m": 1, "mlp_bias": False} and "N" not in point


def test_shipped_sweeps_are_found_from_any_folder(tmp_path, monkeypatch):
    """`jaxmem run fig1_linear` works outside the repository's root: the shipped sweeps are looked up
    beside the package too, not only in ./sweeps."""
    from jaxmem.cli import views

    monkeypatch.chdir(tmp_path)
    assert views.spec_path("fig1_linear").name == "fig1_linear.toml"


def test_report_spec_rerenders_with_an_edited_report_table(finished, tmp_path, capsys):
    """`jaxmem report DIR --spec FILE`: FILE's [report] table (here a heatmap over a text field, a
    categorical axis) re-renders the report; the store keeps its own; a FILE that would change results is
    refused. Every table shows the effective config (M = N, m = 1, no bias: not the stored 0, 0, True)."""
    import shutil

    out = tmp_path / "copy"
    shutil.copytree(finished, out)
    edited = tmp_path / "tiny_linear.toml"
    heatmap = '[report]\ntitle = "Edited"\nheatmap = { x = "model", y = "d", x_label = "model", y_label = "d" }\n'
    edited.write_text(LINEAR.read_text() + heatmap)
    code, stdout, _ = call(capsys, "report", out, "--spec", edited)
    assert code == 0 and stdout.strip().endswith("report.md")
    text = (out / "report.md").read_text()
    assert text.startswith("# Edited") and "categorical axis" in text and (out / "heatmap.png").exists()
    assert set(pd.read_csv(out / "heatmap.csv")["x"]) == {"linear"}
    assert "Edited" not in json.dumps(jaxmem.load_results(out, "meta").to_dict())
    for table in ("runs.csv", "trajectories.csv"):
        frame = pd.read_csv(out / table)
        assert (frame["M"] == frame["N"]).all() and (frame["m"] == 1).all() and not frame["mlp_bias"].any(), table
    edited.write_text(LINEAR.read_text().replace("steps = 32", "steps = 64") + heatmap)
    code, _, err = call(capsys, "report", out, "--spec", edited)
    assert code == 2 and "describes another sweep" in err and "train.steps: 32 → 64" in err


def test_one_message_per_problem(capsys):
    """A typo in search.variable is said once, however many grid points it touches."""
    code, _, err = call(capsys, "run", "nichani24/fig1_linear", "--set", "search.variable=n", "--dry-run")
    assert code == 2 and "search.variable: 'n'" in err
    lines = err.splitlines()[1:]
    assert len(lines) == len(set(lines)) and sum("missing required field" in line for line in lines) <= 1

    from jaxmem.cli.errors import message

    text = message(SpecError("x.toml", ["a: bad", "b: missing", "b: missing", "b: missing"]))
    assert text.splitlines() == ["invalid sweep spec x.toml:", "  - a: bad", "  - b: missing (3 times)"]
