"""Tests for jaxmem.store: the append-only SQLite results store and load_results."""

import json
import math
import re
import sqlite3

import numpy as np
import pandas as pd
import pytest

from jaxmem.persistence.store import FILENAME, RUN_COLUMNS, SEARCH_COLUMNS, Store, StoreError, load_results


def run_row(run_id, value=16, success=True, diverged=False, **extra):
    row = {
        "run_id": run_id,
        "point": "p1",
        "seed": 3,
        "lr": 0.01,
        "value": value,
        "round": 1,
        "config": {"model": "mlp", "d": 8, "m": 16, "N": value, "mlp_bias": True},
        "bucket": "b1",
        "max_metric": 0.995,
        "final_metric": 0.99,
        "final_loss": 0.05,
        "steps_run": 640,
        "steps_to_threshold": 576,
        "diverged": diverged,
        "success": success,
        "wall_time_s": 1.5,
        "device": "cpu:0",
        "finished_at": 1700000000.0,
    }
    row.update(extra)
    return row


def search_row(unit, capacity=40.0, **extra):
    row = {
        "unit": unit,
        "point": "p1",
        "seed": 3,
        "config": {"model": "mlp", "d": 8, "m": 16},
        "variable": "N",
        "capacity": capacity,
        "first_failure": capacity + 1,
        "censored": "",
        "rounds": 4,
        "probes": 13,
        "non_monotone": False,
        "params": 256.0,
        "bits": 212.9,
        "status": "done",
    }
    row.update(extra)
    return row


@pytest.fixture
def store(tmp_path):
    s = Store(tmp_path)
    yield s
    s.close()


def test_run_rows_round_trip(tmp_path, store):
    rows = [
        run_row("r1"),
        run_row("r2", value=32, success=False, steps_to_threshold=None),
        run_row("r3", value=64, success=False, diverged=True, max_metric=float("nan")),
    ]
    store.add_runs(rows)
    assert store.finished_runs() == {"r1": (True, False), "r2": (False, False), "r3": (False, True)}
    store.close()

    frame = load_results(tmp_path).set_index("run_id")
    assert list(frame.index) == ["r1", "r2", "r3"]
    r1 = frame.loc["r1"]
    for column in (
        "point",
        "seed",
        "lr",
        "value",
        "round",
        "bucket",
        "max_metric",
        "final_metric",
        "final_loss",
        "steps_run",
        "steps_to_threshold",
        "wall_time_s",
        "device",
        "finished_at",
    ):
        assert r1[column] == rows[0][column], column
    assert pd.isna(frame.loc["r2", "steps_to_threshold"])
    assert pd.isna(frame.loc["r3", "max_metric"])


def test_config_is_expanded_into_columns_and_flags_are_bool(tmp_path, store):
    store.add_runs([run_row("r1"), run_row("r2", value=32, success=False, diverged=True)])
    store.close()
    frame = load_results(tmp_path)
    assert "config" not in frame.columns
    assert {"model", "d", "m", "N", "mlp_bias"} <= set(frame.columns)
    assert list(frame["N"]) == [16, 32] and list(frame["model"]) == ["mlp", "mlp"]
    assert frame["success"].dtype == bool and frame["diverged"].dtype == bool
    assert list(frame["success"]) == [True, False] and list(frame["diverged"]) == [False, True]
    # the table's own columns come first, config fields after
    assert list(frame.columns[: len(RUN_COLUMNS) - 1]) == [c for c in RUN_COLUMNS if c != "config"]


def test_config_fields_never_shadow_table_columns(tmp_path, store):
    row = run_row("r1")
    row["config"] = {**row["config"], "seed": 999, "lr": 123.0}
    store.add_runs([row])
    store.close()
    frame = load_results(tmp_path)
    assert frame.loc[0, "seed"] == 3 and frame.loc[0, "lr"] == 0.01
    assert list(frame.columns).count("seed") == 1


def test_insert_or_ignore_keeps_the_first_row(tmp_path, store):
    store.add_runs([run_row("r1", success=True)])
    store.add_runs([run_row("r1", success=False, max_metric=0.1), run_row("r2")])
    store.add_runs([run_row("r2")])
    store.add_searches([search_row("u1", capacity=40.0)])
    store.add_searches([search_row("u1", capacity=99.0)])
    assert store.finished_runs() == {"r1": (True, False), "r2": (True, False)}
    assert store.finished_searches() == {"u1"}
    store.close()
    runs = load_results(tmp_path)
    assert len(runs) == 2 and runs.set_index("run_id").loc["r1", "max_metric"] == 0.995
    searches = load_results(tmp_path, "searches")
    assert len(searches) == 1 and searches.loc[0, "capacity"] == 40.0


def test_rows_survive_reopening(tmp_path):
    first = Store(tmp_path)
    first.add_runs([run_row("r1")])
    first.close()
    second = Store(tmp_path)  # CREATE TABLE IF NOT EXISTS must not wipe anything
    try:
        assert second.finished_runs() == {"r1": (True, False)}
        second.add_runs([run_row("r1"), run_row("r2")])
        assert set(second.finished_runs()) == {"r1", "r2"}
    finally:
        second.close()


def test_numpy_scalars_are_stored_as_plain_values(tmp_path, store):
    store.add_runs(
        [
            run_row(
                "r1",
                seed=np.int64(7),
                lr=np.float32(0.5),
                max_metric=np.float64(0.25),
                success=np.bool_(True),
                diverged=np.bool_(False),
                value=np.int32(12),
                config={"model": "mlp", "N": 12},
            )
        ]
    )
    store.close()
    row = load_results(tmp_path).iloc[0]
    assert (row["seed"], row["lr"], row["max_metric"], row["value"]) == (7, 0.5, 0.25, 12)
    assert bool(row["success"]) is True and bool(row["diverged"]) is False
    raw = sqlite3.connect(tmp_path / FILENAME).execute("SELECT typeof(seed), typeof(lr) FROM runs").fetchone()
    assert raw == ("integer", "real")


def test_searches_table(tmp_path, store):
    store.add_searches(
        [
            search_row("u1"),
            search_row("u2", capacity=float("nan"), censored="below", non_monotone=True, first_failure=8.0),
        ]
    )
    store.close()
    frame = load_results(tmp_path, "searches").set_index("unit")
    assert set(SEARCH_COLUMNS) - {"config", "unit"} <= set(frame.columns)
    assert {"model", "d", "m"} <= set(frame.columns)
    assert frame.loc["u1", "capacity"] == 40.0 and frame.loc["u1", "censored"] == ""
    assert math.isnan(frame.loc["u2", "capacity"]) and frame.loc["u2", "censored"] == "below"
    assert frame["non_monotone"].dtype == bool
    assert list(frame["non_monotone"]) == [False, True]


def test_trajectories_meta_and_compiles(tmp_path, store):
    store.add_runs(
        [run_row("r1")],
        trajectory=[("r1", 64, {"accuracy": 0.5}), ("r1", 128, {"accuracy": 0.9}), ("r1", 64, {"accuracy": 0.0})],
    )
    store.set_meta({"spec": "fig", "slots:b1": 8, "elapsed_s": "1.5"})
    store.set_meta({"elapsed_s": "2.5"})
    store.add_compile("b1", {"N": 64, "model": "mlp"}, 8, 3.0, 1.0)
    assert store.meta() == {"spec": "fig", "slots:b1": "8", "elapsed_s": "2.5"}
    store.close()
    traj = load_results(tmp_path, "trajectories")
    assert list(traj["step"]) == [64, 128]
    assert [json.loads(m)["accuracy"] for m in traj["metrics"]] == [0.5, 0.9]
    compiles = load_results(tmp_path, "compiles")
    assert compiles["seconds"].tolist() == [3.0] and compiles["slots"].tolist() == [8]
    assert json.loads(compiles["shape"][0]) == {"N": 64, "model": "mlp"}
    meta = load_results(tmp_path, "meta").set_index("key")["value"].to_dict()
    assert meta["slots:b1"] == "8"


def test_empty_tables_load(tmp_path, store):
    store.close()
    assert len(load_results(tmp_path)) == 0
    assert len(load_results(tmp_path, "searches")) == 0


def test_unknown_table(tmp_path, store):
    store.close()
    for name in ("run", "sqlite_master", "runs; DROP TABLE runs"):
        with pytest.raises(ValueError, match="unknown table"):
            load_results(tmp_path, name)
    assert len(load_results(tmp_path)) == 0  # nothing was executed


def test_missing_folder_or_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="no results"):
        load_results(tmp_path / "nowhere")
    with pytest.raises(FileNotFoundError, match="no results"):
        load_results(tmp_path)  # folder exists, no results file
    assert not (tmp_path / FILENAME).exists()  # a read does not create an empty store


@pytest.mark.parametrize("content", [b"this is not a database\n" * 100, b"SQLite format 3\x00" + b"\xff" * 4000])
def test_garbage_results_file(tmp_path, content):
    (tmp_path / FILENAME).write_bytes(content)
    with pytest.raises(StoreError) as err:
        load_results(tmp_path)
    message = str(err.value)
    assert str(tmp_path / FILENAME) in message and "unreadable" in message
    with pytest.raises(StoreError, match="unreadable"):
        Store(tmp_path)
    assert (tmp_path / FILENAME).read_bytes() == content  # never overwritten


def test_store_made_before_final_metrics_is_migrated(tmp_path):
    import sqlite3

    from jaxmem.persistence.store import RUN_COLUMNS

    old_columns = [c for c in RUN_COLUMNS if c != "final_metrics"]
    db = sqlite3.connect(tmp_path / "results.sqlite")
    db.execute(f"CREATE TABLE runs ({', '.join(old_columns)}, PRIMARY KEY (run_id))")
    db.execute(
        f"INSERT INTO runs ({', '.join(old_columns)}) VALUES ({', '.join('?' * len(old_columns))})",
        ["old", "p", 0, 0.1, None, 0, "{}", "b", 0.5, 0.5, 1.0, 10, None, 0, 0, 1.0, "cpu", 0.0],
    )
    db.commit()
    db.close()
    store = Store(tmp_path)
    store.add_runs([{**{c: 0 for c in RUN_COLUMNS}, "run_id": "new", "config": {}, "final_metrics": {"accuracy": 1.0}}])
    store.close()
    runs = load_results(tmp_path, expand=False).set_index("run_id")
    assert json.loads(runs.loc["new", "final_metrics"]) == {"accuracy": 1.0}
    assert pd.isna(runs.loc["old", "final_metrics"]) and runs.loc["old", "max_metric"] == 0.5


def test_an_empty_results_file_is_a_clear_error_for_every_read(tmp_path, capsys):
    """Reliability issue, item 3: a 0-byte results.sqlite crashed status (`no such table: meta`), report
    (pandas' DatabaseError) and load_results (a DatabaseError, not StoreError)."""
    from jaxmem.cli.main import main

    (tmp_path / FILENAME).write_bytes(b"")
    empty = f"results file {tmp_path / FILENAME} is unreadable or corrupted (it is empty: 0 bytes)"
    for table in ("runs", "meta"):
        with pytest.raises(StoreError, match=re.escape(empty)):
            load_results(tmp_path, table)
    for command in ("status", "report"):
        assert main([command, str(tmp_path)]) == 4
        assert capsys.readouterr().err.startswith(f"jaxmem: error: {empty}")
    assert [p.name for p in tmp_path.iterdir()] == [FILENAME]  # a read writes nothing


def test_run_moves_an_empty_results_file_aside_with_a_warning(tmp_path, caplog):
    """`jaxmem run` treats a 0-byte file as damage (the existing policy): it holds no rows, but a sweep
    that stored some may have left in-flight checkpoints that need them."""
    (tmp_path / FILENAME).write_bytes(b"")
    store = Store(tmp_path, repair=True)
    store.close()
    assert store.quarantined is not None and store.quarantined.read_bytes() == b""
    assert any("it is empty: 0 bytes" in r.getMessage() and str(store.quarantined) in r.getMessage()
               for r in caplog.records)  # fmt: skip
    assert len(load_results(tmp_path)) == 0


def test_a_results_file_without_tables_is_a_clear_error(tmp_path):
    sqlite3.connect(tmp_path / FILENAME).execute("PRAGMA user_version = 1").close()  # a header, no tables
    with pytest.raises(StoreError, match="has no table runs"):
        load_results(tmp_path)
