"""The "Rejected instances" section: runs whose problem failed the experiment's precondition at
initialisation (e.g. an NTP instance that is not separable) and so were never trained, one row each."""

from __future__ import annotations

import json

import pandas as pd

from jaxmem.experiments.interface import Experiment
from jaxmem.report.runs import parse_metrics
from jaxmem.report.text import markdown_table


def rejected_runs(raw_runs: pd.DataFrame, exp: Experiment, trains: bool) -> list[dict]:
    """The rejected runs: run_id, seed, config and the precondition checks they failed."""
    if not exp.precondition or not trains or raw_runs.empty:
        return []
    out = []
    for row in raw_runs.to_dict("records"):
        failed = exp.failed_checks(parse_metrics(row["final_metrics"]))
        if failed:
            out.append({"run_id": row["run_id"], "seed": row["seed"], "config": row["config"], "failed": failed})
    return out


def rejected_section(raw_runs: pd.DataFrame, exp: Experiment, train_spec: dict) -> str:
    rejected = rejected_runs(raw_runs, exp, bool(train_spec.get("steps", 1)))
    if not rejected:
        return ""
    rows = [
        [
            r["run_id"],
            r["seed"],
            ", ".join(f"{k}={v}" for k, v in json.loads(r["config"]).items()),
            ", ".join(r["failed"]),
        ]
        for r in rejected
    ]
    return "\n".join(
        [
            "## Rejected instances",
            "",
            f"{len(rejected)} of {len(raw_runs)} runs drew a problem that fails the experiment's precondition "
            f"({', '.join(exp.precondition)}, checked at initialisation); they were not trained (0 steps).",
            "",
            markdown_table(["run", "seed", "config", "fails"], rows),
        ]
    )
