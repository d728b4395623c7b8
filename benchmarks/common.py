"""What every benchmark script shares: logging, the machine's description, a contention check, timers
wrapped around engine methods, one timed `run_sweep`, and Markdown tables.

The baselines themselves (per-run jitted programs, per-step Python loops) are in `baselines.py`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import gc
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

import jax
import pandas as pd

import jaxmem.driver.sweep as driver
from jaxmem.engine.device_memory import host_cpu_model
from jaxmem.engine.executor import BucketRunner
from jaxmem.persistence.store import Store, load_results


def log(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def cold_compiles() -> None:
    """Compile every program for real: JAX's persistent compilation cache (which `jaxmem run` turns on)
    would turn a measured compile into a disk read."""
    jax.config.update("jax_enable_compilation_cache", False)


# -- the machine -----------------------------------------------------------------------------------------
def machine() -> dict:
    """CPU model, cores, memory, library versions, device and date, as rows of a Markdown table."""
    import jaxlib

    dev = jax.devices()[0]
    return {
        "cpu": host_cpu_model(),
        "cores": os.cpu_count(),
        "usable cores": len(os.sched_getaffinity(0)),
        "memory": f"{os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / 2**30:.1f} GiB",
        "jax / jaxlib": f"{jax.__version__} / {jaxlib.__version__}",
        "python": platform.python_version(),
        "device": f"{dev.platform} x{len(jax.devices())} ({dev.device_kind})",
        "date": datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z"),
    }


def cpu_busy() -> float:
    """Seconds of CPU time the whole machine has spent busy (all processes, all cores) since boot."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:9]]
    return (sum(v) - v[3] - v[4]) / os.sysconf("SC_CLK_TCK")


class CpuShare:
    """CPU time used by OTHER processes during a phase, as a share of all cores (a contention check):
    `share` near 0 means the phase's timings are uncontended. `mine_s` = this process's CPU seconds.
    Entering also frees what earlier phases left behind (garbage, JAX's caches of traced and compiled
    functions), so that phases measured one after another in one process start alike."""

    @staticmethod
    def _mine() -> float:
        t = os.times()
        return t.user + t.system

    def __enter__(self):
        jax.clear_caches()
        gc.collect()
        self.start, self.busy, self.mine = time.perf_counter(), cpu_busy(), self._mine()
        return self

    def __exit__(self, *exc):
        wall = time.perf_counter() - self.start
        self.mine_s = self._mine() - self.mine
        others = (cpu_busy() - self.busy) - self.mine_s
        self.share = max(others, 0.0) / (max(wall, 1e-9) * os.cpu_count())


def host_memory() -> dict[str, int]:
    """This process's resident set now (VmRSS) and at its peak so far (VmHWM), in bytes (Linux)."""
    out = {}
    with open("/proc/self/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                out[key] = int(value.split()[0]) * 1024
    return out


# -- timing the engine -------------------------------------------------------------------------------------
@contextlib.contextmanager
def patched(owner, name: str, wrap):
    """Replace `owner.name` by `wrap(original)` for the duration of the block (skipped if it is gone)."""
    original = getattr(owner, name, None)
    if original is None:
        yield
        return
    setattr(owner, name, wrap(original))
    try:
        yield
    finally:
        setattr(owner, name, original)


def timer(seconds: dict, label: str):
    """A `patched` wrapper: the wall time of every call accumulates in `seconds[label]`."""

    def wrap(original):
        def timed(*args, **kwargs):
            t = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                seconds[label] = seconds.get(label, 0.0) + time.perf_counter() - t

        return timed

    return wrap


@contextlib.contextmanager
def timed_methods(seconds: dict, targets):
    """Time `owner.name` for each (owner, name, label) of `targets` into `seconds[label]` (see `timer`);
    methods the engine no longer has are skipped. Nothing else is changed."""
    with contextlib.ExitStack() as stack:
        for owner, name, label in targets:
            stack.enter_context(patched(owner, name, timer(seconds, label)))
        yield seconds


# The engine's host-side phases worth timing apart (owner, method, label), for `run_engine(parts=...)`.
ENGINE_PARTS = (
    (BucketRunner, "step", "segments (program + device_get + slot bookkeeping)"),
    (BucketRunner, "checkpoint", "checkpoints"),
    (BucketRunner, "close", "closing runners"),
    (Store, "add_runs", "store writes"),
)
SEGMENTS = ENGINE_PARTS[0][2]


@dataclasses.dataclass
class EngineRun:
    """One timed `run_sweep`: `total_s` excludes the report written at its end (`report_s`)."""

    total_s: float
    run_sweep_s: float
    report_s: float
    compile_s: float
    compiles: pd.DataFrame  # the store's compiles table: one row per bucket program
    runs: pd.DataFrame  # the store's runs table
    parts: dict  # seconds of the engine methods timed with `timed_methods`
    peak_before_report: int  # this process's peak host memory (VmHWM) before the report was written

    @property
    def run_s(self) -> float:
        return self.total_s - self.compile_s


def run_engine(spec, out_dir: Path | None = None, parts=ENGINE_PARTS) -> EngineRun:
    """`jaxmem.driver.sweep.run_sweep(spec)` into `out_dir` (a temporary folder if None), timed; `parts` are
    (owner, name, label) engine methods to time as well (see `timed_methods`)."""
    seconds, memory = {}, {}

    def peak_first(report):  # the report's plotting libraries would add their own memory
        def wrapped(out):
            memory["peak"] = host_memory()["VmHWM"]
            return report(out)

        return wrapped

    with contextlib.ExitStack() as stack:
        out = Path(out_dir) if out_dir else Path(stack.enter_context(tempfile.TemporaryDirectory())) / "out"
        stack.enter_context(patched(driver, "report", peak_first))
        stack.enter_context(timed_methods(seconds, [(driver, "report", "report"), *parts]))
        start = time.perf_counter()
        driver.run_sweep(spec, out, quiet=True)
        run_sweep_s = time.perf_counter() - start
        compiles, runs = load_results(out, "compiles"), load_results(out)
    report_s = seconds.pop("report", 0.0)
    return EngineRun(
        total_s=run_sweep_s - report_s,
        run_sweep_s=run_sweep_s,
        report_s=report_s,
        compile_s=float(compiles["seconds"].sum()),
        compiles=compiles,
        runs=runs,
        parts=seconds,
        peak_before_report=memory.get("peak", 0),
    )


# -- Markdown --------------------------------------------------------------------------------------------
def md_table(columns: list[str], rows: list[list]) -> list[str]:
    """A Markdown table; a column whose name ends in ':' (the colon is dropped) is right-aligned."""
    head = [c.rstrip(":") for c in columns]
    align = ["---:" if c.endswith(":") else "---" for c in columns]
    lines = ["| " + " | ".join(head) + " |", "| " + " | ".join(align) + " |"]
    lines += ["| " + " | ".join(str(x) for x in row) + " |" for row in rows]
    return lines + [""]
