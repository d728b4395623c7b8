"""Reliability issue, item 1: a full disk. The store is never taken for damage for an I/O error, every
command that writes says "no space left on <folder> (free N MiB ...)" and exits 4 (`status` reads on and
warns), the rows stored so far are kept
(a rerun once there is room resumes from them), and report files are replaced atomically.

The disk is a real one where the tests may mount a small tmpfs (root); the checks that need no mount
inject the error at the write instead."""

import contextlib
import errno
import os
import shutil
import sqlite3
import subprocess

import pandas as pd
import pytest

from helpers import ROOT
from jaxmem.cli.main import main
from jaxmem.driver import sweep as driver
from jaxmem.persistence import lock
from jaxmem.persistence.store import FILENAME, Store, StoreError, load_results
from jaxmem.report import files
from jaxmem.spec.sweep import load

SPEC = ROOT / "tests" / "specs" / "tiny_linear.toml"
KEPT = ["run_id", "finished_at", "wall_time_s"]  # a recomputed run would differ in these


@pytest.fixture
def disk(tmp_path):
    """A 4 MiB tmpfs mounted for this test (skipped where mounting is not permitted)."""
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mount)], capture_output=True)
    if done.returncode:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=True)


def fill(disk, leave: int = 0) -> None:
    """Take all the disk's space but `leave` bytes (to a page)."""
    fd = os.open(disk / "ballast", os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    try:
        while (free := shutil.disk_usage(disk).free) > leave:
            os.write(fd, b"\0" * min(free - leave, 2**16))
    except OSError as err:
        assert err.errno == errno.ENOSPC
    finally:
        os.close(fd)


def make_room(disk) -> None:
    (disk / "ballast").unlink()


def call(capsys, *argv) -> tuple[int, str]:
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    return code, captured.err


def no_space(folder) -> str:
    return f"jaxmem: error: no space left on {folder} (free 0.0 MiB of 4.0 MiB on the file system at "


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """A finished tiny_linear sweep (4 runs) and its runs."""
    out = tmp_path_factory.mktemp("finished")
    driver.run_sweep(load(SPEC), out, quiet=True)
    return out, load_results(out)[KEPT]


def test_a_full_disk_keeps_a_finished_store_and_the_rerun_recomputes_nothing(disk, finished, capsys):
    done, runs = finished
    out = disk / "out"
    shutil.copytree(done, out)
    stored = (out / FILENAME).read_bytes()
    fill(disk)
    for argv in (["run", SPEC, "--out", out, "--quiet"], ["report", out]):
        code, err = call(capsys, *argv)
        assert code == 4 and err.startswith(no_space(out)) and err.count("\n") == 1, argv
    assert main(["status", str(out)]) == 0  # was: exit 4, no status (reading needs no space)
    shown = capsys.readouterr().out
    assert ": finished\n4 of 4 runs done" in shown and "\nwarning: " + no_space(out)[len("jaxmem: error: ") :] in shown
    assert (out / FILENAME).read_bytes() == stored  # was: moved aside as corrupted, a 0-byte file left
    assert not list(out.glob(f"{FILENAME}.corrupt-*"))
    make_room(disk)
    assert call(capsys, "run", SPEC, "--out", out, "--quiet")[0] == 0
    assert load_results(out)[KEPT].equals(runs)  # nothing recomputed


def test_a_disk_full_before_the_first_write_names_the_folder(disk, capsys):
    """Issue 36: it said only '[Errno 28] No space left on device' (the lock file's lease, the first write)."""
    fill(disk)
    code, err = call(capsys, "run", SPEC, "--out", disk / "out", "--quiet")
    assert code == 4 and err.startswith(no_space(disk / "out")) and err.count("\n") == 1


def test_a_disk_filling_up_mid_sweep_exits_4_keeping_the_stored_runs(disk, finished, capsys, monkeypatch):
    """One run at a time (max_slots 1); the disk fills once the first has been stored."""
    _, runs = finished
    out, add_runs = disk / "out", Store.add_runs

    def filling_once_a_run_is_stored(store, *args, **kwargs):
        if store.finished_runs():
            fill(disk)
        return add_runs(store, *args, **kwargs)

    monkeypatch.setattr(Store, "add_runs", filling_once_a_run_is_stored)
    argv = ["run", SPEC, "--out", out, "--quiet", "--set", "engine.max_slots=1"]
    code, err = call(capsys, *argv)
    assert code == 4 and err.splitlines()[-1].startswith(no_space(out)) and err.count("error") == 1
    make_room(disk)
    first = load_results(out)[KEPT]
    assert len(first) == 1 and first["run_id"].isin(runs["run_id"]).all()
    monkeypatch.setattr(Store, "add_runs", add_runs)
    assert call(capsys, *argv)[0] == 0
    again = load_results(out)[KEPT]
    assert len(again) == 4 and again.merge(first).equals(first)  # the stored run kept as it was


def test_report_files_on_a_full_disk_are_left_whole(disk):
    """Was: trajectories.csv cut short (4096 of 92005 bytes) on a full disk."""
    frame = pd.DataFrame({"run_id": [f"r{i}" for i in range(50_000)], "accuracy": 0.5})
    written = files.write_table(frame.head(10), disk, "trajectories")
    before = {p.name: p.read_bytes() for p in written}
    fill(disk, leave=2**16)
    with pytest.raises(StoreError, match=f"^no space left on {disk} .*trajectories.csv was not written"):
        files.write_table(frame, disk, "trajectories")
    assert {p.name: p.read_bytes() for p in written} == before
    assert sorted(p.name for p in disk.iterdir()) == ["ballast", *sorted(before)]  # no partial file left


def test_report_on_a_nearly_full_disk_exits_4_whichever_file_fills_it(disk, finished, capsys):
    """Room to read the store, not to write the report (a table or the plot): one line, exit 4."""
    done, _ = finished
    out = disk / "out"
    out.mkdir()
    shutil.copy(done / FILENAME, out)
    fill(disk, leave=40 * 2**10)
    code, err = call(capsys, "report", out)
    assert code == 4 and err.count("\n") == 1 and "no space left" in err.lower(), err
    assert not [p.name for p in out.iterdir() if p.name.endswith(".partial")]


# -- without a mount: the error injected at the write -----------------------------------------------------
def test_a_failed_write_never_replaces_a_report_file(tmp_path, monkeypatch):
    path = files.write_csv(pd.DataFrame({"a": [1, 2]}), tmp_path / "runs.csv")
    before = path.read_bytes()

    def cut_short(frame, target, **kwargs):
        with open(target, "w") as out:
            out.write("a\n1")
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(target))

    monkeypatch.setattr(pd.DataFrame, "to_csv", cut_short)
    with pytest.raises(StoreError, match=f"^no space left on {tmp_path} .*: runs.csv was not written"):
        files.write_csv(pd.DataFrame({"a": [3]}), path)
    assert path.read_bytes() == before and [p.name for p in tmp_path.iterdir()] == ["runs.csv"]


def test_a_failed_plot_never_replaces_the_last_one(tmp_path):
    class CutShort:  # a figure whose save fills the disk halfway through
        def savefig(self, target, **options):
            with open(target, "wb") as out:
                out.write(b"\x89PNG half")
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(target))

    path = tmp_path / "capacity.png"
    path.write_bytes(b"the last good plot")
    with pytest.raises(StoreError, match="capacity.png was not written"):
        files.save_figure(CutShort(), path, dpi=120)
    assert path.read_bytes() == b"the last good plot" and [p.name for p in tmp_path.iterdir()] == ["capacity.png"]


def test_a_lock_file_the_full_disk_refuses_names_the_folder(tmp_path, monkeypatch):
    def full(fd, data, offset):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(lock.os, "pwrite", full)
    with pytest.raises(StoreError, match=f"^no space left on {tmp_path} .*: the run stored nothing there"):
        lock.OutputLock(tmp_path).__enter__()


def test_a_full_store_keeps_the_rows_committed_before(tmp_path):
    """SQLite's own 'database or disk is full' (here from max_page_count) is no damage."""
    store = Store(tmp_path)
    store.add_runs([{"run_id": "r1", "point": "p", "seed": 0, "lr": 0.1, "config": {}, "bucket": "b",
                     "diverged": False, "success": True}])  # fmt: skip
    pages = store.db.execute("PRAGMA page_count").fetchone()[0]
    store.db.execute(f"PRAGMA max_page_count = {pages}")
    with pytest.raises(StoreError, match=f"^no space left on {tmp_path} "):
        store.add_runs([], [("r1", step, {"loss": "x" * 1000}) for step in range(100)])
    store.close()
    assert list(load_results(tmp_path)["run_id"]) == ["r1"]
    assert len(load_results(tmp_path, "trajectories")) == 0
    with contextlib.closing(sqlite3.connect(tmp_path / FILENAME)) as db:
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
