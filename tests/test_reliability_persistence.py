"""Issue 12, persistence: read-only output folders, checksums on every table a report reads, the
elapsed time of running and killed sweeps, what differs when a folder holds another sweep, and one
canonical row order for every read of the store."""

import contextlib
import json
import os
import shutil
import socket
import sqlite3
import subprocess
import sys
import time

import pytest

import jaxmem
from helpers import cli as call, ROOT
from jaxmem.driver import folder
from jaxmem.driver import sweep as driver
from jaxmem.persistence.lock import OutputLock
from jaxmem.persistence.store import FILENAME, Store, StoreError, load_results
from jaxmem.spec.sweep import load, parse

SPEC = ROOT / "tests" / "specs" / "tiny_linear.toml"


def run_row(run_id, point="p", seed=0, value=None, lr=0.1, finished_at=1.0):
    return {
        "run_id": run_id,
        "point": point,
        "seed": seed,
        "lr": lr,
        "value": value,
        "round": 0,
        "config": {"d": 4},
        "bucket": "b",
        "max_metric": 1.0,
        "diverged": False,
        "success": True,
        "finished_at": finished_at,
    }


@pytest.fixture
def out(tmp_path):
    """A folder a finished run left: its lock file, and a store with two runs, a search, trajectory
    points and a compile."""
    folder = tmp_path / "out"
    with OutputLock(folder):
        store = Store(folder)
        driver.claim(store, load(SPEC))
        store.add_runs([run_row("r2", lr=3.0), run_row("r1")], [("r1", 8, {"accuracy": 0.5})])
        store.add_searches([{"unit": "p/0", "point": "p", "seed": 0, "config": {}, "variable": "N", "censored": "",
                             "non_monotone": False, "status": "done"}])  # fmt: skip
        store.add_compile("b", {"d": 4}, 2, 0.5, 1.0)
        store.close()
    return folder


# -- read-only folders ---------------------------------------------------------------------------------
@contextlib.contextmanager
def read_only(*paths):
    """Make `paths` read-only for this process, root included: `chattr +i` as root (chmod does not
    stop root), chmod otherwise. Skips the test where neither works."""
    if os.geteuid() != 0:
        modes = {p: p.stat().st_mode for p in paths}
        for p in paths:
            p.chmod(modes[p] & ~0o222)
        try:
            yield
        finally:
            for p, mode in modes.items():
                p.chmod(mode)
        return
    if shutil.which("chattr") is None:
        pytest.skip("chattr is missing: cannot make a folder read-only for root")
    done = subprocess.run(["chattr", "+i", *map(str, paths)], capture_output=True, text=True)
    try:
        if done.returncode:
            pytest.skip(f"chattr +i is not supported here: {done.stderr.strip()}")
        yield
    finally:
        subprocess.run(["chattr", "-i", *map(str, paths)], capture_output=True)  # also after a partial +i


def folder_and_files(folder):
    return [folder, *folder.iterdir()]


def test_reads_of_a_read_only_folder_work(out, capsys):
    expected = {t: load_results(out, t) for t in ("runs", "searches", "trajectories", "compiles", "meta")}
    before = sorted(p.name for p in out.iterdir())
    with read_only(*folder_and_files(out)):
        assert not os.access(out, os.W_OK)
        for table, frame in expected.items():
            assert load_results(out, table).equals(frame), table
        code, stdout, _ = call(capsys, "status", out)
        assert code == 0 and "2 of 4 runs done" in stdout and ": interrupted" in stdout
    assert sorted(p.name for p in out.iterdir()) == before  # nothing written, not even a -shm file


def test_reads_write_nothing(out, capsys):
    files = {p.name: p.read_bytes() for p in out.iterdir()}
    load_results(out)
    assert call(capsys, "status", out)[0] == 0
    assert {p.name: p.read_bytes() for p in out.iterdir()} == files  # no -wal or -shm file left either
    with contextlib.closing(Store(out, write=False)) as store, pytest.raises(sqlite3.OperationalError):
        store.set_meta({"spec": "other"})


def test_reads_of_a_read_only_folder_see_rows_left_in_the_wal(out, capsys):
    """A run killed mid-sweep leaves rows in results.sqlite-wal; a read-only read must still see them."""
    script = (
        "import os, sys; from jaxmem.persistence.store import Store; s = Store(sys.argv[1]); "
        "s.add_runs([{**{c: 0 for c in ('point', 'seed', 'lr', 'diverged', 'success')}, 'run_id': 'r9', "
        "'config': {}, 'bucket': 'b'}]); os._exit(0)"  # killed: no close, no WAL checkpoint
    )
    subprocess.run([sys.executable, "-c", script, str(out)], check=True, cwd=ROOT)
    assert (out / f"{FILENAME}-wal").stat().st_size > 0
    with read_only(*folder_and_files(out)):
        assert set(load_results(out)["run_id"]) == {"r1", "r2", "r9"}
        code, stdout, _ = call(capsys, "status", out)
        assert code == 0 and "3 of 4 runs done" in stdout


def test_report_into_a_read_only_folder_exits_4_naming_it(out, capsys):
    with read_only(*folder_and_files(out)):
        code, _, err = call(capsys, "report", out)
    assert code == 4
    assert err == (
        f"jaxmem: error: cannot write the report into {out}: the folder is not writable; copy it to a "
        "writable folder and run `jaxmem report` there\n"
    )


def test_report_over_a_read_only_file_exits_4_naming_it(out, capsys):
    (out / "runs.csv").write_text("")
    with read_only(out / "runs.csv"):
        code, _, err = call(capsys, "report", out)
    assert code == 4 and err.count("\n") == 1
    assert err.startswith("jaxmem: error: [Errno ") and err.endswith(f"'{out / 'runs.csv'}'\n")


def test_run_into_a_read_only_folder_exits_4_naming_it(out, capsys):
    with read_only(*folder_and_files(out)):
        code, _, err = call(capsys, "run", SPEC, "--out", out, "--quiet")
    assert code == 4 and err.count("\n") == 1
    assert err.startswith(f"jaxmem: error: cannot write to output folder {out}: {out / '.lock'} is not writable (")
    assert err.endswith("); choose another --out or make it writable\n")


def test_run_with_a_read_only_results_file_exits_4_naming_it(out, capsys):
    with read_only(out / FILENAME):
        code, _, err = call(capsys, "run", SPEC, "--out", out, "--quiet")
    assert code == 4
    assert err == (
        f"jaxmem: error: cannot write to output folder {out}: {out / FILENAME} is not writable; choose another "
        "--out or make it writable\n"
    )
    assert not (out / ".lock").read_text().strip()  # the refused run released its lease
    assert not list(out.glob(f"{FILENAME}.corrupt-*"))  # an intact file is never moved aside


READ_ONLY_MOUNT = """
import contextlib, io, json, sys
from jaxmem.cli.main import main
import jaxmem
out, spec, found = sys.argv[1], sys.argv[2], {}
for argv in (["status", out], ["report", out], ["run", spec, "--out", out, "--quiet"]):
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        found[argv[0]] = [main(argv), err.getvalue()]
found["runs"] = len(jaxmem.load_results(out))
print(json.dumps(found))
"""


def test_a_read_only_mount(out):
    """A real read-only file system (EROFS), where root can write nothing: a private bind mount."""
    probe = subprocess.run(
        ["unshare", "-m", "sh", "-c", 'mount --bind -o ro "$0" "$0" && ! touch "$0/probe"', str(out)],
        capture_output=True,
    )
    if shutil.which("unshare") is None or probe.returncode or (out / "probe").exists():
        pytest.skip("no private read-only bind mount here (needs unshare -m and mount)")
    done = subprocess.run(
        ["unshare", "-m", "sh", "-c", 'mount --bind -o ro "$0" "$0" && exec "$@"', str(out), sys.executable, "-c",
         READ_ONLY_MOUNT, str(out), str(SPEC)],
        capture_output=True, text=True, cwd=ROOT,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["status"] == [0, ""] and found["runs"] == 2
    assert found["report"][0] == 4 and f"cannot write the report into {out}" in found["report"][1]
    assert found["run"] == [
        4,
        f"jaxmem: error: cannot write to output folder {out}: {out / '.lock'} is not writable (Read-only file "
        "system); choose another --out or make it writable\n",
    ]


# -- every table a report reads is checked --------------------------------------------------------------
def _flip_a_bit(text: str, at: int) -> str:
    return text[:at] + chr(ord(text[at]) ^ 1) + text[at + 1 :]


def test_a_flipped_bit_in_the_stored_spec_is_detected(out, capsys):
    with contextlib.closing(sqlite3.connect(out / FILENAME)) as db, db:
        (spec,) = db.execute("SELECT value FROM meta WHERE key = 'resolved_spec'").fetchone()
        at = spec.index('"steps": ') + len('"steps": ')  # 32 -> 22: same length, valid JSON
        db.execute("UPDATE meta SET value = ? WHERE key = 'resolved_spec'", (_flip_a_bit(spec, at),))
    with pytest.raises(StoreError, match="rows failing their checksum: 1 in meta"):
        load_results(out, "meta")
    for command in ("status", "report"):
        code, _, err = call(capsys, command, out)
        assert code == 4 and "rows failing their checksum: 1 in meta" in err and err.count("\n") == 1


def test_a_changed_compile_record_is_detected(out):
    with contextlib.closing(sqlite3.connect(out / FILENAME)) as db, db:
        db.execute("UPDATE compiles SET slots = 3")
    with pytest.raises(StoreError, match="rows failing their checksum: 1 in compiles"):
        load_results(out, "compiles")


def test_a_store_without_meta_and_compile_checksums_opens_and_is_migrated(out):
    with contextlib.closing(sqlite3.connect(out / FILENAME)) as db, db:  # as an older version wrote it
        for table in ("meta", "compiles"):
            db.execute(f"DROP TRIGGER {table}_checksum")
            db.execute(f"ALTER TABLE {table} DROP COLUMN checksum")
    old = (out / FILENAME).read_bytes()
    assert load_results(out, "meta").set_index("key").loc["spec", "value"] == "tiny_linear"
    assert len(load_results(out, "compiles")) == 1
    assert (out / FILENAME).read_bytes() == old  # a read migrates nothing
    Store(out).close()  # a run's open migrates: existing rows are hashed as they are
    with contextlib.closing(sqlite3.connect(out / FILENAME)) as db, db:
        db.execute("UPDATE meta SET value = 'other' WHERE key = 'spec'")
    with pytest.raises(StoreError, match="1 in meta"):
        load_results(out, "meta")


# -- elapsed time ------------------------------------------------------------------------------------------
def claim_at(store, started: float, monkeypatch) -> None:
    with monkeypatch.context() as patch:
        patch.setattr(time, "time", lambda: started)
        driver.claim(store, load(SPEC))


def elapsed_shown(capsys, out) -> float:
    code, stdout, _ = call(capsys, "status", out)
    assert code == 0
    return float(stdout.split("elapsed: ")[1].split(" s")[0])


def test_status_of_a_killed_run_shows_its_elapsed_time(tmp_path, capsys, monkeypatch):
    """Killed 42 s after it started (its lease's last heartbeat), its last run stored at 30 s."""
    started = time.time() - 50
    store = Store(tmp_path)
    claim_at(store, started, monkeypatch)
    store.add_runs([run_row("r1", finished_at=started + 30)])
    store.close()
    dead = {"host": socket.gethostname(), "pid": 2**22 + 12345, "heartbeat": started + 42, "token": "t"}
    (tmp_path / ".lock").write_text(json.dumps(dead))
    assert elapsed_shown(capsys, tmp_path) == 42.0
    store = Store(tmp_path)  # the next run adds the killed one's time, up to its last stored row
    claim_at(store, time.time(), monkeypatch)
    assert float(store.meta()["elapsed_s"]) == 30.0
    store.close()


def test_status_of_a_running_sweep_shows_its_elapsed_time(tmp_path, capsys, monkeypatch):
    with OutputLock(tmp_path):
        store = Store(tmp_path)
        claim_at(store, time.time() - 100, monkeypatch)  # started 100 s ago, still running
        store.close()
        assert 100.0 <= elapsed_shown(capsys, tmp_path) < 110.0


def test_status_after_a_finished_run_shows_the_stored_time(out, capsys):
    store = Store(out)
    store.set_meta({"elapsed_s": "12.5"})  # as execute() adds the run's time when it ends
    store.close()
    assert elapsed_shown(capsys, out) == 12.5


# -- a folder holding another sweep -------------------------------------------------------------------------
def test_a_changed_spec_names_the_fields_that_differ(out):
    raw = {"experiment": "assoc_memory", "seeds": [0, 1, 2], "fixed": {"model": "linear", "d": 5, "N": 8},
           "train": {"steps": 32, "eval_every": 8, "learning_rates": [0.3, 3.0]}}  # fmt: skip
    store = Store(out)
    try:
        with pytest.raises(StoreError) as err:
            driver.claim(store, parse(raw, "tiny_linear"))
    finally:
        store.close()
    assert str(err.value) == (
        f"output folder {out} holds a different sweep (tiny_linear, preset none; it differs in "
        "engine.record_trajectory: true → (none), fixed.d: 4 → 5, seeds: [0, 1] → [0, 1, 2]); choose another "
        "--out or delete the folder"
    )


def test_spec_changes_lists_a_few_fields():
    old = {"a": {"b": 1, "c": "x" * 50}, "d": [1], "e": 1, "f": 2}
    new = {"a": {"b": 2, "c": "y"}, "d": [1], "g": {"h": True}}
    assert folder.spec_changes(old, new, shown=2) == (
        f'; it differs in a.b: 1 → 2, a.c: "{"x" * 36}... → "y" and 3 more'
    )
    assert folder.spec_changes(old, old) == ""


# -- one canonical row order ----------------------------------------------------------------------------------
def test_every_read_returns_rows_in_one_canonical_order(tmp_path):
    """The same rows written in two orders (as a killed and resumed sweep and an uninterrupted one
    write them) read back identically, runs by (point, seed, value, lr, run_id)."""
    runs = [run_row(f"r{i}", point=p, seed=s, value=v, lr=lr) for i, (p, s, v, lr) in enumerate(
        [("q", 0, 8, 0.1), ("p", 1, 4, 0.3), ("p", 0, 8, 0.3), ("p", 0, 8, 0.1), ("p", 0, 4, 3.0)])]  # fmt: skip
    points = [(r["run_id"], step, {"accuracy": step / 10}) for r in runs for step in (8, 0)]
    compiles = [("b2", {"d": 8}, 4, 1.0, 2.0), ("b1", {"d": 4}, 2, 1.0, 1.0)]
    frames = []
    for name, order in (("a", 1), ("b", -1)):
        (tmp_path / name).mkdir()
        store = Store(tmp_path / name)
        store.add_runs(runs[::order], points[::order])
        for compile_row in compiles[::order]:
            store.add_compile(*compile_row)
        store.set_meta(dict(list({"spec": "s", "preset": "quick"}.items())[::order]))
        store.close()
        frames.append(
            {t: jaxmem.load_results(tmp_path / name, t) for t in ("runs", "trajectories", "compiles", "meta")}
        )
    for table in frames[0]:
        assert frames[0][table].equals(frames[1][table]), table
    assert list(frames[0]["runs"]["run_id"]) == ["r4", "r3", "r2", "r1", "r0"]
    assert list(frames[0]["compiles"]["bucket"]) == ["b1", "b2"]


# -- lost rows (reliability issue, item 2) ---------------------------------------------------------------------
def delete_rows(out, sql: str) -> bytes:
    """Delete rows behind jaxmem's back, as `sqlite3 results.sqlite "delete ..."` does; the file after."""
    with contextlib.closing(sqlite3.connect(out / FILENAME)) as db, db:
        db.execute(sql)
    return (out / FILENAME).read_bytes()


def test_a_deleted_run_is_reported_by_every_command_and_the_file_kept(out, capsys):
    damaged = delete_rows(out, "DELETE FROM runs WHERE run_id = 'r1'")
    lost = f"results file {out / FILENAME} has lost rows of table runs (1 stored, 2 written); it is kept as it is"
    with pytest.raises(StoreError) as err:
        load_results(out)
    assert str(err.value).startswith(lost)
    for argv in (["status", out], ["report", out], ["run", SPEC, "--out", out, "--quiet"]):
        code, stdout, stderr = call(capsys, *argv)
        assert (code, stdout) == (4, "") and stderr.startswith(f"jaxmem: error: {lost}") and stderr.count("\n") == 1
    assert (out / FILENAME).read_bytes() == damaged  # neither repaired nor moved aside: the user decides
    assert not list(out.glob(f"{FILENAME}.corrupt-*"))


def test_a_store_that_lost_its_meta_refuses_another_sweep(out, capsys):
    delete_rows(out, "DELETE FROM meta")
    other = parse({"experiment": "assoc_memory", "seeds": [5], "fixed": {"model": "linear", "d": 4, "N": 8},
                   "train": {"steps": 8, "eval_every": 8, "learning_rates": [0.3]}}, "other")  # fmt: skip
    with pytest.raises(StoreError, match=r"has lost rows of table meta \(0 stored, \d+ written\)"):
        driver.open_store(out, other)
    for command in ("status", "report"):  # report was: KeyError: 'experiment'
        code, _, err = call(capsys, command, out)
        assert code == 4 and "has lost rows of table meta" in err


def test_a_store_that_lost_its_meta_before_it_had_counts_refuses_another_sweep(out):
    """An older version's store (no counts) that lost its meta: `run` cannot tell which sweep its rows
    belong to, so it refuses any."""
    with contextlib.closing(sqlite3.connect(out / FILENAME)) as db, db:
        db.execute("DROP TABLE counts")
        for (trigger,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'trigger' AND sql LIKE '%counts%'"):
            db.execute(f"DROP TRIGGER {trigger}")
        db.execute("DELETE FROM meta")
    with pytest.raises(StoreError, match="holds results but not the sweep they belong to"):
        driver.open_store(out, load(SPEC))
    assert len(load_results(out)) == 2


def test_a_store_without_counts_is_migrated_from_the_rows_it_holds(out):
    with contextlib.closing(sqlite3.connect(out / FILENAME)) as db, db:  # as a version before the counts wrote it
        db.execute("DROP TABLE counts")
        for (trigger,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'trigger' AND sql LIKE '%counts%'"):
            db.execute(f"DROP TRIGGER {trigger}")
        db.execute("DELETE FROM runs WHERE run_id = 'r1'")  # lost before the counts existed: not detectable
    old = (out / FILENAME).read_bytes()
    assert len(load_results(out)) == 1
    assert (out / FILENAME).read_bytes() == old  # a read migrates nothing
    store = Store(out)  # a run's open counts the rows present
    store.add_runs([run_row("r3")])
    store.close()
    assert len(load_results(out)) == 2
    delete_rows(out, "DELETE FROM runs WHERE run_id = 'r3'")
    with pytest.raises(StoreError, match=r"lost rows of table runs \(1 stored, 2 written\)"):
        load_results(out)


def test_a_changed_row_count_is_damage(out):
    delete_rows(out, "UPDATE counts SET rows = rows - 1 WHERE name = 'runs'")  # no trigger: its checksum goes stale
    with pytest.raises(StoreError, match="rows failing their checksum: 1 in counts"):
        load_results(out)


def test_a_read_while_a_run_stores_rows_sees_rows_and_counts_together(out, monkeypatch):
    """A run commits a row between a read's query of the counts and its count of the rows: no false alarm."""
    from jaxmem.persistence import store as module

    writer, rows_in = Store(out), module.rows_in

    def run_storing_meanwhile(db, table, where="1"):
        if table == "runs" and where == "1":
            writer.add_runs([run_row("r3")])
        return rows_in(db, table, where)

    monkeypatch.setattr(module, "rows_in", run_storing_meanwhile)
    assert len(load_results(out)) == 3  # was: "has rows jaxmem never wrote in table runs (3 stored, 2 written)"
    writer.close()
