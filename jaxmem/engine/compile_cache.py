"""JAX's persistent compilation cache, on by default for `jaxmem run`: a resumed or repeated sweep
loads its programs from disk instead of compiling them again.

Location: `$JAXMEM_CACHE_DIR`, else `$XDG_CACHE_HOME/jaxmem/xla`, else `~/.cache/jaxmem/xla`.
Opt out with `jaxmem run --no-compile-cache` or `JAXMEM_COMPILE_CACHE=0`. Entries are keyed by the
program, the JAX/XLA version, the compile options and the devices, so a stale entry is never used;
the folder grows with every new shape and can be deleted at any time.
"""

from __future__ import annotations

import os
from pathlib import Path

import jax

DIR_ENV = "JAXMEM_CACHE_DIR"
SWITCH_ENV = "JAXMEM_COMPILE_CACHE"


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
