"""The untrained model's metrics as the store keeps them: `untrained_<metric>` entries beside the trained
metrics, in a run's `final_metrics` and in a test-time point's `metrics` (the run's parameters at
initialisation, evaluated before any training: the baseline a trained value is judged against)."""

from __future__ import annotations

UNTRAINED = "untrained_"


def as_untrained(metrics: dict) -> dict:
    """`metrics` of the untrained model under their stored names (`untrained_<metric>`)."""
    return {UNTRAINED + k: v for k, v in metrics.items()}
