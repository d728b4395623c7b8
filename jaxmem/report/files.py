"""Writing the report's files: tables as CSV (the stored tables as Parquet too, through pyarrow), and
report.md in one go, atomically."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd


def write_csv(frame: pd.DataFrame, path: Path) -> Path:
    """`frame` as CSV at `path`, without the index."""
    frame.to_csv(path, index=False)
    return path


def arrow_ready(frame: pd.DataFrame) -> pd.DataFrame:
    """`frame` as Arrow can hold it, one type per column, read back as from the CSV: an object column
    without values (e.g. `value` in a grid sweep) as floats (NaN), one mixing kinds of values (numbers
    and text, lists, ...) as their text."""
    out = frame.copy()
    for column in [c for c in out.columns if pd.api.types.is_object_dtype(out[c])]:
        kinds = {kind(v) for v in out[column].dropna()}
        if not kinds:
            out[column] = out[column].astype(float)
        elif len(kinds) > 1 or kinds & {list, dict, tuple}:
            out[column] = out[column].map(str).where(out[column].notna(), None)
    return out


def kind(value) -> type:
    """The kind of a cell for Arrow: every real number is one kind (float), anything else its type."""
    is_number = isinstance(value, (int, float, np.number)) and not isinstance(value, (bool, np.bool_))
    return float if is_number else type(value)


def write_table(frame: pd.DataFrame, out_dir: Path, name: str) -> list[Path]:
    """`frame` as <name>.csv and <name>.parquet in `out_dir`: the same rows and columns in both."""
    csv = write_csv(frame, Path(out_dir) / f"{name}.csv")
    parquet = Path(out_dir) / f"{name}.parquet"
    arrow_ready(frame).to_parquet(parquet, engine="pyarrow", index=False)
    return [csv, parquet]


def write_text(path: Path, text: str) -> Path:
    """Write `text` to `path` at once: a reader sees the old file or the whole new one, never a part."""
    path = Path(path)
    partial = path.with_name(f".{path.name}.{os.getpid()}.partial")
    try:
        partial.write_text(text)
        os.replace(partial, path)
    finally:
        partial.unlink(missing_ok=True)
    return path
