"""The devices a sweep is planned for: the ones this process sees, or a named kind (`--plan-for`), so
that the planner's decisions for an accelerator can be shown, and tested, on a CPU."""

from __future__ import annotations

import dataclasses
import re

GIB = 2**30


@dataclasses.dataclass(frozen=True)
class Target:
    platform: str  # "cpu", "gpu" or "tpu"
    count: int  # devices the runs are sharded over
    kind: str  # the device kind, as JAX names it
    memory_bytes: int  # per device: the allocator's limit on an accelerator, the host's RAM on a CPU
    cores: int = 1  # a CPU device's cores (its throughput scales with them)
    model: str = ""  # a CPU's processor model, as the host names it ("": unknown, or not a CPU)

    def describe(self) -> str:
        cores = f", {self.cores} cores" if self.platform == "cpu" else ""
        return f"{self.count} {self.platform} device(s) ({self.kind}{cores}, {self.memory_bytes / GIB:.0f} GiB each)"


NAMED = {  # --plan-for: the accelerators jaxmem is measured on (memory: what JAX's allocator may use)
    "h100": Target("gpu", 1, "NVIDIA H100 80GB HBM3", 79 * GIB),
    "h200": Target("gpu", 1, "NVIDIA H200", 139 * GIB),
    "tpu-v5e": Target("tpu", 1, "TPU v5 lite", 16 * GIB),
}
NAMED["gpu"], NAMED["tpu"] = NAMED["h100"], NAMED["tpu-v5e"]


def named(name: str, count: int = 1) -> Target:
    """A named device kind (NAMED), `count` of them; the name may say the count itself: "h100x8"."""
    kind, times = re.fullmatch(r"(.+?)(?:x(\d+))?", name.lower()).groups()
    if kind not in NAMED or (times and int(times) < 1):
        raise ValueError(
            f"unknown device kind {name!r} to plan for; known: {', '.join(sorted(NAMED))} (KIND or KINDxCOUNT)"
        )
    return dataclasses.replace(NAMED[kind], count=int(times) if times else count)
