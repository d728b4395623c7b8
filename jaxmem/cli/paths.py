"""Paths named on the command line, checked without JAX: output folders, and the shipped sweeps a
spec argument may name."""

from __future__ import annotations

import os
from pathlib import Path

from jaxmem.cli.errors import UsageError

PACKAGED_SWEEPS = Path(__file__).resolve().parents[2] / "sweeps"  # the repository's, beside the package
NAME_MAX = 255  # bytes in one file name on ext4, xfs, btrfs, tmpfs, NFS and APFS


def shipped_sweeps() -> dict[str, Path]:
    """Sweep name (e.g. nichani24/fig1_mlp) -> file, from ./sweeps and the repository's sweeps/."""
    found = {}
    for root in (Path.cwd() / "sweeps", PACKAGED_SWEEPS):
        if root.is_dir():
            for path in sorted(root.rglob("*.toml")):
                found.setdefault(path.relative_to(root).with_suffix("").as_posix(), path)
    return found


def shipped_matches(name: str) -> list[Path]:
    """The shipped sweeps `name` names: in full (`nichani24/fig1_mlp`) or by its last part (`fig1_mlp`)."""
    return [p for n, p in shipped_sweeps().items() if n == name or n.split("/")[-1] == name]


def shipped_name(path: Path) -> str | None:
    """The name of a spec file of the repository's sweeps/ (`nichani24/fig1_mlp`), else None."""
    try:
        return path.resolve().relative_to(PACKAGED_SWEEPS).with_suffix("").as_posix()
    except ValueError:
        return None


def checked_folder(text: str, what: str = "output folder") -> Path:
    """The folder `text` names, if it can be an output folder; else UsageError naming the problem: an
    empty name, a name longer than file systems allow, or a file where the folder (or one above it) is."""
    if not text.strip():
        raise UsageError(f"{what}: the name is empty; give a folder")
    path = Path(text)
    long = next((part for part in path.parts if len(os.fsencode(part)) > NAME_MAX), None)
    if long is not None:
        raise UsageError(
            f"{what} {text}: a name in it is {len(os.fsencode(long))} bytes long, more than file systems allow "
            f"({NAME_MAX}); choose a shorter one"
        )
    try:
        existing = next((p for p in (path, *path.parents) if p.exists()), None)
    except OSError as err:  # e.g. a path longer than the system allows
        raise UsageError(f"{what} {text}: {err.strerror}") from None
    if existing is not None and not existing.is_dir():
        raise UsageError(f"{what} {text}: {existing} is a file, not a folder")
    return path
