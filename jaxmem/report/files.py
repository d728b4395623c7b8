"""Writing the report's files: tables as CSV (the stored tables as Parquet too, through pyarrow), plots
and report.md, each atomically: written to a temporary file in the same folder, then moved over the old one
(a reader sees the old file or the whole new one, and a failed write, e.g. on a full disk, leaves the
old one as it was). Within `staged()` the files wait under their temporary names and are moved into place
together by `commit`, under the folder's report lock (`committing`): a report is all of one state of the store.
"""

from __future__ import annotations

import contextlib
import contextvars
import errno
import fcntl
import itertools
import os
from pathlib import Path

import numpy as np
import pandas as pd

from jaxmem.persistence.store import NO_SPACE, no_space

REPORT_LOCK = ".report.lock"  # flocked while a report's files are moved into place (see committing)
_STAGE: contextvars.ContextVar[list | None] = contextvars.ContextVar("jaxmem_report_stage", default=None)
_SERIAL = itertools.count()  # temporary names unique within a process (two reports of one folder may overlap)


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
    partial = path.with_name(f".{path.name}.{os.getpid()}.{next(_SERIAL)}.partial")
    stage = _STAGE.get()
    try:
        yield partial
        if stage is None:
            os.replace(partial, path)
        else:
            stage.append((partial, path))
    except OSError as err:
        if err.errno in NO_SPACE:
            raise no_space(path.parent, f"{path.name} was not written (any earlier one is kept)") from None
        raise
    finally:
        if stage is None or (partial, path) not in stage:
            partial.unlink(missing_ok=True)


@contextlib.contextmanager
def staged():
    """A block whose files written through `replacing` wait, whole, under their temporary names until
    `commit(stage)` moves them into place; those not committed are removed as it ends."""
    stage: list[tuple[Path, Path]] = []
    token = _STAGE.set(stage)
    try:
        yield stage
    finally:
        _STAGE.reset(token)
        for partial, _ in stage:
            partial.unlink(missing_ok=True)


FIGURES = (  # every figure a report draws, in the order a gallery picks its first (sweeps/readme_numbers.py)
    "capacity.png",
    "heatmap.png",
    "trajectory.png",
    "final_eval.png",
    "relations.png",
    "escape.png",
    "success_map.png",
    "instance.png",
)


def commit(stage: list[tuple[Path, Path]], out_dir: Path | None = None) -> None:
    """Move a stage's files into place, in the order they were written (report.md last); with `out_dir`,
    remove the figures of an earlier report that this one no longer draws (a check taken out of the spec)."""
    drawn = {target.name for _, target in stage}
    while stage:
        os.replace(*stage.pop(0))
    for name in FIGURES if out_dir is not None else ():
        if name not in drawn:
            (Path(out_dir) / name).unlink(missing_ok=True)


@contextlib.contextmanager
def committing(out_dir: Path):
    """The folder's report lock (an flock on REPORT_LOCK), held while a report checks what it rendered and
    commits it: two reports of one folder (a `jaxmem report` and the sweep's own final one) commit in turn."""
    fd = os.open(Path(out_dir) / REPORT_LOCK, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)
