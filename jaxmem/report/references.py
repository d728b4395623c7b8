"""The "Reference checks" section (`[report] references = true`): every sampled instance of the sweep
re-solved on the host by the experiment's `reference.check` (float64, well-kept solvers) next to what the
engine computed for it (the run's final metrics).

Which instances: in a grid sweep, one run per distinct problem (point without the experiment's
`same_problem_across` fields, seed); in a search, the runs on both sides of every search's answer
(the answer and the value just past it), where both were run. At most MAX_CHECKS instances.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd

from jaxmem.experiments.interface import Experiment, HostRun
from jaxmem.plan.buckets import host_run
from jaxmem.report.final_metrics import parse_metrics
from jaxmem.report.markdown import markdown_table
from jaxmem.spec.report_tables import ReportSpec

MAX_CHECKS = 48
REFERENCES_CSV = "references.csv"
INSTANCE_PNG = "instance.png"


def sampled_runs(raw_runs: pd.DataFrame, searches: pd.DataFrame, exp: Experiment) -> pd.DataFrame:
    """The runs whose problems are checked, in the table's order."""
    if raw_runs.empty:
        return raw_runs
    if searches.empty:

        def problem(row) -> str:
            config = json.loads(row["config"])
            return json.dumps({k: v for k, v in config.items() if k not in exp.same_problem_across}, sort_keys=True)

        keys = raw_runs.apply(problem, axis=1).astype(str) + "/" + raw_runs["seed"].astype(str)
        return raw_runs[~keys.duplicated()].head(MAX_CHECKS)
    wanted = set()
    for s in searches.itertuples():
        for value in (s.capacity, s.first_failure):
            if isinstance(value, float) and math.isfinite(value):
                wanted.add((s.point, int(s.seed), int(value)))
    keys = list(zip(raw_runs["point"], raw_runs["seed"].astype(int), raw_runs["value"].fillna(-1).astype(int)))
    picked = raw_runs[[k in wanted for k in keys]]
    return picked.drop_duplicates(["point", "seed", "value"]).head(MAX_CHECKS)


def stored_host_run(row: dict, exp: Experiment, variable: str | None) -> HostRun:
    """A stored run's problem as the experiment's host-side reference sees it (see plan.buckets.host_run)."""
    return host_run(exp, json.loads(row["config"]), int(row["seed"]), variable)


def reference_table(raw_runs: pd.DataFrame, searches: pd.DataFrame, exp: Experiment, variable: str | None):
    """One row per checked run: run_id, seed, value, the host check's numbers and the engine's metrics."""
    rows = []
    for row in sampled_runs(raw_runs, searches, exp).to_dict("records"):
        check = exp.reference.check(stored_host_run(row, exp, variable))
        engine = {f"engine_{k}": v for k, v in parse_metrics(row["final_metrics"]).items() if k in check}
        searched = {variable: json.loads(row["config"])[variable]} if variable else {}
        rows.append({"run_id": row["run_id"], "seed": row["seed"], **searched, **check, **engine})
    return pd.DataFrame(rows)


def reference_section(out_dir: Path, report_spec: ReportSpec, raw_runs, searches, exp: Experiment) -> str:
    """Write references.csv and return the markdown section ('' when not asked for or not possible)."""
    if not report_spec.references or exp.reference is None or raw_runs.empty:
        return ""
    variable = searches["variable"].iloc[0] if not searches.empty else None
    table = reference_table(raw_runs, searches, exp, variable)
    if table.empty:
        return ""
    table.to_csv(Path(out_dir) / REFERENCES_CSV, index=False)
    agreement = []
    for name in [c for c in table.columns if f"engine_{c}" in table.columns]:
        ref, eng = table[name].astype(float), table[f"engine_{name}"].astype(float)
        if ref.isna().all():  # the host has no value (e.g. no W^mm for an instance that is not separable)
            agreement.append([name, "no host value", "–"])
        elif set(ref.dropna().unique()) <= {0.0, 1.0}:
            agreement.append([name, f"{int((ref == eng).sum())}/{int(ref.notna().sum())} agree", "–"])
        else:
            rel = ((eng - ref).abs() / ref.abs().clip(lower=1e-30)).dropna()
            agreement.append([name, f"{len(rel)} compared", f"{rel.max():.2e}" if len(rel) else "–"])
    shown = [c for c in table.columns if c != "run_id"]
    figure = instance_figure(out_dir, raw_runs, table.iloc[0]["run_id"], exp, variable)
    return "\n".join(
        [
            "## Reference checks (host, float64)",
            "",
            " ".join((exp.reference.check.__doc__ or "").split()),
            "",
            markdown_table(["quantity", "engine vs host", "largest relative difference"], agreement),
            "",
            markdown_table(shown, [[r[c] for c in shown] for r in table.to_dict("records")]),
            "",
            f"Per instance: `{REFERENCES_CSV}`.",
        ]
        + ([f"\nThe first instance (seed {table.iloc[0]['seed']}):\n\n![instance]({figure.name})"] if figure else [])
    )


def instance_figure(out_dir: Path, raw_runs: pd.DataFrame, run_id: str, exp: Experiment, variable: str | None):
    """The experiment's picture of one run's problem (its reference figure), or None."""
    if exp.reference.figure is None:
        return None
    row = raw_runs[raw_runs["run_id"] == run_id].iloc[0].to_dict()
    return exp.reference.figure(Path(out_dir) / INSTANCE_PNG, stored_host_run(row, exp, variable))
