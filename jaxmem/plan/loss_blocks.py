"""The loss path of a program (`loss_block`, `loss_kernel`): the blocked cross-entropy
(jaxmem/experiments/blocked_softmax.py) where dense logits would not fit the memory budget (the widest block
of classes that fits, run as XLA's scan), else the loss path measured fastest on an accelerator's device kind
(dense, a block of classes run as XLA's scan, or the fused Pallas kernels that keep the logits on chip:
jaxmem/experiments/pallas_softmax.py; a CPU keeps dense: jaxmem.plan.layout).

A pure function of the experiment's stated temporaries (`Costs.temp_bytes`), the config (its padded
sizes), the slots sharing a device, the budget and the measured rates: the planner's decision.

`cross_entropy.json` beside this file holds, per device kind (`throughput.device_key`), what
benchmarks/bench_cross_entropy.py measured: for each case (a family at one shape, vmapped over slots as
the engine runs it), the bytes of one run's dense logits and the compile and step seconds of each loss
path (its `block`, and its `kernel` where not 'xla'). A program takes, at the measured case nearest in
dense-logit bytes (among its own family's cases where there are any, as `throughput.rate` reads its table),
a blocked path only where its step is MARGIN times faster than dense's and one compile and the step budget
cost no more (a tie within the noise of a measurement keeps the dense program); dense where the device was
never measured.
"""

from __future__ import annotations

import json
import math
from functools import lru_cache
from pathlib import Path
from typing import NamedTuple

from jaxmem.experiments.interface import Config, Experiment

LARGEST_POWER = 31  # blocks 1, 2, 4, ..., 2**31 are tried
TABLE = Path(__file__).with_name("cross_entropy.json")
MARGIN = 1.1  # a blocked path replaces dense where measured at least this much cheaper


class LossPath(NamedTuple):
    """How a program computes its cross-entropy: `block` classes at a time (0: dense logits) by `kernel`."""

    block: int = 0
    kernel: str = "xla"

    @property
    def entries(self) -> dict:
        """The config's derived entries that select it."""
        return {"loss_block": self.block, "loss_kernel": self.kernel}


DENSE = LossPath()


def measured_path(path: dict) -> LossPath:
    """A measured path's identity in cross_entropy.json (its kernel 'xla' where it names none)."""
    return LossPath(path["block"], path.get("kernel", DENSE.kernel))


@lru_cache(maxsize=4)
def table(path: Path = TABLE) -> dict:
    return json.loads(path.read_text()) if path.is_file() else {}


def measured_cases(device: str, family: str, measured: dict | None = None) -> tuple[dict, ...]:
    """The measured cases of `device` (a `throughput.device_key`): `family`'s, or every family's where it
    has none; none where the device was never measured."""
    cases = (table() if measured is None else measured).get(device, {}).get("cases", [])
    own = [c for c in cases if c.get("family") == family]
    return tuple(own or cases)


def fastest_path(cases: tuple[dict, ...], dense_bytes: float, steps: int = 1) -> LossPath:
    """The loss path at the measured case nearest to `dense_bytes` of dense logits per run (in ratio): the
    blocked path cheapest over one compile and `steps` steps among those whose step is MARGIN times faster
    than dense's and whose total costs no more; else dense (also where nothing was measured or the size is
    unknown). The step decides first: compile times measured on a shared machine vary more than MARGIN,
    and a program of zero steps still evaluates its loss."""
    if not cases or not (math.isfinite(dense_bytes) and dense_bytes > 0):
        return DENSE
    nearest = min(cases, key=lambda c: abs(math.log(c["dense_logits_bytes"] / dense_bytes)))
    paths = {measured_path(p): p for p in nearest["paths"]}
    if DENSE not in paths:
        return DENSE
    cost = {k: p["compile_seconds"] + steps * p["step_seconds"] for k, p in paths.items()}
    dense_step = paths[DENSE]["step_seconds"]
    faster = [k for k, p in paths.items() if k.block and MARGIN * p["step_seconds"] <= dense_step]
    return min((k for k in faster if cost[k] <= cost[DENSE]), key=cost.get, default=DENSE)


def choose_loss_path(
    exp: Experiment, config: Config, budget_bytes: float, slots: int, measured: tuple[dict, ...] = (), steps: int = 1
) -> LossPath:
    """Where `slots` runs' dense logits fit `budget_bytes` (or the experiment has no estimate): the path
    `measured` found cheapest over `steps` steps (`fastest_path`; dense without measurements). Else XLA's
    blocked loss with the largest power-of-two block whose temporaries fit, among the blocks that take less
    memory than dense; where none fits, the smallest (the least memory there is: the slots must shrink).
    Dense for an experiment without a `loss_block`."""
    if "loss_block" not in exp.kinds:
        return DENSE

    def need(block: int) -> float:
        return slots * exp.cost("temp_bytes", {**config, "loss_block": block})

    dense = need(0)
    if not dense > budget_bytes:  # fits, or no estimate (NaN)
        return fastest_path(measured, dense / slots, steps)
    saving = [b for b in (2**k for k in range(LARGEST_POWER + 1)) if need(b) < dense]
    fitting = [b for b in saving if need(b) <= budget_bytes]
    return LossPath(max(fitting, default=min(saving, default=0)))
