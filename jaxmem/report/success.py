"""The sweep's success rule (jaxmem.spec.sweep.SuccessRule) in the report's words and defaults.

The runs table's `max_metric` holds each run's best value of the judged metric in the rule's direction
(the minimum for "at_most"), and `final_metric` its last value. A sweep without a rule judges nothing:
its `max_metric` is the train metric's maximum.
"""

from __future__ import annotations

import dataclasses

from jaxmem.persistence.untrained import UNTRAINED
from jaxmem.report.text import number
from jaxmem.spec.report_tables import ReportSpec
from jaxmem.spec.sweep import SuccessRule


def better(rule: SuccessRule | None) -> str:
    """ "min" when the rule asks for at most its threshold, else "max": which run is best."""
    return "min" if rule is not None and rule.direction == "at_most" else "max"


def comparison(side: str, threshold: float) -> str:
    """e.g. "≥ 0.99" (side "max": higher is better) or "≤ 0.05" (side "min")."""
    return f"{'≥' if side == 'max' else '≤'} {number(threshold)}"


def rule_text(rule: SuccessRule) -> str:
    """e.g. "accuracy ≥ 0.99 at a run's best evaluation"."""
    return f"{rule.metric} {comparison(better(rule), rule.threshold)} at a run's {rule.counts} evaluation"


def judged_metric(rule: SuccessRule | None, train_metric: str | None) -> str | None:
    """The metric the sweep judges: its success rule's, else the train metric."""
    return rule.metric if rule is not None else train_metric


def metric_label(column: str, rule: SuccessRule | None, train_metric: str | None) -> str:
    """A readable column name: max_metric is "max <metric>" ("best <metric>" when at most is better),
    final_metric "final <metric>", final_x "final x", untrained_x "untrained x" (the untrained model's)."""
    judged = judged_metric(rule, train_metric)
    if column in ("max_metric", "final_metric") and judged is None:
        return column
    if column == "max_metric":
        return f"{'best' if better(rule) == 'min' else 'max'} {judged}"
    if column == "final_metric":
        return f"final {judged}"
    if column.startswith("final_"):
        return "final " + column[len("final_") :]
    if column.startswith(UNTRAINED):
        return "untrained " + column[len(UNTRAINED) :]
    return column


def judged_columns(rule: SuccessRule) -> set[str]:
    """The runs columns holding the judged metric."""
    return {"max_metric", "final_metric", f"final_{rule.metric}"}


def with_rule_defaults(report_spec: ReportSpec, table: dict, rule: SuccessRule | None) -> ReportSpec:
    """The report spec with the heatmap's `better` and `threshold` taken from the success rule where the
    `[report]` `table` (as written in the spec) leaves them out and the heatmap shows the judged metric."""
    heatmap = report_spec.heatmap
    if heatmap is None or rule is None or heatmap.metric not in judged_columns(rule):
        return report_spec
    written = table.get("heatmap", {}) if isinstance(table, dict) else {}
    defaults = {"better": better(rule), "threshold": rule.threshold}
    changes = {k: v for k, v in defaults.items() if k not in written}
    return dataclasses.replace(report_spec, heatmap=dataclasses.replace(heatmap, **changes))
