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
from typing import TYPE_CHECKING

from jaxmem.spec.tables import Names, NonNegative, Text, fill, key, plain

if TYPE_CHECKING:
    from jaxmem.spec.report_tables import Context


def _one_value(value):
    if not isinstance(value, (bool, int, float, str)):
        raise ValueError()
    return value


OneValue = plain(_one_value, bool | int | float | str, "one value of the field")


@dataclasses.dataclass(frozen=True)
class Agreement:
    """Runs that differ only in one config field, paired on the rest: the largest relative differences."""

    field: Text = key("the config field whose values are compared", names=("config", "a config field"))
    label: Text = key("its name (default: 'runs that differ only in field')", "")
    reference: OneValue | None = key("the value the others are compared with (default: the smallest)", None)
    metrics: Names = key(
        "final metrics compared (default: every one)", (), names=("metrics", "a metric of the experiment")
    )
    rtol: NonNegative | None = key("PASS when the largest relative difference is at most this", None)

    def checked(self, given: dict, context: Context, path: str, problems: list[str]) -> Agreement:
        return fill(self, label=f"runs that differ only in {self.field}")
