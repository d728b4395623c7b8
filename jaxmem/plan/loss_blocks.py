"""The `loss_block` of a program: the blocked cross-entropy (jaxmem/experiments/blocked_softmax.py) where
dense logits would not fit the memory budget (the widest block of classes that fits), else the loss path
measured fastest on the device kind (dense, or a block of classes that keeps the logits in cache).

A pure function of the experiment's stated temporaries (`Costs.temp_bytes`), the config (its padded
sizes), the slots sharing a device, the budget and the measured rates: the planner's decision.

`cross_entropy.json` beside this file holds, per device kind (`throughput.device_key`), what
benchmarks/bench_cross_entropy.py measured: for each case (a family at one shape, vmapped over slots as
the engine runs it), the bytes of one run's dense logits and the step seconds of each loss path. A program
takes the fastest path of the measured case nearest in dense-logit bytes, among its own family's cases
where there are any (as `throughput.rate` reads its table); dense where the device was never measured.
"""

from __future__ import annotations

import json
import math
from functools import lru_cache
from pathlib import Path

from jaxmem.experiments.interface import Config, Experiment

LARGEST_POWER = 31  # blocks 1, 2, 4, ..., 2**31 are tried
TABLE = Path(__file__).with_name("cross_entropy.json")


@lru_cache(maxsize=4)
def table(path: Path = TABLE) -> dict:
    return json.loads(path.read_text()) if path.is_file() else {}


def measured_cases(device: str, family: str, measured: dict | None = None) -> tuple[dict, ...]:
    """The measured cases of `device` (a `throughput.device_key`): `family`'s, or every family's where it
    has none; none where the device was never measured."""
    cases = (table() if measured is None else measured).get(device, {}).get("cases", [])
    own = [c for c in cases if c.get("family") == family]
    return tuple(own or cases)


def fastest_block(cases: tuple[dict, ...], dense_bytes: float) -> int:
    """The loss path (0: dense, else the block) measured fastest at the case nearest to `dense_bytes` of
    dense logits per run (in ratio); 0 where nothing was measured or the size is unknown."""
    if not cases or not (math.isfinite(dense_bytes) and dense_bytes > 0):
        return 0
    nearest = min(cases, key=lambda c: abs(math.log(c["dense_logits_bytes"] / dense_bytes)))
    return min(nearest["paths"], key=lambda p: p["step_seconds"])["block"]


def choose_loss_block(
    exp: Experiment, config: Config, budget_bytes: float, slots: int, measured: tuple[dict, ...] = ()
) -> int:
    """Where `slots` runs' dense logits fit `budget_bytes` (or the experiment has no estimate): the path
    `measured` found fastest (`fastest_block`; dense without measurements). Else the largest power-of-two
    block whose temporaries fit, among the blocks that take less memory than dense; where none fits, the
    smallest (the least memory there is: the slots must shrink). 0 (dense) for an experiment without a
    `loss_block`."""
    if "loss_block" not in exp.kinds:
        return 0

    def need(block: int) -> float:
        return slots * exp.cost("temp_bytes", {**config, "loss_block": block})

    dense = need(0)
    if not dense > budget_bytes:  # fits, or no estimate (NaN)
        return fastest_block(measured, dense / slots)
    saving = [b for b in (2**k for k in range(LARGEST_POWER + 1)) if need(b) < dense]
    fitting = [b for b in saving if need(b) <= budget_bytes]
    return max(fitting, default=min(saving, default=0))
