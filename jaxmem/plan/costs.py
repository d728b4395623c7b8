"""What the planner assumes a device kind costs, and the slot and padding rules built on it.

Stated, not measured by the planner (benchmarks measure them):
- FLOPS_PER_SECOND: useful FLOP/s one device sustains on these small vmapped programs. A CPU core
  ~12.5 GFLOP/s (benchmarks/RESULTS.md: a 2-core CPU saturates at 25–31 GFLOP/s). A GPU 7e12: an H200
  sustained 4.4–11.5 TFLOP/s on the saturated small programs of benchmarks/RESULTS_gpu_throughput.md
  (28 and 29 Nov; they are bound by memory bandwidth, which an H100 has 0.7× of) and 36–44 on paper-size buckets. A TPU:
  not measured, 2e13.
- COMPILE_SECONDS: one bucket's compile. A CPU 2–4 s; an H200 4.3–16.8 s for the saturated programs of
  benchmarks/RESULTS_gpu_throughput.md and its 28 Nov predecessor (6.8–8.0 s in their Fig 1 sweeps), 15–28 s
  for paper-size buckets (benchmarks/RESULTS_paper_scale_gpu.md).
- STEP_SECONDS: the least time one step of a program takes, however little it computes: a while
  loop's iteration and its kernel launches. A CPU ~20 µs. A GPU at most 0.32 ms: on an H200 the authors'
  protocol ran one unbatched Fig 1 MLP run's steps, each a Python-dispatched jit call, at 388,352 steps
  in 124.3 s, compiles included (RESULTS_gpu_throughput_2026-11-28.md). (The 6 ms of 250 slots that once set 1 ms
  here was measured on the H200 host's CPU, RESULTS_protocol_gpu.md.) A TPU: not measured, 1 ms.
  A device's measured floor (jaxmem/plan/throughput.json) replaces these: the H200's 1-slot Fig 1 MLP
  program took 37.8 µs a step (RESULTS_gpu_throughput.md, 29 Nov).
- TARGET_FLOPS: work per step one device should hold before more slots stop paying off (on a small CPU
  one run of moderate size already fills the cores; DESIGN: "What the hardware says"); MAX_SLOTS caps it.
"""

from __future__ import annotations

import math

import numpy as np

FLOPS_PER_SECOND = {"cpu": 1.25e10, "gpu": 7e12, "tpu": 2e13}
COMPILE_SECONDS = {"cpu": 3.0, "gpu": 15.0, "tpu": 15.0}
STEP_SECONDS = {"cpu": 2e-5, "gpu": 3.2e-4, "tpu": 1e-3}
TARGET_FLOPS = {"cpu": 4e6, "gpu": 2e10, "tpu": 2e10}
MAX_SLOTS = {"cpu": 32, "gpu": 4096, "tpu": 4096}
# What one compile costs, as the FLOPs the device would compute in the same time: a CPU bucket compiles
# in 2–4 s and trains at 10–40 GFLOP/s; an accelerator's, COMPILE_SECONDS × FLOPS_PER_SECOND.
COMPILE_FLOPS = {"cpu": 5e10, "gpu": 1e14, "tpu": 3e14}
ACCELERATORS = ("gpu", "tpu")
# Rounds a search probes ahead of its current one (jaxmem.plan.scheduler): a guessed probe costs a slot
# that would otherwise sit frozen on an accelerator, whose step costs its floor until the slots' work
# exceeds it (benchmarks/RESULTS_search_latency.md: depth 2 cuts the Fig 1 grids' critical path from 3
# step budgets to 1.25-1.41 for 1.01-1.09x the run-steps; depth 3 changes nothing there). On a CPU each
# slot costs its work: no speculation, the round barrier.
SPECULATION = {"cpu": 0, "gpu": 2, "tpu": 2}
DECISIONS_PER_BUDGET = 16  # segments per step budget when speculating: every budget / 16 steps (ibid.:
# 1.10 budgets on average against 1.06 deciding at every evaluation, with 16x fewer host syncs)


def slots_per_device(padded_flops: float, live_runs: int, platform: str, max_slots: int = 0) -> int:
    """Slots per device for a bucket: the runs it can hold at once (`live_runs`), in as few equal
    waves as fill a device (its FLOP target, or `max_slots`) — one live run, one slot.
    An experiment without a FLOP count (NaN) gets the platform's most slots per wave.
    It depends only on the bucket and the spec, never on timing or device count: XLA compiles
    different batch sizes differently (a batch of one becomes an unbatched dot), so a run's numbers
    are reproducible exactly when its program's per-device batch is. Devices multiply the slots.
    """
    waves = math.ceil(live_runs / wave_slots(padded_flops, platform, max_slots))
    return max(1, math.ceil(live_runs / waves))


def wave_slots(padded_flops: float, platform: str, max_slots: int = 0) -> int:
    """The most slots per device of one wave (`slots_per_device`): the device's FLOP target over a run's
    work, or `max_slots`; 1 leaves a bucket one slot per device however many runs it holds."""
    most = MAX_SLOTS.get(platform, 4096)
    filling = TARGET_FLOPS.get(platform, 2e10) / max(padded_flops, 1.0)
    return max_slots or (int(np.clip(filling, 1, most)) if math.isfinite(padded_flops) else most)


def padding_pays(extra_flops: float, platform: str) -> bool:
    """Whether padding a run to a shared program (`extra_flops` more work over its step budget) costs
    less than compiling a program of its own. Unknown costs (NaN) keep the padding."""
    return not extra_flops > COMPILE_FLOPS.get(platform, 3e14)
