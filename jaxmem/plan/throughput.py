"""Measured throughput per device kind, behind the planner's and the dry-run's time estimates.

`throughput.json` beside this file holds, per device (`device_key`), what benchmarks/bench_throughput.py
measured for each experiment family at the sizes it ran: the FLOPs of one run's step, the slots of the
program, the achieved FLOP/s (useful work: true sizes), the seconds of one program step and of one
compile. An estimate reads the family's entry nearest in FLOPs per run-step (another family's where its own
is missing), and the stated figures of jaxmem/plan/costs.py where the device was never measured; the least
time of a program step is the device's measured `step_floor_seconds` (a 1-slot program:
benchmarks/gpu_check.py) where there is one, else the stated one (a saturated benchmark measures throughput,
not that floor). A CPU's entry holds for the processor model it was measured on (its `machine.cpu`): hosts
of one core count differ (an AMD EPYC host measured 2.0-2.6x the rates of an Intel Xeon host, 28 and 29
Nov), so another model gets the stated figures. A compile costs the family's `sweep_compile_seconds` where
the device has them (the median compile of its quick sweeps run one at a time on the idle device:
benchmarks/compile_costs.py; a compile inside a sweep takes longer than alone), else the nearest entry's.
"""

from __future__ import annotations

import dataclasses
import json
import math
from functools import lru_cache
from pathlib import Path

from jaxmem.plan.costs import COMPILE_SECONDS, FLOPS_PER_SECOND, STEP_SECONDS
from jaxmem.plan.target import Target

TABLE = Path(__file__).with_name("throughput.json")


@dataclasses.dataclass(frozen=True)
class Rate:
    flops_per_second: float  # one device, at saturation
    step_seconds: float  # the least time one program step takes
    compile_seconds: float  # one bucket's program compiled (cold)
    source: str  # "measured on <device>, <date>" or "stated (jaxmem/plan/costs.py)"

    def seconds(self, slots: int, flops_per_run: float) -> float:
        """One program step of `slots` runs of `flops_per_run` FLOPs each, on one device."""
        work = slots * (flops_per_run if math.isfinite(flops_per_run) else 0.0)
        return max(self.step_seconds, work / self.flops_per_second)


def device_key(target: Target) -> str:
    """The table's key of a device kind: a CPU's cores decide its throughput, an accelerator's kind."""
    return f"cpu ({target.cores} cores)" if target.platform == "cpu" else target.kind


def same_processor(device: dict, target: Target) -> bool:
    """Whether a device entry was measured on `target`'s processor model (a CPU's; where either is
    unrecorded, or for an accelerator, whose kind is its key: yes)."""
    measured_on = device.get("machine", {}).get("cpu", "")
    return target.platform != "cpu" or not (measured_on and target.model) or measured_on == target.model


@lru_cache(maxsize=4)
def table(path: Path = TABLE) -> dict:
    return json.loads(path.read_text()) if path.is_file() else {}


def rate(target: Target, family: str, flops_per_run: float, measured: dict | None = None) -> Rate:
    """The throughput of one device of `target` for `family` at `flops_per_run` FLOPs per run-step."""
    device = (table() if measured is None else measured).get(device_key(target))
    stated = Rate(
        FLOPS_PER_SECOND.get(target.platform, 2e13) * (target.cores if target.platform == "cpu" else 1),
        STEP_SECONDS.get(target.platform, 1e-3),
        COMPILE_SECONDS.get(target.platform, 15.0),
        "stated (jaxmem/plan/costs.py)",
    )
    if not device or not device.get("families") or not same_processor(device, target):
        return stated
    entries = device["families"].get(family) or [e for rows in device["families"].values() for e in rows]
    size = flops_per_run if math.isfinite(flops_per_run) and flops_per_run > 0 else 1.0
    nearest = min(entries, key=lambda e: abs(math.log(e["flops_per_run_step"] / size)))
    source = f"measured on {device_key(target)}, {device.get('date', '?')}"
    in_sweeps = device.get("sweep_compile_seconds", {})  # a family's compiles inside its sweeps, where measured
    compile_seconds = in_sweeps.get(family, nearest.get("compile_seconds", stated.compile_seconds))
    floor = device.get("step_floor_seconds", stated.step_seconds)
    return Rate(nearest["flops_per_second"], floor, compile_seconds, source)
