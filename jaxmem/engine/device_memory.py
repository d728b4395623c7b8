"""Device memory: how much a bucket's program may use, how much it needs, and out-of-memory errors.

A program's need is XLA's memory analysis of the compiled program (per device: arguments, outputs
not aliased to donated arguments, temporaries and code). The budget is a cap on the device's
memory: a fraction of it (default 0.8) or a size, from `jaxmem run --memory-cap` or
`JAXMEM_MEMORY_CAP`. The device's memory is the XLA allocator's limit on GPU and TPU, and the
host's RAM (or the container's limit, if lower) on CPU.
"""

from __future__ import annotations

import os
import platform
import re
from pathlib import Path

import jax

from jaxmem.plan.target import Target

CAP_ENV = "JAXMEM_MEMORY_CAP"
DEFAULT_CAP = 0.8
_UNITS = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12}
_UNITS.update({"kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40})


class OutOfMemory(RuntimeError):
    """A bucket's program does not fit in device memory even with one run per device."""


def parse_cap(text: str) -> float | int:
    """A memory cap: a fraction of the device's memory ("0.8", in (0, 1]) or a size ("12GiB", "500MB",
    "2e9" bytes; at least 1 MiB)."""
    match = re.fullmatch(r"\s*([0-9.]+(?:e[0-9]+)?)\s*([kmgt]i?b|b)?\s*", text.lower())
    if match:
        value, unit = float(match[1]), match[2] or ""
        if not unit and 0 < value <= 1:
            return value
        if value * _UNITS[unit] >= 2**20:
            return int(value * _UNITS[unit])
    raise ValueError(f"memory cap must be a fraction in (0, 1] or a size of 1MiB or more (12GiB, 500MB), got {text!r}")


def host_memory() -> int:
    """The host's RAM in bytes, or the cgroup (container) limit when that is lower."""
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    for limit in (Path("/sys/fs/cgroup/memory.max"), Path("/sys/fs/cgroup/memory/memory.limit_in_bytes")):
        try:
            total = min(total, int(limit.read_text().strip()))
        except (OSError, ValueError):  # absent, or "max"
            continue
    return total


def device_memory(device) -> int:
    """Bytes one device can hold: the allocator's limit on GPU/TPU, the host's memory on CPU."""
    stats = device.memory_stats() or {}
    return int(stats.get("bytes_limit") or host_memory())


def host_cpu_model() -> str:
    """The host's processor model as the OS names it ("Intel(R) Xeon(R) Processor", "AMD EPYC ...")."""
    try:
        with open("/proc/cpuinfo") as info:
            return next(line.split(":", 1)[1].strip() for line in info if line.startswith("model name"))
    except (OSError, StopIteration):
        return platform.processor() or platform.machine()


def budget(memory_bytes: int, cap: float | int) -> int:
    """The bytes a program may use per device of `memory_bytes` under `cap` (a fraction of the device's
    memory, or bytes)."""
    return int(cap * memory_bytes) if isinstance(cap, float) else int(cap)


def target_of(devices) -> Target:
    """The planner's view of `devices` (one kind): platform, count, kind and memory per device (a CPU's
    cores and processor model too)."""
    first = devices[0]
    cpu = first.platform == "cpu"
    cores, model = (len(os.sched_getaffinity(0)), host_cpu_model()) if cpu else (1, "")
    return Target(first.platform, len(devices), first.device_kind, device_memory(first), cores, model)


def peak_bytes(compiled) -> int:
    """Memory per device of a compiled program, from XLA's memory analysis: arguments, outputs not
    aliased to donated arguments, temporaries and code (0 if the backend gives no analysis). XLA's own
    peak estimate leaves out the temporaries on CPU, so it is not used."""
    analysis = compiled.memory_analysis()
    if analysis is None:
        return 0
    return int(
        analysis.argument_size_in_bytes
        + analysis.output_size_in_bytes
        - analysis.alias_size_in_bytes
        + analysis.temp_size_in_bytes
        + analysis.generated_code_size_in_bytes
    )


def fitting_slots(per_device: int, peak: int, limit: int) -> int:
    """Slots per device under `limit` bytes, given the `peak` of a program with `per_device` slots:
    `per_device` if it fits, else the largest power of two below it whose memory, taken as
    proportional to the slots, fits (at least 1; the caller compiles it and checks again)."""
    if peak <= limit or per_device <= 1:
        return per_device
    wanted = max(1, int(per_device * limit / peak))
    return min(1 << (wanted.bit_length() - 1), per_device // 2)


def is_out_of_memory(err: BaseException) -> bool:
    """Whether `err` is XLA failing to allocate device memory (RESOURCE_EXHAUSTED)."""
    text = str(err)
    return isinstance(err, jax.errors.JaxRuntimeError) and (
        "RESOURCE_EXHAUSTED" in text or "out of memory" in text.lower()
    )
