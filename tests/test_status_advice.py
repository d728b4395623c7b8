"""`jaxmem status`: the command it suggests resumes the sweep, and a damaged table is reported, not
called finished (reliability issue, item 7)."""

import shlex
import sqlite3
import tomllib

import pytest

from jaxmem.cli import views
from jaxmem.cli.main import build_parser, main, output_folder
from jaxmem.driver import sweep as driver
from jaxmem.report import from_store
from jaxmem.persistence.store import FILENAME, Store
from jaxmem.spec.sweep import load, parse

TINY = """\
experiment = "assoc_memory"
seeds = [0]
[fixed]
model = "linear"
d = 4
N = 4
[train]
steps = 2
eval_every = 1
learning_rates = [0.1, 0.2]
"""
RUN = {"run_id": "r0", "point": "p0", "seed": 0, "lr": 0.1, "config": "{}", "bucket": "b", "diverged": 0, "success": 1}


def status(capsys, out) -> tuple[int, str, str]:
    code = main(["status", str(out)])
    text, err = capsys.readouterr()
    assert "Traceback" not in text + err
    return code, text, err


def suggested(text: str) -> list[str]:
    """The arguments of the `jaxmem run` command a status suggests."""
    (line,) = [line for line in text.splitlines() if "resume with `" in line]
    words = shlex.split(line.split("resume with `")[1].rstrip("`"))
    assert words[:2] == ["jaxmem", "run"]
    return words[1:]


def stored_fingerprint(out) -> str:
    store = Store(out, write=False)
    try:
        return store.meta()["fingerprint"]
    finally:
        store.close()


def stopped_after_one_run(monkeypatch):
    """`jaxmem run` claims the folder and stores one of the sweep's two runs, compiling nothing."""
    monkeypatch.setattr(driver, "execute", lambda spec, out, store, *a, **kw: store.add_runs([RUN]))
    monkeypatch.setattr(from_store, "report", lambda out: out / "report.md")  # the driver imports it when it reports


def test_status_suggests_a_command_that_resumes_a_sweep_started_from_a_spec_path(tmp_path, capsys, monkeypatch):
    """The suggestion was `jaxmem run tiny ...` (the file's stem: no such sweep, exit 2) and dropped --set."""
    folder, out, elsewhere = tmp_path / "my specs", tmp_path / "out", tmp_path / "elsewhere"
    folder.mkdir()
    elsewhere.mkdir()
    (folder / "tiny.toml").write_text(TINY)
    stopped_after_one_run(monkeypatch)
    monkeypatch.chdir(folder)
    assert main(["run", "tiny.toml", "--set", "train.steps=3", "--out", str(out), "--quiet"]) == 0
    capsys.readouterr()
    monkeypatch.chdir(elsewhere)
    code, text, _ = status(capsys, out)
    assert code == 0 and ": interrupted" in text and "1 of 2 runs done" in text
    args = build_parser().parse_args(suggested(text))
    spec = views.load_spec(args.spec, args.preset, args.overrides)  # what `jaxmem run` would resolve
    assert spec.fingerprint == stored_fingerprint(out) and output_folder(args, spec) == out
    assert args.spec == str(folder / "tiny.toml")


def test_status_suggests_an_absolute_output_folder(tmp_path, capsys, monkeypatch):
    """Issue 36: it repeated a relative --out, pointing elsewhere from any other folder."""
    (tmp_path / "tiny.toml").write_text(TINY)
    stopped_after_one_run(monkeypatch)
    monkeypatch.chdir(tmp_path)
    assert main(["run", "tiny.toml", "--out", "out", "--quiet"]) == 0
    capsys.readouterr()
    assert suggested(status(capsys, "out")[1])[-2:] == ["--out", str(tmp_path / "out")]


def test_status_names_a_shipped_sweep_by_its_full_name(tmp_path, capsys, monkeypatch):
    out = tmp_path / "out"
    stopped_after_one_run(monkeypatch)
    assert main(["run", "fig1_linear", "--out", str(out), "--quiet"]) == 0
    capsys.readouterr()
    words = suggested(status(capsys, out)[1])
    assert words[1:4] == ["nichani24/fig1_linear", "--preset", "quick"]
    args = build_parser().parse_args(words)
    assert views.load_spec(args.spec, args.preset).fingerprint == stored_fingerprint(out)


@pytest.mark.parametrize("name", ["tiny", "fig1_linear"])
def test_status_of_a_store_without_the_record_suggests_only_names_that_resolve(tmp_path, capsys, name):
    """A store written before the record: its sweep's name where that is a shipped sweep, else a stand-in
    for the path (the name alone would exit 2)."""
    store = Store(tmp_path)
    driver.claim(store, parse(tomllib.loads(TINY), name))
    store.add_runs([RUN])
    store.close()
    words = suggested(status(capsys, tmp_path)[1])
    if name == "tiny":
        assert words[1] == "PATH/TO/tiny.toml"
    else:
        assert words[1] == "fig1_linear" and views.spec_path(words[1]).name == "fig1_linear.toml"


@pytest.mark.parametrize("table", ["trajectories", "final_eval"])
def test_status_reports_a_damaged_row_of_a_table_it_does_not_show(tmp_path, capsys, table):
    """It said 'finished', exit 0, for a trajectories row failing its checksum."""
    (tmp_path / "tiny.toml").write_text(TINY.replace("learning_rates = [0.1, 0.2]", "learning_rates = [0.1]"))
    store = Store(tmp_path)
    driver.claim(store, load(tmp_path / "tiny.toml"))
    store.add_runs([RUN], trajectory=[("r0", 1, {"accuracy": 0.5})], final_eval=[("r0", 0, {"d": 4}, {"a": 1.0})])
    store.close()
    assert ": finished" in status(capsys, tmp_path)[1]
    with sqlite3.connect(tmp_path / FILENAME) as db:
        db.execute(f"UPDATE {table} SET metrics = '{{\"accuracy\": 1.0}}'")
    db.close()
    code, text, err = status(capsys, tmp_path)
    assert code == 4 and text == ""
    assert err.startswith(f"jaxmem: error: results file {tmp_path / FILENAME} is unreadable or corrupted")
    assert f"rows failing their checksum: 1 in {table}" in err
