"""JAX's persistent compilation cache, on by default for `jaxmem run`: a resumed or repeated sweep
loads its programs from disk instead of compiling them again.

Location: `$JAXMEM_CACHE_DIR`, else `$XDG_CACHE_HOME/jaxmem/xla`, else `~/.cache/jaxmem/xla`.
Opt out with `jaxmem run --no-compile-cache` or `JAXMEM_COMPILE_CACHE=0`. Entries are keyed by the
program, the JAX/XLA version, the compile options and the devices, so a stale entry is never used;
the folder grows with every new shape and can be deleted at any time. `loads()` counts the programs a
thread has loaded from the cache (JAX's cache-hit event), so that a sweep can say how many of its compiles
were loads (`jaxmem status`).
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

import jax
import jax.monitoring

DIR_ENV = "JAXMEM_CACHE_DIR"
SWITCH_ENV = "JAXMEM_COMPILE_CACHE"
HIT_EVENT = "/jax/compilation_cache/cache_hits"  # recorded by JAX in the thread whose compile the cache served
_loads = threading.local()


def _count_load(event: str, **_) -> None:
    if event == HIT_EVENT:
        _loads.count = loads() + 1


jax.monitoring.register_event_listener(_count_load)


def loads() -> int:
    """Programs this thread has loaded from the persistent cache instead of compiling them."""
    return getattr(_loads, "count", 0)


def directory() -> str | None:
    """The persistent cache's folder in use by this process (None: off)."""
    return jax.config.jax_compilation_cache_dir


def cache_dir(environ=os.environ) -> Path | None:
    """Where compiled programs are cached, or None when the cache is switched off by the environment."""
    if environ.get(SWITCH_ENV, "1").strip().lower() in ("0", "false", "no", "off"):
        return None
    if environ.get(DIR_ENV):
        return Path(environ[DIR_ENV]).expanduser()
    base = Path(environ["XDG_CACHE_HOME"]) if environ.get("XDG_CACHE_HOME") else Path.home() / ".cache"
    return base / "jaxmem" / "xla"


def enable(directory: Path) -> None:
    """Cache every compiled program in `directory`. JAX's default skips programs that compile in
    under a second, which is most of a CPU sweep's buckets; jaxmem caches them all. Call it before
    the first compile: JAX decides once per process whether the cache is used."""
    directory.mkdir(parents=True, exist_ok=True)
    jax.config.update("jax_compilation_cache_dir", str(directory))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
