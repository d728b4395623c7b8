"""Per-process result stores of a multi-process run, and their merge into the folder's store.

SQLite must not be written by processes on several hosts (its locks are unreliable on network file
systems), so process k of a job writes only `<out>/shards/p<k>/results.sqlite`, and process 0 merges
every shard into `<out>/results.sqlite` once all processes are done. The merge is idempotent: rows
are keyed by deterministic ids (compile records by their content), so merging a shard twice, or
after a crash halfway, changes nothing. A shard is deleted only after its rows are committed to
the folder's store; a job that died leaves its shards, and the next run on the folder (single- or
multi-process) merges them first, so no finished run is ever recomputed or lost.
"""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

from jaxmem.persistence.store import CHECKED, FILENAME, Store, StoreError, disk_error

SHARDS = "shards"
_KEYED = ("runs", "searches", "trajectories", "final_eval", "timeline")  # rows keyed by ids; meta is the folder's own


def shard_dir(out_dir: Path, process_id: int) -> Path:
    return Path(out_dir) / SHARDS / f"p{process_id}"


def shard_dirs(out_dir: Path) -> list[Path]:
    """Every shard in the folder that holds a store, in process order."""
    root = Path(out_dir) / SHARDS
    found = [p for p in root.glob("p*") if (p / FILENAME).is_file() and p.name[1:].isdigit()] if root.is_dir() else []
    return sorted(found, key=lambda p: int(p.name[1:]))


def merge_shards(store: Store, out_dir: Path, remove: bool = False) -> int:
    """Copy the rows of every shard in `out_dir` into `store` (the folder's own); returns the runs added.
    A shard of another sweep is refused; with `remove`, merged shards are deleted."""
    added = 0
    fingerprint = store.meta().get("fingerprint")
    for directory in shard_dirs(out_dir):
        shard = Store(directory, repair=True)  # a damaged shard is moved aside: its rows are recomputed
        try:
            theirs = shard.meta().get("fingerprint")
        finally:
            shard.close()
        if theirs not in (None, fingerprint):
            raise StoreError(f"{directory} holds the results of a different sweep; delete it or choose another --out")
        added += _merge_one(store, directory / FILENAME)
        if remove:
            shutil.rmtree(directory)
    if remove:
        _remove_empty(Path(out_dir) / SHARDS)
    return added


def _merge_one(store: Store, path: Path) -> int:
    """The shard's rows in one transaction: all or none (a full disk: StoreError, both stores kept)."""
    db = store.db
    before = db.execute("SELECT count(*) FROM runs").fetchone()[0]
    db.execute("ATTACH DATABASE ? AS shard", (str(path),))
    try:
        _insert_shard_rows(db)
    except sqlite3.OperationalError as err:
        raise disk_error(store.path, err) from None
    finally:
        db.execute("DETACH DATABASE shard")
    return db.execute("SELECT count(*) FROM runs").fetchone()[0] - before


def _insert_shard_rows(db: sqlite3.Connection) -> None:
    with db:
        for table in _KEYED:
            names = ", ".join(CHECKED[table])
            db.execute(f"INSERT OR IGNORE INTO main.{table} ({names}) SELECT {names} FROM shard.{table}")
        names = ", ".join(CHECKED["compiles"])
        same = " AND ".join(f"c.{c} IS s.{c}" for c in CHECKED["compiles"])
        db.execute(
            f"INSERT INTO main.compiles ({names}) SELECT {names} FROM shard.compiles AS s "
            f"WHERE NOT EXISTS (SELECT 1 FROM main.compiles AS c WHERE {same})"
        )


def _remove_empty(directory: Path) -> None:
    if directory.is_dir() and not any(directory.iterdir()):
        directory.rmdir()


def finished(out_dir: Path) -> tuple[dict[str, tuple[bool, bool]], set[str]]:
    """The finished runs (run_id -> (success, diverged)) and searches of the folder's store, read
    without locking or writing anything (the store is not written while a job's processes read it),
    so that processes on other hosts can read it over a network file system."""
    path = Path(out_dir) / FILENAME
    db = sqlite3.connect(f"file:{path.absolute()}?immutable=1", uri=True)
    try:
        runs = {r: (bool(s), bool(d)) for r, s, d in db.execute("SELECT run_id, success, diverged FROM runs")}
        return runs, {u for (u,) in db.execute("SELECT unit FROM searches")}
    finally:
        db.close()
