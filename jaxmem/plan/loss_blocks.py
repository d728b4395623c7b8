"""The `loss_block` of a program: the blocked cross-entropy (jaxmem/experiments/blocked_softmax.py) where
dense logits would not fit the memory budget (the widest block of classes that fits), else the loss path
measured fastest on an accelerator's device kind (dense, or a block of classes that keeps the logits in cache;
a CPU keeps dense: jaxmem.plan.layout).

A pure function of the experiment's stated temporaries (`Costs.temp_bytes`), the config (its padded
sizes), the slots sharing a device, the budget and the measured rates: the planner's decision.

`cross_entropy.json` beside this file holds, per device kind (`throughput.device_key`), what
benchmarks/bench_cross_entropy.py measured: for each case (a family at one shape, vmapped over slots as
the engine runs it), the bytes of one run's dense logits and the compile and step seconds of each loss
path. A program takes, at the measured case nearest in dense-logit bytes (among its own family's cases
where there are any, as `throughput.rate` reads its table), a blocked path only where its step is MARGIN
times faster than dense's and one compile and the step budget cost no more (a tie within the noise of a
measurement keeps the dense program); dense where the device was never measured.
"""

from __future__ import annotations

import json
import math
from functools import lru_cache
from pathlib import Path

from jaxmem.experiments.interface import Config, Experiment

LARGEST_POWER = 31  # blocks 1, 2, 4, ..., 2**31 are tried
TABLE = Path(__file__).with_name("cross_entropy.json")
MARGIN = 1.1  # a blocked path replaces dense where measured at least this much cheaper


@lru_cache(maxsize=4)
def table(path: Path = TABLE) -> dict:
    return json.loads(path.read_text()) if path.is_file() else {}


def measured_cases(device: str, family: str, measured: dict | None = None) -> tuple[dict, ...]:
    """The measured cases of `device` (a `throughput.device_key`): `family`'s, or every family's where it
    has none; none where the device was never measured."""
    cases = (table() if measured is None else measured).get(device, {}).get("cases", [])
    own = [c for c in cases if c.get("family") == family]
    return tuple(own or cases)


def fastest_block(cases: tuple[dict, ...], dense_bytes: float, steps: int = 1) -> int:
    """The loss path (0: dense, else the block) at the measured case nearest to `dense_bytes` of dense logits
    per run (in ratio): the blocked path cheapest over one compile and `steps` steps among those whose step
    is MARGIN times faster than dense's and whose total costs no more; else dense (also where nothing was
    measured or the size is unknown). The step decides first: compile times measured on a shared machine
    vary more than MARGIN, and a program of zero steps still evaluates its loss."""
    if not cases or not (math.isfinite(dense_bytes) and dense_bytes > 0):
        return 0
    nearest = min(cases, key=lambda c: abs(math.log(c["dense_logits_bytes"] / dense_bytes)))
    paths = {p["block"]: p for p in nearest["paths"]}
    if 0 not in paths:
        return 0
    cost = {b: p["compile_seconds"] + steps * p["step_seconds"] for b, p in paths.items()}
    faster = [b for b, p in paths.items() if b and MARGIN * p["step_seconds"] <= paths[0]["step_seconds"]]
    return min((b for b in faster if cost[b] <= cost[0]), key=cost.get, default=0)


def choose_loss_block(
    exp: Experiment, config: Config, budget_bytes: float, slots: int, measured: tuple[dict, ...] = (), steps: int = 1
) -> int:
    """Where `slots` runs' dense logits fit `budget_bytes` (or the experiment has no estimate): the path
    `measured` found cheapest over `steps` steps (`fastest_block`; dense without measurements). Else the
    largest power-of-two block whose temporaries fit, among the blocks that take less memory than dense;
    where none fits, the smallest (the least memory there is: the slots must shrink). 0 (dense) for an
    experiment without a `loss_block`."""
    if "loss_block" not in exp.kinds:
        return 0

    def need(block: int) -> float:
        return slots * exp.cost("temp_bytes", {**config, "loss_block": block})

    dense = need(0)
    if not dense > budget_bytes:  # fits, or no estimate (NaN)
        return fastest_block(measured, dense / slots, steps)
    saving = [b for b in (2**k for k in range(LARGEST_POWER + 1)) if need(b) < dense]
    fitting = [b for b in saving if need(b) <= budget_bytes]
    return max(fitting, default=min(saving, default=0))
