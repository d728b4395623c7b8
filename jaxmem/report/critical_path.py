"""report.md's section on the sweep's logical timeline (jaxmem.persistence.timeline): its critical path
in program steps and in step budgets, the run-steps its runs took, the runs frozen and how full the
programs' slots were. A figure, not a claim: the section states no verdict."""

from __future__ import annotations

import pandas as pd

from jaxmem.persistence.timeline import Summary, summary
from jaxmem.report.text import markdown_table

HEADERS = [
    "critical path, program steps",
    "step budgets (max / mean per search)",
    "run-steps",
    "runs (frozen)",
    "slots' occupancy",
]


def summary_row(s: Summary) -> list[str]:
    """The summary as the section's table row (no mean without searches)."""
    mean = f"{s.search_mean / s.budget:.2f}" if s.search_mean == s.search_mean else "–"
    return [
        f"{s.path:,}",
        f"{s.path / s.budget:.2f} / {mean}",
        f"{s.run_steps:,}",
        f"{s.runs} ({s.frozen})",
        f"{s.occupancy:.0%} of {s.slots} slots" if s.slots else "–",
    ]


def critical_path_section(timeline: pd.DataFrame | None, compiles: pd.DataFrame | None, budget: int | None) -> str:
    """The section, from the store's timeline and compiles and the sweep's step budget (`train.steps`);
    "" for a store without a timeline (older than it) or without a budget."""
    if timeline is None or timeline.empty:
        return ""
    found = summary(timeline, compiles if compiles is not None else pd.DataFrame(), budget)
    if found is None:
        return ""
    return (
        "## Critical path\n\n"
        f"The logical timeline: program steps since the sweep began, a step budget being {found.budget:,} "
        "steps (shown for a sweep that speculates: a round barrier's clock counts wall-time segments, no "
        "result). Frozen runs (probes no search wanted any more) count their steps up to their freezing.\n\n"
        + markdown_table(HEADERS, [summary_row(found)])
    )
