"""What the CLI shows: shipped sweeps, experiments, dry-run plans."""

from __future__ import annotations

import json
import os
from pathlib import Path

from jaxmem.cli import overrides
from jaxmem.cli.dry_run import NoStore as _NoStore  # noqa: F401 (the dry run's store, as tests import it)
from jaxmem.cli.dry_run import dry_run  # noqa: F401 (its view, as benchmarks import it)
from jaxmem.cli.paths import shipped_matches, shipped_name, shipped_sweeps
from jaxmem.cli.status import holds_results
from jaxmem.driver.folder import spec_changes
from jaxmem.experiments.registry import searching, shipped
from jaxmem.experiments.interface import REQUIRED
from jaxmem.spec.tables import suggest
from jaxmem.spec.sweep import SpecError, SweepSpec, is_file, parse, read_toml
from jaxmem.persistence.store import StoreError, load_results


def spec_path(name_or_path: str) -> Path:
    """A spec file's path, or a shipped sweep's (`fig1_mlp` or `nichani24/fig1_mlp`), with the closest
    shipped name suggested for a typo."""
    path = Path(name_or_path)
    if is_file(path):
        return path
    matches = shipped_matches(name_or_path)
    if len(matches) == 1:
        return matches[0]
    sweeps = shipped_sweeps()
    names = list(sweeps) + sorted({n.split("/")[-1] for n in sweeps})
    close = suggest(name_or_path, names)
    hint = close or ("; shipped sweeps: " + ", ".join(sweeps) if sweeps else "")
    raise SpecError(name_or_path, [f"no such spec file or shipped sweep{hint}; `jaxmem list` shows them"])


def origin(name_or_path: str, changes: list[str] = ()) -> dict:
    """How `jaxmem run` was given a sweep, as `jaxmem status` suggests rerunning it from any folder: a
    shipped sweep's full name or the spec file's absolute path, and the `--set` overrides."""
    path = spec_path(name_or_path)
    return {"spec": shipped_name(path) or str(path.resolve()), "set": list(changes)}


def load_spec(name_or_path: str, preset: str | None, changes: list[str] = ()) -> SweepSpec:
    """Load a spec from a path or a shipped sweep's name, with `--set` overrides applied to its raw
    values before they are validated. An experiment named `module:ATTRIBUTE` is also looked up in the
    spec's own folder."""
    path = spec_path(name_or_path)
    raw = overrides.apply(read_toml(path), list(changes))
    source = str(path) + (f" with --set {' '.join(changes)}" if changes else "")
    with searching(path.parent):
        return parse(raw, name=path.stem, preset=preset, source=source)


def sweep_summary(path: Path) -> tuple[str, list[str]]:
    """A shipped sweep's one-line description and its presets ('' and [] where it cannot be read)."""
    try:
        raw = read_toml(path)
    except SpecError:
        return "", []
    lines = str(raw.get("description", "")).strip().splitlines()
    presets = raw.get("presets", {})
    return (lines[0] if lines else ""), (sorted(presets) if isinstance(presets, dict) else [])


def listing() -> str:
    lines = [
        "experiments (field kinds: size = padded to its bucket, static = one program per value, "
        "traced = read at run time, host = never in the program):"
    ]
    for exp in shipped().values():
        lines.append(f"  {exp.name}: {exp.doc}")
        for name, field in exp.fields.items():
            extra = f" one of {list(field.choices)}" if field.choices else ""
            default = "" if field.default is REQUIRED else f" (default {field.default!r})"
            lines.append(f"      {name} [{field.type.__name__}, {field.kind}]{default}: {field.doc}{extra}")
        lines.append(f"      metrics (each run's evaluations; final_<name> in runs.csv): {', '.join(exp.metrics)}")
    lines.append("shipped sweeps, with their presets (jaxmem run NAME [--preset P]; the default is quick):")
    for name, path in shipped_sweeps().items():
        description, presets = sweep_summary(path)
        lines.append(f"  {name}  [{', '.join(presets) or 'no presets'}]  {description}".rstrip())
    return "\n".join(lines)


def edited_report_table(name_or_path: str, preset: str | None, out: Path) -> dict:
    """The `[report]` table of a spec file (with `preset`, by default the folder's own) for re-rendering
    the report of the sweep in `out`; SpecError when the file describes another sweep (anything that
    changes results differs: only [report], [engine] layout and the description may)."""
    spec, changes = spec_against_store(name_or_path, preset, out)
    if changes is not None:
        raise SpecError(
            name_or_path, [f"describes another sweep than {out} ({changes}); --spec may change the [report] table only"]
        )
    return spec.resolved.get("report", {})


def spec_against_store(name_or_path: str, preset: str | None, out: Path) -> tuple[SweepSpec, str | None]:
    """The spec file (with `preset`, by default the folder's own) and, where it describes another sweep than
    the store in `out` (another fingerprint), the store's spec, preset and what differs, in words; else None."""
    meta = load_results(out, "meta").set_index("key")["value"].to_dict()
    stored, stored_spec = meta.get("preset") or None, json.loads(meta.get("resolved_spec", "{}"))
    spec = load_spec(name_or_path, preset if preset is not None else stored)
    if meta.get("fingerprint") == spec.fingerprint:
        return spec, None
    results = [{k: v for k, v in r.items() if k not in ("report", "description")} for r in (stored_spec, spec.resolved)]
    return spec, f"{meta.get('spec', '?')}, preset {stored or 'none'}{spec_changes(*results)}"


def existing_output(out: Path) -> Path:
    """An output folder holding results that `jaxmem report` can write its files into."""
    if not os.access(holds_results(out), os.W_OK):
        raise StoreError(
            f"cannot write the report into {out}: the folder is not writable; copy it to a writable folder and "
            "run `jaxmem report` there"
        )
    return out
