"""The `loss_block` of a program: dense logits where they fit the memory budget, else the blocked
cross-entropy (jaxmem/experiments/blocked_softmax.py) with the widest block of classes that fits.

A pure function of the experiment's stated temporaries (`Costs.temp_bytes`), the config (its padded
sizes), the slots sharing a device and the budget: the planner's, not the device's, decision.
"""

from __future__ import annotations

from jaxmem.experiments.interface import Config, Experiment

LARGEST_POWER = 31  # blocks 1, 2, 4, ..., 2**31 are tried


def choose_loss_block(exp: Experiment, config: Config, budget_bytes: float, slots: int) -> int:
    """0 (dense) where `slots` runs' dense logits fit `budget_bytes` (or the experiment has no
    `loss_block` or no estimate); else the largest power-of-two block whose temporaries fit, among the
    blocks that take less memory than dense; where none fits, the smallest (the least memory there is:
    the slots must shrink)."""
    if "loss_block" not in exp.kinds:
        return 0

    def need(block: int) -> float:
        return slots * exp.cost("temp_bytes", {**config, "loss_block": block})

    dense = need(0)
    if not dense > budget_bytes:  # fits, or no estimate (NaN)
        return 0
    saving = [b for b in (2**k for k in range(LARGEST_POWER + 1)) if need(b) < dense]
    fitting = [b for b in saving if need(b) <= budget_bytes]
    return max(fitting, default=min(saving, default=0))
