"""One intra-op thread for JAX's CPU backend on jaxlib < 0.11, where more can deadlock a program.

jaxlib 0.10 runs a batched LAPACK call (QR, eigh, SVD, LU, Cholesky, solve, ...) by splitting the batch
over XLA's CPU intra-op thread pool and blocking until the parts are done. The call itself runs on a
thread of that pool, and XLA runs independent operations of a program at the same time: once as many
batched LAPACK calls run at once as the pool has threads (two on a 2-core machine), every thread waits
for parts that no free thread is left to run, and the program never returns, at 0 % CPU. jaxmem's
teachers draw Haar frames by QR (`experiments.draws.haar`), so `sweeps/chen_li24/e1_phase1_bias.toml`
at d = 64 hung this way on every try. jaxlib 0.11 compiles that path out of its public builds.

On jaxlib < 0.11 jaxmem therefore asks for a pool of one thread (`PJRT_NPROC=1`, which XLA reads when
JAX creates its CPU backend), unless the environment already sets `PJRT_NPROC` or `NPROC`, or sets
`JAXMEM_CPU_THREADS` (a thread count, `0` for XLA's default). One thread does not cost jaxmem's CPU
sweeps time: their programs are many small vmapped operations, and the compile thread gets the other
core (`benchmarks/RESULTS_cpu_threads.md`). Accelerator backends are not affected.
"""

from __future__ import annotations

import importlib.metadata
import os

THREADS_ENV = "JAXMEM_CPU_THREADS"
POOL_ENVS = ("PJRT_NPROC", "NPROC")  # what XLA's CPU client reads for its intra-op pool size
FIXED_IN = (0, 11)  # the first jaxlib whose public builds run batched LAPACK calls in the calling thread


def jaxlib_version() -> tuple[int, int] | None:
    """jaxlib's (major, minor), read from its package metadata (JAX is not imported); None if unknown."""
    try:
        major, minor, *_ = importlib.metadata.version("jaxlib").split(".")
        return int(major), int(minor)
    except (importlib.metadata.PackageNotFoundError, ValueError):
        return None


def pool_threads(environ, version: tuple[int, int] | None) -> str | None:
    """The intra-op pool size to ask XLA for (as PJRT_NPROC's text) under jaxlib `version`, or None to
    leave XLA's default."""
    if any(environ.get(name) for name in POOL_ENVS):
        return None
    chosen = environ.get(THREADS_ENV, "").strip()
    if chosen:
        if not chosen.isdigit():
            raise ValueError(f"{THREADS_ENV} must be a thread count (0 for XLA's default), got {chosen!r}")
        return None if int(chosen) == 0 else chosen
    return "1" if version is not None and version < FIXED_IN else None


def configure(environ=os.environ) -> str | None:
    """Set the pool size in `environ` before JAX creates its CPU backend; returns what was set."""
    threads = pool_threads(environ, jaxlib_version())
    if threads is not None:
        environ["PJRT_NPROC"] = threads
    return threads
