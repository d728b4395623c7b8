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
from typing import TYPE_CHECKING, Annotated

from jaxmem.spec.report_relations import fill
from jaxmem.spec.tables import CONFIG, Names, NonNegative, Text, key, plain

if TYPE_CHECKING:
    from jaxmem.spec.report_tables import Checks, Context


def _one_value(value):
    if not isinstance(value, (bool, int, float, str)):
        raise ValueError()
    return value


@dataclasses.dataclass(frozen=True)
class Agreement:
    """Runs that differ only in one config field, paired on the rest: the largest relative differences."""

    __pydantic_config__ = CONFIG
    field: Annotated[Text, key("the config field whose values are compared")]
    label: Annotated[Text, key("its name (default: 'runs that differ only in field')")] = ""
    reference: Annotated[
        plain(_one_value, bool | int | float | str, "one value of the field") | None,
        key("the value the others are compared with (default: the smallest)"),
    ] = None
    metrics: Annotated[Names, key("final metrics compared (default: every one)")] = ()
    rtol: Annotated[NonNegative | None, key("PASS when the largest relative difference is at most this")] = None


def check_agreement(agreement: Agreement, context: Context, c: Checks) -> Agreement:
    """The names of one `[[report.agreement]]` table, and its label."""
    c.names("field", agreement.field, context.config, "a config field")
    c.names("metrics", agreement.metrics, context.metrics, "a metric of the experiment")
    return fill(agreement, label=f"runs that differ only in {agreement.field}")
