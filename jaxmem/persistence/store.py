"""Crash-safe, append-only results store (SQLite, one file per output folder).

Every finished run is one row of `runs`, every finished threshold search one row of `searches`,
and (optionally) in-flight metrics go to `trajectories`, the test-time evaluations of a finished run's
parameters to `final_eval`. Rows are written in transactions and keyed
by deterministic ids, so a process killed at any point leaves either the whole row or nothing, and a
resumed sweep never writes a row twice.

Damage is detected, never used: opening a store runs SQLite's `quick_check` and verifies every row of
every table (`runs`, `searches`, `trajectories`, `meta`, `compiles`) against its checksum (a hash of
the stored values, written by a trigger in the row's own transaction). A damaged (or empty, 0-byte) file
is reported; `jaxmem run` (repair=True) moves it aside as `results.sqlite.corrupt-<time>`, with a warning
naming it, and starts a fresh store, so the sweep recomputes those rows.

Lost rows are detected too: `counts` holds, per table, the rows ever written to it (kept by triggers in
each insert's own transaction, each count checksummed; nothing deletes rows), so a table holding fewer
rows than its count lost some (a dropped table: all). That file is refused, by `jaxmem run` too and
by a read of any of its tables, naming the table and counts:
its other rows are intact, and whether to restore it or recompute it all is the user's call.

The disk is not the file: a full disk or an I/O error (reading or writing) raises StoreError, naming
the folder and its free space when it is full, and leaves the file as it is; rows committed before
are kept, and a rerun once there is room resumes from them.

Reads (`load_results`, `jaxmem status`, `jaxmem report`) write no rows and work in a read-only folder
(see `connect`); a store opened for writing refuses, naming the path, a file or folder it cannot
write. Every read returns rows in one canonical order (ORDER), whatever order they were written in,
so everything derived from a store depends on its rows alone.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import logging
import os
import shutil
import sqlite3
import time
from pathlib import Path
from typing import Any, Iterable
from urllib.parse import quote

import pandas as pd

FILENAME = "results.sqlite"
log = logging.getLogger("jaxmem")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY, point TEXT NOT NULL, seed INTEGER NOT NULL, lr REAL NOT NULL,
    value INTEGER, round INTEGER, config TEXT NOT NULL, bucket TEXT NOT NULL,
    max_metric REAL, final_metric REAL, final_loss REAL, steps_run INTEGER, steps_to_threshold INTEGER,
    diverged INTEGER NOT NULL, success INTEGER NOT NULL, wall_time_s REAL, device TEXT, finished_at REAL,
    final_metrics TEXT);
CREATE TABLE IF NOT EXISTS searches (
    unit TEXT PRIMARY KEY, point TEXT NOT NULL, seed INTEGER NOT NULL, config TEXT NOT NULL,
    variable TEXT NOT NULL, capacity REAL, first_failure REAL, censored TEXT NOT NULL, rounds INTEGER,
    probes INTEGER, non_monotone INTEGER NOT NULL, params REAL, bits REAL, status TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS trajectories (
    run_id TEXT NOT NULL, step INTEGER NOT NULL, metrics TEXT NOT NULL, PRIMARY KEY (run_id, step));
CREATE TABLE IF NOT EXISTS final_eval (
    run_id TEXT NOT NULL, point INTEGER NOT NULL, at TEXT NOT NULL, metrics TEXT NOT NULL,
    PRIMARY KEY (run_id, point));
CREATE TABLE IF NOT EXISTS compiles (
    bucket TEXT NOT NULL, shape TEXT NOT NULL, slots INTEGER NOT NULL, seconds REAL NOT NULL, at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS timeline (
    kind TEXT NOT NULL, id TEXT NOT NULL, start INTEGER NOT NULL, end INTEGER NOT NULL, known_at INTEGER NOT NULL,
    status TEXT NOT NULL, PRIMARY KEY (kind, id, start));
"""

RUN_COLUMNS = (
    "run_id",
    "point",
    "seed",
    "lr",
    "value",
    "round",
    "config",
    "bucket",
    "max_metric",
    "final_metric",
    "final_loss",
    "steps_run",
    "steps_to_threshold",
    "diverged",
    "success",
    "wall_time_s",
    "device",
    "finished_at",
    "final_metrics",  # JSON: every metric of the experiment at the run's last evaluation
)
SEARCH_COLUMNS = (
    "unit",
    "point",
    "seed",
    "config",
    "variable",
    "capacity",
    "first_failure",
    "censored",
    "rounds",
    "probes",
    "non_monotone",
    "params",
    "bits",
    "status",
)
CHECKED = {  # every table, with the columns its rows' checksums cover
    "runs": RUN_COLUMNS,
    "searches": SEARCH_COLUMNS,
    "trajectories": ("run_id", "step", "metrics"),
    "final_eval": ("run_id", "point", "at", "metrics"),  # point: its index in the axes' product; at: its values
    "meta": ("key", "value"),
    "compiles": ("bucket", "shape", "slots", "seconds", "at"),
    # the logical timeline (program steps since the sweep began): a run ("run", run id) from the step its
    # slot was filled to the step it stopped (status "done") or was frozen ("frozen": no outcome, not a
    # failure), known to the driver at `known_at`; a search ("search", unit) from 0 to the step it ended
    "timeline": ("kind", "id", "start", "end", "known_at", "status"),
}
LATER = ("timeline",)  # tables newer than the row counts: an older store has neither them nor their count
ORDER = {  # the canonical order of each table's rows in every read (a total order: keys come last)
    "runs": ("point", "seed", "value", "lr", "run_id"),
    "searches": ("point", "seed", "unit"),
    "trajectories": ("run_id", "step"),
    "final_eval": ("run_id", "point"),
    "meta": ("key",),
    "compiles": ("at", "bucket", "shape", "slots", "seconds"),
    "timeline": ("kind", "start", "id"),
}
COUNTS = "counts"  # per table of CHECKED: the rows ever written to it (name, rows, checksum)
SESSION = "session"  # meta key: {"started_at", "elapsed_s"} of the latest `jaxmem run`, written as it starts
COMPILE_CACHE = "compile_cache"  # meta key: {"dir": the persistent compilation cache of the latest `jaxmem run`
# (null: off), "loaded": the compiles it served, summed over every run into the folder}
_ACCESS_ERRORS = ("SQLITE_CANTOPEN", "SQLITE_READONLY", "SQLITE_PERM", "SQLITE_AUTH")  # not damage
_DISK_ERRORS = ("SQLITE_FULL", "SQLITE_IOERR")  # the disk failed, not the file: never damage
NO_SPACE = (errno.ENOSPC, errno.EDQUOT)
LOW_SPACE = 2**20  # bytes free below which a disk error is put down to a full disk


class StoreError(RuntimeError):
    """The results file is unreadable, damaged, cannot be written (its disk full), or belongs to another sweep."""


class Store:
    def __init__(self, out_dir: Path, repair: bool = False, verify: Iterable[str] = tuple(CHECKED), write: bool = True):
        """Open the store of an output folder, checking the rows of the tables in `verify`: with
        `write`, created if missing and its schema migrated, else read-only. A damaged file raises
        StoreError, or with `repair` is moved aside (its path in `self.quarantined`) and replaced by an
        empty store. A file or folder it may not open, or with `write` not write, a full disk or an I/O
        error, or lost rows raise StoreError."""
        self.path = Path(out_dir) / FILENAME
        self.quarantined: Path | None = None
        self.verify = tuple(verify)
        self.write = write
        if write and (blocked := unwritable(self.path)):
            raise not_writable(self.path.parent, blocked)
        damage = self._open()
        if damage and not repair:
            raise StoreError(
                f"results file {self.path} is unreadable or corrupted ({damage}); rerun `jaxmem run` on this "
                "folder to move it aside and recompute its rows"
            )
        if damage:
            self.quarantined = quarantine(self.path)
            log.warning(
                "results file %s is corrupted (%s); moved it to %s and starting afresh: none of its rows are "
                "used, the sweep recomputes them",
                self.path,
                damage,
                self.quarantined,
            )
            if damage := self._open():
                raise StoreError(f"cannot create a fresh results file {self.path}: {damage}")

    def _open(self) -> str | None:
        """Open the file (see _check); a file this call created, then failing, is removed again (e.g.
        on a full disk: a later run finds no empty file to take for damage)."""
        created = self.write and not any(p.exists() for p in companions(self.path))
        try:
            return self._check()
        except StoreError:
            if created:
                for path in companions(self.path):
                    path.unlink(missing_ok=True)
            raise

    def _check(self) -> str | None:
        """Connect (read-only unless writing), create or migrate the schema when writing, and check the
        file; the damage found (then closed), or None. An error opening it that is no damage (a file
        it may not read or write, a full disk, an I/O error), tables missing from a file only read, and
        lost rows raise StoreError."""
        if self.path.is_file() and self.path.stat().st_size == 0:
            return "it is empty: 0 bytes"
        try:
            self.db = connect(self.path, self.write)
        except sqlite3.DatabaseError as err:
            return _damage_of(err, self.path)
        try:
            self.db.create_function("row_hash", -1, row_hash, deterministic=True)
            if self.write:
                self.db.execute("PRAGMA journal_mode=WAL")
                self.db.execute("PRAGMA synchronous=FULL")
                self.db.executescript(_SCHEMA)
                self._migrate()
            damage = _damage(self.db, self.verify)
            problem = None if damage else _lost_rows(self.db) or _missing_tables(self.db, self.verify)
        except sqlite3.DatabaseError as err:
            self.db.close()
            return _damage_of(err, self.path)
        if damage or problem:
            self.db.close()
        if problem:
            raise StoreError(f"results file {self.path} {problem}")
        return damage

    def _migrate(self) -> None:
        """Add the columns newer versions write to a store made by an older one (rows written before
        checksums existed are hashed as they are), the checksum triggers, and the row counts (a store
        made before them starts from the rows it holds) with their triggers; all in one transaction."""
        have = columns_of(self.db, "runs")
        with self.db:
            self.db.execute("BEGIN IMMEDIATE")
            if COUNTS not in tables_of(self.db):
                self.db.execute(f"CREATE TABLE {COUNTS} (name TEXT PRIMARY KEY, rows INTEGER NOT NULL, checksum TEXT)")
                self.db.executemany(
                    f"INSERT INTO {COUNTS} VALUES (?1, ?2, row_hash(?1, ?2))",
                    [(table, rows_in(self.db, table)) for table in CHECKED],
                )
            counted = {name for (name,) in self.db.execute(f"SELECT name FROM {COUNTS}")}
            self.db.executemany(  # a table newer than the store's counts starts from the rows it holds
                f"INSERT INTO {COUNTS} VALUES (?1, ?2, row_hash(?1, ?2))",
                [(table, rows_in(self.db, table)) for table in CHECKED if table not in counted],
            )
            for column in (c for c in RUN_COLUMNS if c not in have):
                self.db.execute(f"ALTER TABLE runs ADD COLUMN {column} TEXT")
            for table, columns in CHECKED.items():
                if "checksum" not in columns_of(self.db, table):
                    self.db.execute(f"ALTER TABLE {table} ADD COLUMN checksum TEXT")
                    self.db.execute(f"UPDATE {table} SET checksum = row_hash({', '.join(columns)})")
                new = ", ".join(f"NEW.{c}" for c in columns)
                self.db.execute(
                    f"CREATE TRIGGER IF NOT EXISTS {table}_checksum AFTER INSERT ON {table} BEGIN "
                    f"UPDATE {table} SET checksum = row_hash({new}) WHERE rowid = NEW.rowid; END"
                )
                self.db.execute(
                    f"CREATE TRIGGER IF NOT EXISTS {table}_count AFTER INSERT ON {table} "
                    f"BEGIN {_recount(table, '+')} END"
                )
            self.db.execute(  # a meta key written again replaces its row: one row, counted once
                "CREATE TRIGGER IF NOT EXISTS meta_replaced BEFORE INSERT ON meta "
                f"WHEN NEW.key IN (SELECT key FROM meta) BEGIN {_recount('meta', '-')} END"
            )

    def close(self) -> None:
        self.db.close()

    @contextlib.contextmanager
    def _writing(self):
        """One write transaction, committed whole or rolled back; a full disk or an I/O error raises
        StoreError (see disk_error), every row committed before kept."""
        try:
            with self.db:
                yield
        except sqlite3.OperationalError as err:
            if not (err.sqlite_errorname or "").startswith(_DISK_ERRORS):
                raise
            raise disk_error(self.path, err) from None

    def meta(self) -> dict[str, str]:
        return dict(self.db.execute("SELECT key, value FROM meta"))

    def set_meta(self, values: dict[str, Any]) -> None:
        with self._writing():
            self.db.executemany(
                _insert("meta", "INSERT OR REPLACE"),
                [(k, v if isinstance(v, str) else json.dumps(v)) for k, v in values.items()],
            )

    def add_runs(
        self,
        rows: Iterable[dict],
        trajectory: Iterable[tuple[str, int, dict]] = (),
        final_eval: Iterable[tuple[str, int, dict, dict]] = (),
        timeline: Iterable[tuple] = (),
    ) -> None:
        """Append finished runs, trajectory points, test-time evaluations (run_id, point index, point,
        metrics) and timeline rows (see add_timeline) in one transaction; existing ids are kept."""
        with self._writing():
            self.db.executemany(
                _insert("runs"),
                [tuple(_cell(r.get(c)) for c in RUN_COLUMNS) for r in rows],
            )
            self.add_trajectory(trajectory)
            self.db.executemany(
                _insert("final_eval"),
                [(run, i, json.dumps(at), json.dumps(m)) for run, i, at, m in final_eval],
            )
            self.db.executemany(_insert("timeline"), timeline)

    def add_trajectory(self, points: Iterable[tuple[str, int, dict]]) -> None:
        self.db.executemany(
            _insert("trajectories"),
            [(run, step, json.dumps(m)) for run, step, m in points],
        )

    def add_searches(self, rows: Iterable[dict], timeline: Iterable[tuple] = ()) -> None:
        """Append finished searches and their timeline rows (see add_timeline) in one transaction: a
        search stored without its end would read as ended at step 0 to a resumed sweep replaying."""
        with self._writing():
            self.db.executemany(
                _insert("searches"),
                [tuple(_cell(r.get(c)) for c in SEARCH_COLUMNS) for r in rows],
            )
            self.db.executemany(_insert("timeline"), timeline)

    def add_compile(self, bucket: str, shape: dict, slots: int, seconds: float, at: float) -> None:
        with self._writing():
            self.db.execute(
                _insert("compiles", "INSERT"),
                (bucket, json.dumps(shape, sort_keys=True), slots, seconds, at),
            )

    def probed(self) -> dict[str, set[int]]:
        """unit (point/seed) -> the searched values of its stored runs."""
        rows = self.db.execute("SELECT point, seed, value FROM runs WHERE value IS NOT NULL")
        units: dict[str, set[int]] = {}
        for point, seed, value in rows:
            units.setdefault(f"{point}/{seed}", set()).add(int(value))
        return units

    def add_timeline(self, rows: Iterable[tuple]) -> None:
        """Append timeline rows (kind, id, start, end, known_at, status); existing keys are kept (a
        resumed sweep replaying a segment writes the same rows again)."""
        with self._writing():
            self.db.executemany(_insert("timeline"), rows)

    def known_at(self, kind: str = "run") -> dict[str, int]:
        """run id (or with kind "search", unit) -> the logical step its outcome became known (a store
        older than the timeline: none)."""
        if "timeline" not in tables_of(self.db):
            return {}
        rows = self.db.execute("SELECT id, known_at FROM timeline WHERE kind = ? AND status = 'done'", (kind,))
        return dict(rows)

    def add_rows(self, table: str, rows: Iterable[tuple]) -> None:
        """Append rows of `table`, each a tuple of its CHECKED columns' values, in one transaction (an
        imported export: jaxmem.persistence.shipped)."""
        with self._writing():
            self.db.executemany(_insert(table, "INSERT"), rows)

    def finished_runs(self) -> dict[str, tuple[bool, bool]]:
        """run_id -> (success, diverged) for every stored run."""
        return {r: (bool(s), bool(d)) for r, s, d in self.db.execute("SELECT run_id, success, diverged FROM runs")}

    def finished_searches(self) -> set[str]:
        return {u for (u,) in self.db.execute("SELECT unit FROM searches")}

    def search_answers(self) -> dict[str, float]:
        """unit -> the answer of every finished search that has one (not censored), else NaN."""
        rows = self.db.execute("SELECT unit, capacity, censored FROM searches")
        return {u: float(c) if c is not None and not censored else float("nan") for u, c, censored in rows}

    def version(self) -> tuple:
        """What any write changes: the rows ever written per table (COUNTS; none in an older version's
        store) and the meta table (whose keys are written again in place)."""
        counts = self.db.execute(f"SELECT name, rows FROM {COUNTS}") if COUNTS in tables_of(self.db) else []
        return tuple(sorted(counts)), tuple(sorted(self.meta().items()))

    def last_write(self) -> float | None:
        """The newest time the store records: a run's finish or a compile."""
        return self.db.execute(
            "SELECT max(t) FROM (SELECT max(finished_at) AS t FROM runs UNION ALL SELECT max(at) FROM compiles)"
        ).fetchone()[0]

    def table(self, name: str) -> pd.DataFrame:
        """A table's rows in the canonical order (ORDER), with every column this version writes (a
        store written by an older one, read without migrating it, lacks some: they are empty), its
        flags as bools."""
        if name in LATER and name not in tables_of(self.db):
            return pd.DataFrame(columns=list(CHECKED[name]))
        frame = pd.read_sql_query(f"SELECT * FROM {name} ORDER BY {', '.join(ORDER[name])}", self.db)
        frame = frame.reindex(columns=list(CHECKED[name]))
        for column in ("diverged", "success", "non_monotone"):
            if column in frame:
                frame[column] = frame[column].astype(bool)
        return frame


def _insert(table: str, verb: str = "INSERT OR IGNORE") -> str:
    columns = CHECKED[table]
    return f"{verb} INTO {table} ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})"


def connect(path: Path, write: bool) -> sqlite3.Connection:
    """A connection to a results file. One that reads writes no rows (`query_only`). In a folder this
    process may write it is an ordinary connection: as the last connection to a file, it moves the rows
    a killed run left in the -wal file into the file and removes the -wal and -shm files on closing.
    Elsewhere, and on a full disk, it is read-only (`mode=ro`), or `immutable` where the folder cannot
    hold the -shm file SQLite needs and no -wal file holds rows not yet in the file (else the error is
    raised)."""
    if write:
        return sqlite3.connect(path, timeout=30)
    uri = f"file:{quote(str(path.absolute()))}"
    if unwritable(path) is None and not full(path.parent, None):
        db = sqlite3.connect(f"{uri}?mode=rw", uri=True, timeout=30)
        db.execute("PRAGMA query_only = 1")
        return db
    db = sqlite3.connect(f"{uri}?mode=ro", uri=True, timeout=30)
    try:
        db.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.DatabaseError as err:
        db.close()
        wal = Path(f"{path}-wal")
        if not isinstance(err, sqlite3.OperationalError) or (wal.exists() and wal.stat().st_size):
            raise
        return sqlite3.connect(f"{uri}?immutable=1", uri=True)
    return db


def unwritable(path: Path) -> Path | None:
    """The first of a results file's folder and files (-wal, -shm) this process cannot write, or None."""
    paths = (path.parent, *companions(path))
    return next((p for p in paths if p.exists() and not os.access(p, os.W_OK)), None)


def not_writable(folder: Path, path: Path, reason: str = "") -> StoreError:
    """The error of a `jaxmem run` that cannot write to its output folder."""
    because = f" ({reason})" if reason else ""
    return StoreError(
        f"cannot write to output folder {folder}: {path} is not writable{because}; choose another --out or "
        "make it writable"
    )


def _damage_of(err: sqlite3.DatabaseError, path: Path) -> str:
    """`err` as damage found opening a results file; raises StoreError when it is no damage but an
    access error (a file or folder SQLite may not open, read or write) or a disk error."""
    name = err.sqlite_errorname or ""
    if name.startswith(_ACCESS_ERRORS):
        raise StoreError(f"cannot open results file {path}: {err}") from None
    if name.startswith(_DISK_ERRORS):
        raise disk_error(path, err) from None
    return str(err)


def disk_error(path: Path, err: Exception) -> StoreError:
    """The error of a results file its disk failed to read or write: a full disk (see no_space), or
    another I/O error; either way the file is kept as it is, never taken for damage."""
    if getattr(err, "sqlite_errorname", "") == "SQLITE_FULL" or full(path.parent, err):
        return no_space(path.parent, f"results file {path} keeps every row stored so far")
    return StoreError(
        f"cannot read or write results file {path} ({err}); it is kept as it is: check the disk, then rerun"
    )


def full(folder: Path, err: Exception) -> bool:
    """Whether `err` is down to a full disk: ENOSPC (or a quota), or any error with under LOW_SPACE free."""
    return getattr(err, "errno", None) in NO_SPACE or shutil.disk_usage(folder).free < LOW_SPACE


def no_space(folder: Path, kept: str) -> StoreError:
    """The error of a write to `folder` its full disk refused, naming the folder, its file system and
    the space left there; `kept`: what is kept as it was."""
    usage = shutil.disk_usage(folder)
    return StoreError(
        f"no space left on {folder} (free {usage.free / 2**20:.1f} MiB of {usage.total / 2**20:.1f} MiB on "
        f"the file system at {mount_point(folder)}): {kept}; make room there, then rerun"
    )


def mount_point(path: Path) -> Path:
    """The folder where the file system holding `path` is mounted."""
    path = Path(path).absolute()
    while path.parent != path and path.parent.stat().st_dev == path.stat().st_dev:
        path = path.parent
    return path


def row_hash(*values) -> str:
    """A row's checksum: a hash of its values as SQLite stores them (registered as an SQL function)."""
    return hashlib.blake2b(repr(values).encode(), digest_size=8).hexdigest()


def _damage(db: sqlite3.Connection, tables: Iterable[str]) -> str | None:
    """What is wrong with an open store: a failed integrity check, or rows of `tables` or of the row
    counts failing their checksum (tables without checksums, in a store an older version wrote and
    nothing has migrated since, have none to check)."""
    check = [row[0].replace("\n", "; ") for row in db.execute("PRAGMA quick_check(3)")]
    if check != ["ok"]:
        return "integrity check failed: " + "; ".join(check)[:300]
    bad = {
        table: rows_in(db, table, f"checksum IS NOT row_hash({', '.join(columns)})")
        for table, columns in {**CHECKED, COUNTS: ("name", "rows")}.items()
        if table in (*tables, COUNTS) and "checksum" in columns_of(db, table)
    }
    failing = ", ".join(f"{n} in {table}" for table, n in bad.items() if n)
    return f"rows failing their checksum: {failing}" if failing else None


def _recount(table: str, sign: str) -> str:
    """The statement of a trigger adding (sign '+') or taking (sign '-') one row to `table`'s count."""
    rows = f"rows {sign} 1"
    return f"UPDATE {COUNTS} SET rows = {rows}, checksum = row_hash(name, {rows}) WHERE name = '{table}';"


def _missing_tables(db: sqlite3.Connection, tables: Iterable[str]) -> str | None:
    """What a file only read lacks of `tables` (one written by an older version, or whose creation was
    cut short), or None. A file opened for writing has them all: they are created."""
    missing = [table for table in tables if table not in tables_of(db) and table not in LATER]
    if not missing:
        return None
    return (
        f"has no table {', '.join(missing)} (an older jaxmem wrote it, or its creation was cut short); "
        "`jaxmem run` on this folder adds the tables"
    )


def _lost_rows(db: sqlite3.Connection) -> str | None:
    """How the rows stored differ from those written (COUNTS), in every table whatever a read verifies
    (counting rows is cheap, unlike checking their checksums), e.g. 'has lost rows of table runs (59
    stored, 64 written)', or None. A missing table stores no rows: one that had rows lost them, one that
    had none is added by `jaxmem run` (_missing_tables). A store without counts (an older version's,
    not migrated yet) has nothing to compare."""
    present = tables_of(db)
    if COUNTS not in present:
        return None
    with snapshot(db):  # a run writing meanwhile adds rows and counts together
        written = dict(db.execute(f"SELECT name, rows FROM {COUNTS}"))
        tally = {t: (rows_in(db, t) if t in present else 0, written[t]) for t in CHECKED if t in written}
    expected = [t for t in CHECKED if t not in LATER or t in written or (t in present and rows_in(db, t))]
    tally[COUNTS] = (len(written.keys() & set(expected)), len(expected))
    wrong = [_miscount(table, stored, count) for table, (stored, count) in tally.items() if stored != count]
    if not wrong:
        return None
    return (
        " and ".join(wrong) + "; it is kept as it is: restore it from a copy, or move it aside and rerun "
        "`jaxmem run` to recompute the sweep"
    )


@contextlib.contextmanager
def snapshot(db: sqlite3.Connection):
    """One read transaction: every query in it sees the file as it was at the first."""
    db.execute("BEGIN")
    try:
        yield
    finally:
        db.execute("ROLLBACK")


def _miscount(table: str, stored: int, written: int) -> str:
    what = "has lost rows of" if stored < written else "has rows jaxmem never wrote in"
    return f"{what} table {table} ({stored} stored, {written} written)"


def columns_of(db: sqlite3.Connection, table: str) -> set[str]:
    return {row[1] for row in db.execute(f"PRAGMA table_info({table})")}


def tables_of(db: sqlite3.Connection) -> set[str]:
    return {name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def rows_in(db: sqlite3.Connection, table: str, where: str = "1") -> int:
    return db.execute(f"SELECT count(*) FROM {table} WHERE {where}").fetchone()[0]


def elapsed(meta: dict[str, str], end: float) -> float:
    """Seconds a sweep has run: its finished runs' total (`elapsed_s`) plus, while the latest run's
    session is open (it is running, or was killed before adding its time), that session up to `end`."""
    total = float(meta.get("elapsed_s", 0.0))
    session = json.loads(meta.get(SESSION, "null"))
    if session is None or session["elapsed_s"] != total:
        return total
    return total + max(end - session["started_at"], 0.0)


def companions(path: Path) -> list[Path]:
    """A results file and its -wal and -shm files."""
    return [Path(f"{path}{suffix}") for suffix in ("", "-wal", "-shm")]


def quarantine(path: Path) -> Path:
    """Move a damaged results file (with its -wal and -shm companions) aside; returns its new path."""
    target = path.with_name(f"{path.name}.corrupt-{time.strftime('%Y%m%d-%H%M%S')}")
    for source, moved in zip(companions(path), companions(target)):
        if source.exists():
            source.rename(moved)
    return target


def _cell(value):
    if isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=True)
    if hasattr(value, "item"):
        return value.item()
    return value


def expand_config(frame: pd.DataFrame) -> pd.DataFrame:
    """Spread the JSON `config` column into one column per field."""
    if "config" not in frame or frame.empty:
        return frame
    config = pd.DataFrame([json.loads(c) for c in frame["config"]], index=frame.index)
    config = config[[c for c in config.columns if c not in frame.columns]]
    return pd.concat([frame.drop(columns="config"), config], axis=1)


def load_results(out_dir: str | Path, table: str = "runs", expand: bool = True) -> pd.DataFrame:
    """One sweep's results as a DataFrame: `runs` (default), `searches`, `trajectories`, `final_eval`
    (test-time axes: see `final_eval_frame`), `compiles` or `meta`, read without writing anything;
    with `expand`, the JSON `config` column becomes one column per field. Rows come in a canonical
    order, whatever order they were written in: runs by (point, seed, value, lr, run_id), searches by
    (point, seed, unit), trajectories by (run_id, step), final_eval by (run_id, point), meta by key,
    compiles by time."""
    path = Path(out_dir) / FILENAME
    if not path.is_file():
        raise FileNotFoundError(f"no results in {out_dir} (expected {path})")
    if table not in CHECKED:
        raise ValueError(f"unknown table {table!r}; one of {', '.join(CHECKED)}")
    store = Store(Path(out_dir), verify=[table], write=False)  # the rows it returns
    try:
        frame = store.table(table)
    finally:
        store.close()
    if table == "final_eval" and expand:
        return final_eval_frame(frame, load_results(out_dir, "runs", expand=False))
    return expand_config(frame) if expand else frame


def final_eval_frame(raw: pd.DataFrame, runs: pd.DataFrame) -> pd.DataFrame:
    """The test-time evaluations, wide: run_id, seed, lr, the run's config (a test-time field holds
    the evaluated value; the run's own value, where its config has one, is `trained_<field>`), then
    every metric; in (run, point) order."""
    if raw.empty:
        return raw.drop(columns=["point", "at", "metrics"])
    at = pd.DataFrame([json.loads(a) for a in raw["at"]], index=raw.index)
    metrics = pd.DataFrame([json.loads(m) for m in raw["metrics"]], index=raw.index)
    run = runs.set_index("run_id").loc[raw["run_id"], ["seed", "lr", "config"]].set_index(raw.index)
    config = pd.DataFrame([json.loads(c) for c in run["config"]], index=raw.index)
    config = config.rename(columns={c: f"trained_{c}" for c in at.columns})
    config = config.drop(columns=[c for c in config.columns if c in metrics.columns])
    return pd.concat([raw[["run_id"]], run[["seed", "lr"]], config, at, metrics], axis=1)
