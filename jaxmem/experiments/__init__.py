"""Registry of experiment families, one module each."""

from __future__ import annotations

from jaxmem.experiments.base import Experiment, Field
from jaxmem.experiments import assoc_memory
from jaxmem.experiments import factual_recall
from jaxmem.experiments import ntp_linear
from jaxmem.experiments import sequential_learning
from jaxmem.experiments import thm10_construction

EXPERIMENTS: dict[str, Experiment] = {
    exp.name: exp
    for exp in (
        assoc_memory.EXPERIMENT,
        factual_recall.EXPERIMENT,
        ntp_linear.EXPERIMENT,
        sequential_learning.EXPERIMENT,
        thm10_construction.EXPERIMENT,
    )
}


def get(name: str) -> Experiment:
    """Look up an experiment by name, with a helpful error listing the known ones."""
    if name not in EXPERIMENTS:
        raise KeyError(f"unknown experiment {name!r}; known experiments: {', '.join(sorted(EXPERIMENTS))}")
    return EXPERIMENTS[name]


__all__ = ["EXPERIMENTS", "Experiment", "Field", "get"]
