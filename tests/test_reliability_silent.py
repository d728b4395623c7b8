"""Issue 36, nothing silently wrong: compare, load_results and status refuse what the store refuses; errors
and advice name what is true."""

import contextlib
import shutil
import sqlite3

import pytest

from helpers import ROOT
from jaxmem.cli.main import main
from jaxmem.driver import sweep as driver
from jaxmem.persistence.store import FILENAME, Store
from jaxmem.spec.sweep import load

SPEC = ROOT / "tests" / "specs" / "tiny_linear.toml"
RUN = {"run_id": "r0", "point": "p0", "seed": 0, "lr": 0.3, "config": "{}", "bucket": "b", "diverged": 0, "success": 1}


@pytest.fixture
def out(tmp_path):
    """A store holding one run with two trajectory points."""
    return stored(tmp_path / "out", {"accuracy": 0.75})


def stored(folder, last_point: dict):
    """`folder` with a store holding one run of the sweep SPEC, `last_point` its second trajectory point."""
    folder.mkdir()
    store = Store(folder)
    driver.claim(store, load(SPEC))
    store.add_runs([RUN], [("r0", 8, {"accuracy": 0.5}), ("r0", 16, last_point)])
    store.close()
    return folder


def call(capsys, *argv) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    stdout, stderr = capsys.readouterr()
    assert "Traceback" not in stdout + stderr
    return code, stdout, stderr


def edit(out, *statements: str) -> None:
    """Change the file behind jaxmem's back (as the sqlite3 shell does: no checksum function)."""
    with contextlib.closing(sqlite3.connect(out / FILENAME)) as db, db:
        for sql in statements:
            db.execute(sql)


def test_compare_refuses_a_store_whose_trajectory_row_fails_its_checksum(out, tmp_path, capsys):
    """It said 'results agree': the trajectories table was neither checked nor compared."""
    copy = shutil.copytree(out, tmp_path / "copy")
    edit(copy, "UPDATE trajectories SET metrics = '{\"accuracy\": 1.0}' WHERE step = 16")
    code, stdout, stderr = call(capsys, "compare", out, copy)
    assert (code, stdout) == (4, "") and "rows failing their checksum: 1 in trajectories" in stderr


def test_compare_shows_where_trajectories_differ(out, tmp_path, capsys):
    code, stdout, _ = call(capsys, "compare", out, stored(tmp_path / "other", {"accuracy": 0.25}))
    assert code == 1 and "trajectories: 0 only in the first, 0 only in the second, 2 in both" in stdout
    assert "accuracy differs in 1: ('r0', 16): 0.75 vs 0.25" in stdout
