"""`[[report.agreement]]`: do runs that differ only in one config field agree? For checks that two
paths compute the same thing (an exact reduction against the full model, float32 against float64).

    [[report.agreement]]
    field = "reduced"             # the config field whose values are compared
    reference = false             # the value the others are compared with (default: the smallest)
    metrics = ["loss", "margin"]  # final metrics compared (default: every one)
    rtol = 1e-10                  # PASS when the largest relative difference is at most this
    label = "full H-head model against the exact reduction"

Runs are paired on everything else: the other config fields, the seed and the learning rate. The
relative difference of a pair is |a − b| / max(|a|, |b|), and 0 when both are 0.
"""

from __future__ import annotations

import dataclasses

from jaxmem.spec.tables import Table, field_names, non_negative, text

AGREEMENT_KEYS = ("field", "reference", "metrics", "rtol", "label")


@dataclasses.dataclass(frozen=True)
class Agreement:
    field: str
    label: str
    reference: object = None  # None: the smallest value
    metrics: tuple[str, ...] = ()  # (): every final metric
    rtol: float | None = None


def read_agreement(t: Table, config: frozenset[str] | None, metrics: frozenset[str] | None) -> Agreement | None:
    """One `[[report.agreement]]` table."""
    field = t.need("field", text)
    t.check("field", [field] if field else [], config, "a config field")
    chosen = t.get("metrics", field_names, ())
    t.check("metrics", chosen, metrics, "a metric of the experiment")
    reference = t.data.get("reference")
    if reference is not None and not isinstance(reference, (bool, int, float, str)):
        t.problems.append(f"{t.path}.reference: must be one value of {field}, got {reference!r}")
    if field is None:
        return None
    label = t.get("label", text, f"runs that differ only in {field}")
    return Agreement(field, label, reference, chosen, t.get("rtol", non_negative))
