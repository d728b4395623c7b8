"""Every shipped sweep (sweeps/, examples/, tests/specs/) with each of its presets, and with none, parses to the
spec recorded in tests/data/spec_snapshot.json: the resolved spec, the fingerprint (stored result folders
resume by it) and the typed views the other layers read (train, search, engine, report, success, points, ...).

A sweep whose file (or a file it extends) changed since the snapshot was taken is skipped, naming the command
that records it again: `python tests/test_spec_snapshot.py`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from jaxmem.spec.sweep import load, read_toml, stored_report_spec

ROOT = Path(__file__).resolve().parents[1]
SNAPSHOT = ROOT / "tests" / "data" / "spec_snapshot.json"
PATTERNS = ("sweeps/**/*.toml", "examples/*.toml", "tests/specs/*.toml")


def typed(value):
    """`value` as JSON that keeps its Python types apart: a dataclass as {"@": class, fields}, a tuple as a
    list, a list as {"list": [...]} (ints and floats stay apart in JSON text)."""
    if dataclasses.is_dataclass(value):
        return {"@": type(value).__name__, **{f.name: typed(getattr(value, f.name)) for f in dataclasses.fields(value)}}
    if isinstance(value, tuple):
        return [typed(v) for v in value]
    if isinstance(value, list):
        return {"list": [typed(v) for v in value]}
    if isinstance(value, dict):
        return {str(k): typed(v) for k, v in value.items()}
    return value


def canonical(value) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def digest(value) -> str:
    return hashlib.sha256(canonical(value).encode()).hexdigest()[:16]


def view(path: Path, preset: str) -> dict:
    """What a spec parses to, as typed JSON: its points by count, first point and digest (there are thousands)."""
    spec = load(path, preset)
    fields = {f.name: typed(getattr(spec, f.name)) for f in dataclasses.fields(spec) if f.name != "points"}
    fields["axes"] = sorted(spec.axes)  # (their order followed a set's, which changes from process to process)
    stored = stored_report_spec(spec.resolved)
    return {
        **fields,
        "fingerprint": spec.fingerprint,
        "points": {"count": len(spec.points), "first": typed(spec.points[:1]), "digest": digest(typed(spec.points))},
        "stored_report": "same" if stored == spec.report else typed(stored),
    }


def shipped() -> list[Path]:
    """The spec files git tracks under PATTERNS."""
    listed = subprocess.run(["git", "ls-files", *PATTERNS], cwd=ROOT, capture_output=True, text=True, check=True)
    return sorted(ROOT / line for line in listed.stdout.split())


def presets(path: Path) -> list[str]:
    table = read_toml(path).get("presets", {})
    return [""] + sorted(table)


def record() -> dict:
    return {
        str(path.relative_to(ROOT)): {
            "source": digest(read_toml(path)),
            "specs": {preset or "(none)": view(path, preset) for preset in presets(path)},
        }
        for path in shipped()
    }


def write(entries: dict) -> None:
    """One line per sweep, so a change shows as the lines of the sweeps it changed."""
    lines = [f"{json.dumps(name)}: {canonical(entry)}" for name, entry in entries.items()]
    SNAPSHOT.parent.mkdir(exist_ok=True)
    SNAPSHOT.write_text("{\n" + ",\n".join(lines) + "\n}\n")


RECORDED = json.loads(SNAPSHOT.read_text()) if SNAPSHOT.exists() else {}


@pytest.mark.parametrize("name", sorted(RECORDED))
def test_shipped_sweep_parses_as_recorded(name):
    path, entry = ROOT / name, RECORDED[name]
    if not path.exists() or digest(read_toml(path)) != entry["source"]:
        pytest.skip(f"{name} changed since the snapshot: record it again with `python {Path(__file__).name}`")
    for preset, expected in entry["specs"].items():
        got = view(path, "" if preset == "(none)" else preset)
        for key in expected:
            assert canonical(got[key]) == canonical(expected[key]), f"{name} [{preset}] {key}"
        assert set(got) == set(expected), f"{name} [{preset}]"


if __name__ == "__main__":
    write(record())
    print(f"wrote {SNAPSHOT} ({len(RECORDED)} sweeps before)", file=sys.stderr)
