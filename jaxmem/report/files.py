"""Writing the report's files: tables as CSV (the stored tables as Parquet too, through pyarrow), plots
and report.md, each atomically: written to a temporary file in the same folder, then moved over the old one
(a reader sees the old file or the whole new one, and a failed write, e.g. on a full disk, leaves the
old one as it was)."""

from __future__ import annotations

import contextlib
import errno
import os
from pathlib import Path

import numpy as np
import pandas as pd

from jaxmem.persistence.store import NO_SPACE, no_space


def write_csv(frame: pd.DataFrame, path: Path) -> Path:
    """`frame` as CSV at `path`, without the index."""
    with replacing(path) as partial:
        frame.to_csv(partial, index=False)
    return Path(path)


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
    with replacing(parquet) as partial:
        arrow_ready(frame).to_parquet(partial, engine="pyarrow", index=False)
    return [csv, parquet]


def save_figure(fig, path: Path, **options) -> Path:
    """A matplotlib figure saved to `path` at once (its format from the suffix)."""
    path = Path(path)
    with replacing(path) as partial:
        fig.savefig(partial, format=path.suffix.lstrip(".") or "png", **options)
    return path


def write_text(path: Path, text: str) -> Path:
    """Write `text` to `path` at once."""
    with replacing(path) as partial:
        partial.write_text(text)
    return Path(path)


@contextlib.contextmanager
def replacing(path: Path):
    """A temporary path beside `path` to write its new content to, moved over `path` once written
    whole, and removed if writing fails. A `path` this process may not write is refused (PermissionError
    naming it); a full disk raises StoreError naming the folder and its free space."""
    path = Path(path)
    if path.exists() and not os.access(path, os.W_OK):
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(path))
    partial = path.with_name(f".{path.name}.{os.getpid()}.partial")
    try:
        yield partial
        os.replace(partial, path)
    except OSError as err:
        if err.errno in NO_SPACE:
            raise no_space(path.parent, f"{path.name} was not written (any earlier one is kept)") from None
        raise
    finally:
        partial.unlink(missing_ok=True)
