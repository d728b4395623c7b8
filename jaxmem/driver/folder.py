"""An output folder bound to one sweep: its spec's fingerprint and the code of its experiment
(jaxmem.experiments.code_identity) are kept in the store's meta, and a run into a folder holding another
sweep, or results made by other experiment code, is refused before anything runs."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

from jaxmem.version import __version__
from jaxmem.experiments import code_identity
from jaxmem.experiments.registry import defining_module, module_folder
from jaxmem.persistence.progress import PLANNED, planned
from jaxmem.persistence.shards import SHARDS
from jaxmem.persistence.store import FILENAME, SESSION, Store, StoreError, companions, elapsed
from jaxmem.spec.sweep import SweepSpec

CODE, MODULE = code_identity.RECORD, code_identity.MODULE
RESTART_FLAG = "--restart"


def experiment_code(spec: SweepSpec) -> dict[str, str]:
    """The fingerprint of the code of `spec`'s experiment as it is now (see code_identity.of_experiment)."""
    return code_identity.of_experiment(defining_module(spec.experiment), module_folder(spec.experiment))


def claim(store: Store, spec: SweepSpec, noted: dict | None = None) -> None:
    """Bind an output folder to one sweep, refusing a folder holding another (naming the fields that
    differ), results of no known sweep (a store whose meta lost its fingerprint) or results made by other
    experiment code (naming the modules that changed), and open this run's session: the time of a run
    killed before it could add its own, up to the last time the store records, goes into `elapsed_s`
    first (see jaxmem.persistence.store.elapsed). `noted`: more meta entries the caller keeps with the
    sweep (the CLI: the command that started it). A folder whose results were stored before the code was
    recorded resumes; its code stays unrecorded (`jaxmem status` says so)."""
    meta = store.meta()
    resolved = json.dumps(spec.resolved, sort_keys=True, default=str)
    holds_results = bool(store.finished_runs() or store.finished_searches())
    held = holds_results or any(  # in-flight runs and a stopped multi-process job's shards count as results
        any(store.path.parent.glob(pattern)) for pattern in ("checkpoints/*", f"{SHARDS}/p*/{FILENAME}")
    )
    if "fingerprint" not in meta and holds_results:
        raise StoreError(
            f"results file {store.path} holds results but not the sweep they belong to (its meta table lost its "
            "fingerprint); restore it from a copy, or choose another --out"
        )
    if "fingerprint" in meta and meta["fingerprint"] != spec.fingerprint:
        changes = spec_changes(json.loads(meta.get("resolved_spec", "{}")), json.loads(resolved))
        raise StoreError(
            f"output folder {store.path.parent} holds a different sweep "
            f"({meta.get('spec', '?')}, preset {meta.get('preset', '?') or 'none'}{changes}); "
            "choose another --out or delete the folder"
        )
    code = experiment_code(spec)
    if held and CODE in meta:
        changed = code_identity.changed_modules(json.loads(meta[CODE]), code)
        if changed:
            raise StoreError(code_changed_error(store.path.parent, spec.experiment, changed))
    recorded = {CODE: json.dumps(code, sort_keys=True)} if CODE in meta or not held else {}
    total, now = elapsed(meta, store.last_write() or 0.0), time.time()
    store.set_meta(
        {
            "fingerprint": spec.fingerprint,
            "spec": spec.name,
            "preset": spec.preset,
            "experiment": spec.experiment,
            "experiment_folder": module_folder(spec.experiment),
            MODULE: defining_module(spec.experiment) or "",
            **recorded,
            "jaxmem_version": __version__,
            "resolved_spec": resolved,
            "elapsed_s": str(total),
            SESSION: {"started_at": now, "elapsed_s": total},
            PLANNED: planned(len(spec.points), len(spec.seeds), len(spec.train.learning_rates), bool(spec.search)),
            **(noted or {}),
        }
    )


def code_changed_error(out: Path, experiment: str, changed: list[str]) -> str:
    """Why a run into `out` is refused: the code of `experiment` (the modules `changed`) differs from the
    code its results were made with; and the two ways on."""
    return (
        f"output folder {out} holds results of experiment {experiment} made by other code: "
        f"{code_identity.describe_changes(changed)} changed since; its results would be mixed with the new "
        f"code's. Run into a new --out, or rerun with {RESTART_FLAG} to discard this folder's results and start over"
    )


def discard_results(out: Path) -> list[Path]:
    """Delete the results of the sweep in `out` (its store, checkpoints and shards; the caller holds the
    folder's lock); returns what was deleted."""
    doomed = [f for f in companions(out / FILENAME) if f.exists()]
    doomed += [d for d in (out / "checkpoints", out / SHARDS) if d.is_dir()]
    for path in doomed:
        shutil.rmtree(path) if path.is_dir() else path.unlink()
    return doomed


def spec_changes(old: dict, new: dict, shown: int = 3) -> str:
    """'; it differs in <path>: <old> → <new>, ...' for the dotted fields that differ between two
    resolved specs (the first `shown` of them, then how many more), or '' when none does."""
    before, after = _leaves(old), _leaves(new)
    paths = sorted(p for p in before.keys() | after.keys() if _shown(before, p) != _shown(after, p))
    if not paths:
        return ""
    listed = ", ".join(f"{p}: {_shown(before, p)} → {_shown(after, p)}" for p in paths[:shown])
    more = f" and {len(paths) - shown} more" if len(paths) > shown else ""
    return f"; it differs in {listed}{more}"


def _leaves(tree: dict, prefix: str = "") -> dict:
    """A nested dict's leaves (an empty dict is one) by dotted path."""
    found = {}
    for key, value in tree.items():
        path = f"{prefix}{key}"
        found.update(_leaves(value, f"{path}.") if isinstance(value, dict) and value else {path: value})
    return found


def _shown(leaves: dict, path: str, width: int = 40) -> str:
    """A leaf's value as JSON, cut to `width` characters; '(none)' where the spec has no such field."""
    text = json.dumps(leaves[path]) if path in leaves else "(none)"
    return text if len(text) <= width else text[: width - 3] + "..."
