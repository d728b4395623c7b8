"""`jaxmem status DIR`: whether the sweep in an output folder is finished, interrupted or running, with
its counts. Reads the store read-only, checking every row of every table (5 ms for a quick preset's
trajectories, 1.1 s for a million rows), and never imports JAX, so it answers in about a second."""

from __future__ import annotations

import json
import shlex
import time
from datetime import datetime
from pathlib import Path

import pandas as pd

from jaxmem.cli.paths import shipped_matches
from jaxmem.experiments import code_identity
from jaxmem.persistence.lock import UNUSABLE, lock_path, lock_state, read_lease
from jaxmem.persistence.progress import Found, finished, inflight, stored_progress
from jaxmem.persistence.shards import shard_dirs
from jaxmem.persistence.store import COMPILE_CACHE, FILENAME, Store, elapsed, full, no_space
from jaxmem.persistence.timeline import budget_of, summary

CODE_CHANGED_ADVICE = "`jaxmem run` refuses to resume it: run into a new --out, or rerun with --restart"
ORIGIN = "origin"  # meta key: how `jaxmem run` was given the sweep (jaxmem.cli.views.origin), kept as it claims it


def holds_results(out: Path) -> Path:
    """`out`, if it holds a results file."""
    if not (out / FILENAME).is_file():
        raise FileNotFoundError(f"{out} holds no jaxmem results ({FILENAME} is missing)")
    return out


def state(lock: str, found: Found, done: bool) -> str:
    """'running: <holder>', 'finished', 'not started' or 'interrupted' (with a stale lease named)."""
    if lock.startswith("running"):
        return lock
    if done:
        return "finished"
    stale = f" ({lock})" if lock.startswith("stale") else ""
    return ("interrupted" if found.started else "not started") + stale


def resume_command(meta: dict[str, str], out: Path) -> str:
    """The `jaxmem run` command that resumes the sweep in `out`: its spec as the run that started it was
    given it (ORIGIN: a shipped sweep's name or an absolute path), with its preset and --set overrides.
    A store older than that record names a shipped sweep by its name if one has it, else the spec file.
    The folder is absolute: a relative one would point elsewhere from another folder."""
    recorded = json.loads(meta.get(ORIGIN, "null"))
    if recorded is None:
        name = meta.get("spec", "?")
        recorded = {"spec": name if len(shipped_matches(name)) == 1 else f"PATH/TO/{name}.toml", "set": []}
    preset = meta.get("preset") or ""
    words = ["jaxmem", "run", recorded["spec"], *(["--preset", preset] if preset else [])]
    words += [word for change in recorded["set"] for word in ("--set", change)]
    return shlex.join([*words, "--out", str(out.absolute())])


def iso(stamp: float | None) -> str:
    return datetime.fromtimestamp(stamp).isoformat(timespec="seconds") if stamp else "never"


def stored(out: Path) -> tuple[dict, dict, set[str], pd.DataFrame, pd.DataFrame, float | None]:
    """The folder's meta, and the finished runs, searches, compiles, timeline and newest write of its store and of
    the shards a stopped multi-process job left (the next run merges them)."""
    metas, runs, searches, compiles, writes = [], {}, set(), [], []
    timelines = []
    for directory in [out, *shard_dirs(out)]:
        store = Store(directory, write=False)
        try:
            metas.append(store.meta())
            runs.update(store.finished_runs())
            searches |= store.finished_searches()
            compiles.append(store.table("compiles"))
            timelines.append(store.table("timeline"))
            writes.append(store.last_write() or 0.0)
        finally:
            store.close()
    compiles = pd.concat(compiles).drop_duplicates()
    return metas[0], runs, searches, compiles, pd.concat(timelines).drop_duplicates(), max(writes) or None


def cache_text(meta: dict[str, str]) -> str:
    """How many compiles the persistent compilation cache served, and where it is (or that it was off), as the
    latest run recorded it; "" for a store older than that record."""
    if COMPILE_CACHE not in meta:
        return ""
    cache = json.loads(meta[COMPILE_CACHE])
    if cache["dir"] is None:
        return "; persistent compile cache off"
    return f"; {cache['loaded']} loaded from the persistent compile cache ({cache['dir']})"


def status(out: Path) -> str:
    """Progress of the sweep in `out`, read without writing anything (the folder may be read-only, its disk
    full: then a warning says so)."""
    meta, runs, searches, compiles, timeline, last_write = stored(holds_results(out))
    held, held_buckets = map(sum, zip(*(inflight(d / "checkpoints", runs) for d in [out, *shard_dirs(out)])))
    found = stored_progress(meta, len(runs), len(searches), held, held_buckets)
    lock, done = lock_state(out), finished(found, out)
    lease = read_lease(lock_path(out))
    end = time.time() if lock.startswith("running") else max(last_write or 0.0, lease.heartbeat if lease else 0.0)
    successes = sum(s for s, _ in runs.values())
    diverged = sum(d for _, d in runs.values())
    name, preset = meta.get("spec", "?"), meta.get("preset") or ""
    lines = [
        f"sweep {name} [{preset or 'base'}] in {out}: {state(lock, found, done)}",
        f"{found.done()} ({successes} runs successful, {diverged} diverged)",
        f"compiles: {len(compiles)} ({compiles['seconds'].sum() if len(compiles) else 0:.1f} s{cache_text(meta)}); "
        f"elapsed: {elapsed(meta, end):.1f} s; last result: {iso(last_write)}",
    ]
    if logical := summary(timeline, compiles, budget_of(meta)):
        lines.append(logical.describe())
    if not lock.startswith("running") and not done and (found.started or held):
        lines.append(f"{found.inflight_text()}; resume with `{resume_command(meta, out)}`")
    elif held:
        lines.append(found.inflight_text())
    code, _ = code_identity.compared(meta)
    if code == code_identity.CHANGED:
        lines.append(f"warning: experiment code {code_identity.state(meta)}; {CODE_CHANGED_ADVICE}")
    elif code != code_identity.UNCHANGED and (runs or searches):
        lines.append(f"experiment code: {code_identity.state(meta)}")
    if lock.startswith(UNUSABLE):  # a FIFO, a directory, a link: status answers, a run is refused
        lines.append(f"warning: {lock.removeprefix(UNUSABLE + ': ')}")
    if full(out, None):  # read-only, status still answers; what writes there will not
        lines.append(f"warning: {no_space(out, 'a run or report there stops at its first write (exit 4)')}")
    return "\n".join(lines)
