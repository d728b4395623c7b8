"""A sweep's results in a compact form to commit (`jaxmem export DIR --to FOLDER`), and a results store rebuilt
from it (`jaxmem import FOLDER --out DIR`), which every reader then reads as it reads a store of its own run.

An export is a folder of one Parquet file per table of the store (runs, searches, trajectories, final_eval,
compiles, meta; zstd-compressed, without statistics or pandas metadata: a third of the bytes) and manifest.json:
the format, the sweep's spec and preset, its run time, and per file its table, its row count and its sha256.
Every table keeps the store's columns and values, but `trajectories`, whose rows dominate a sweep's size, is
kept wide: run_id, step and one column per metric, a float metric as float32 (where every finite value fits;
else float64), read back as the shortest decimal of its float32 (7 significant digits: far below any printed
number's precision).

Damage is detected, never used, as in the store: an import checks every file's sha256 and row count
against the manifest first and refuses, naming the file, one that differs or is missing.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from jaxmem.persistence.store import CHECKED, FILENAME, LATER, Store, StoreError

FORMAT = "jaxmem export 1"
SHIPPED = tuple(t for t in CHECKED if t not in LATER)  # the timeline is how a sweep ran, not what it found
MANIFEST = "manifest.json"
METRIC_KEYS = ("run_id", "step")  # the trajectories columns that are no metric
FLOAT32 = np.finfo(np.float32)
PARQUET = {"compression": "zstd", "compression_level": 19, "write_statistics": False}  # statistics: no use here
WIDE = {"use_dictionary": ["run_id"], "use_byte_stream_split": True}  # trajectories' floats: a quarter fewer bytes


class ExportError(StoreError):
    """An export that is damaged (a file whose sha256 or row count differs from its manifest's), incomplete,
    or of another format."""


def sha256_of(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def export_results(folder: str | Path, target: str | Path) -> dict:
    """Write the store of output folder `folder` (every row verified first) to `target` as Parquet files and
    their manifest; return the manifest."""
    store = Store(Path(folder), write=False)
    try:
        frames = {name: store.table(name) for name in SHIPPED}
    finally:
        store.close()
    target = Path(target)
    target.mkdir(parents=True, exist_ok=True)
    files = {}
    for name, frame in frames.items():
        path = target / f"{name}.parquet"
        if name == "trajectories":
            pq.write_table(wide_trajectories(frame), path, **PARQUET, **WIDE)
        else:
            table = pa.Table.from_pandas(frame, preserve_index=False).replace_schema_metadata(None)
            pq.write_table(table, path, **PARQUET)
        files[path.name] = {"table": name, "rows": len(frame), "sha256": sha256_of(path)}
    meta = frames["meta"].set_index("key")["value"].to_dict()
    manifest = {
        "format": FORMAT,
        "spec": meta.get("spec", ""),
        "preset": meta.get("preset", ""),
        "elapsed_s": round(float(meta.get("elapsed_s", 0.0)), 1),
        "files": files,
    }
    (target / MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    return manifest


def import_results(source: str | Path, out: str | Path) -> Path:
    """A results store in output folder `out` (which must hold none) holding the rows of export `source`,
    every file checked against its manifest first; return the store's path."""
    frames = verified_tables(Path(source))
    out = Path(out)
    if (out / FILENAME).exists():
        raise ExportError(f"{out} already holds a results file ({FILENAME}): import into an empty folder")
    out.mkdir(parents=True, exist_ok=True)
    store = Store(out)
    try:
        for name, frame in frames.items():
            store.add_rows(name, rows_of(frame, CHECKED[name]))
    finally:
        store.close()
    return out / FILENAME


def manifest_of(source: Path) -> dict:
    path = source / MANIFEST
    if not path.is_file():
        raise ExportError(f"{source} is no export: it has no {MANIFEST}")
    manifest = json.loads(path.read_text())
    if manifest.get("format") != FORMAT:
        raise ExportError(f"{path}: format {manifest.get('format')!r}, this jaxmem reads {FORMAT!r}")
    return manifest


def verified_tables(source: Path) -> dict[str, pd.DataFrame]:
    """Every table of an export, as the store's columns; ExportError naming a file that is missing, or whose
    sha256 or row count differs from the manifest's, or a table the manifest lacks."""
    files = manifest_of(source)["files"]
    missing = set(SHIPPED) - {entry["table"] for entry in files.values()}
    if missing:
        raise ExportError(f"{source / MANIFEST} lists no file of table {', '.join(sorted(missing))}")
    frames = {}
    for name, entry in files.items():
        path = source / name
        if not path.is_file():
            raise ExportError(f"export file {path} is missing")
        if sha256_of(path) != entry["sha256"]:
            raise ExportError(f"export file {path} is damaged: its sha256 differs from {MANIFEST}'s; restore it")
        table = pq.read_table(path)
        if table.num_rows != entry["rows"]:
            raise ExportError(f"export file {path} holds {table.num_rows} rows, {MANIFEST} says {entry['rows']}")
        is_trajectories = entry["table"] == "trajectories"
        frames[entry["table"]] = narrow_trajectories(table) if is_trajectories else table.to_pandas()
    return frames


def rows_of(frame: pd.DataFrame, columns: tuple[str, ...]) -> list[tuple]:
    """`frame`'s rows as tuples of `columns`, a missing value (NaN, None) as None, numpy scalars as Python's."""
    values = frame.reindex(columns=list(columns)).astype(object)
    values = values.where(values.notna(), None)
    return [tuple(v.item() if isinstance(v, np.generic) else v for v in row) for row in values.itertuples(index=False)]


def wide_trajectories(frame: pd.DataFrame) -> pa.Table:
    """The trajectories rows as run_id, step and one column per metric (metric_column);
    a metric a row lacks is null there."""
    metrics = [json.loads(m) for m in frame["metrics"]]
    keys = list(dict.fromkeys(key for row in metrics for key in row))
    columns = {
        "run_id": pa.array(frame["run_id"], pa.string()),
        "step": pa.array(frame["step"], pa.int64()),
    }
    columns.update({key: metric_column([row.get(key) for row in metrics]) for key in keys})
    return pa.table(columns)


def metric_column(values: list) -> pa.Array:
    """One metric's values (None where a row lacks it): yes/no as bool, whole numbers as int64, other numbers
    as float32 when float32 holds every finite one (else float64), anything else as JSON text."""
    present = [v for v in values if v is not None]
    if all(isinstance(v, bool) for v in present):
        return pa.array(values, pa.bool_())
    if all(isinstance(v, int) and not isinstance(v, bool) for v in present):
        return pa.array(values, pa.int64())
    if not all(isinstance(v, (int, float)) for v in present):
        return pa.array([None if v is None else json.dumps(v) for v in values], pa.string())
    finite = np.abs([float(v) for v in present if np.isfinite(v)] or [0.0])
    nonzero = finite[finite > 0]
    fits = finite.max() <= FLOAT32.max and (nonzero.size == 0 or nonzero.min() >= FLOAT32.tiny)
    return pa.array([None if v is None else float(v) for v in values], pa.float32() if fits else pa.float64())


def narrow_trajectories(table: pa.Table) -> pd.DataFrame:
    """The store's trajectories columns (run_id, step, metrics as JSON) from wide_trajectories' table."""
    keys = [name for name in table.column_names if name not in METRIC_KEYS]
    values = {key: metric_values(table.column(key)) for key in keys}
    metrics = [
        json.dumps({key: values[key][i] for key in keys if values[key][i] is not None}) for i in range(table.num_rows)
    ]
    columns = {"run_id": table.column("run_id").to_pylist(), "step": table.column("step").to_pylist()}
    return pd.DataFrame({**columns, "metrics": metrics})


def metric_values(column: pa.ChunkedArray) -> list:
    """A metric column's values as the store held them: float32 as the shortest decimal that reads back as
    it, JSON text parsed; a null as None."""
    if pa.types.is_string(column.type):
        return [None if v is None else json.loads(v) for v in column.to_pylist()]
    if column.type == pa.float32():
        valid = column.is_valid().to_numpy(zero_copy_only=False)
        decimals = column.to_numpy(zero_copy_only=False).astype(np.float32).astype(str)
        return [float(text) if ok else None for text, ok in zip(decimals, valid)]
    return column.to_pylist()
