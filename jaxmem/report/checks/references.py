"""The "Reference checks" section (`[report] references = true`): every sampled instance of the sweep
re-solved on the host by the experiment's `reference.check` (float64, well-kept solvers) next to what the
engine computed for it (the run's final metrics).

Which instances: in a grid sweep, one run per distinct problem (point without the experiment's
`same_problem_across` fields, seed); in a search, the runs on both sides of every search's answer
(the answer and the value just past it), where both were run. Of the runs of one instance the best
is checked (jaxmem.report.runs.ranked); at most MAX_CHECKS instances, the first in the runs' canonical
order.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd

from jaxmem.experiments.interface import Experiment, HostRun
from jaxmem.plan.buckets import host_run
from jaxmem.persistence.store import ORDER
from jaxmem.report.runs import parse_metrics, ranked
from jaxmem.report.files import write_csv
from jaxmem.report.text import DASH, markdown_table, number
from jaxmem.spec.report_tables import ReportSpec

MAX_CHECKS = 48
REFERENCES_CSV = "references.csv"
INSTANCE_PNG = "instance.png"


def instance_keys(runs: pd.DataFrame, searches: pd.DataFrame, exp: Experiment) -> pd.Series:
    """Each run's instance: its problem and seed in a grid sweep; in a search its point, seed and
    value, or None for a value on neither side of its search's answer."""
    if searches.empty:

        def problem(row) -> str:
            config = json.loads(row["config"])
            return json.dumps({k: v for k, v in config.items() if k not in exp.same_problem_across}, sort_keys=True)

        return runs.apply(problem, axis=1).astype(str) + "/" + runs["seed"].astype(str)
    wanted = set()
    for s in searches.itertuples():
        for value in (s.capacity, s.first_failure):
            if isinstance(value, float) and math.isfinite(value):
                wanted.add((s.point, int(s.seed), int(value)))
    keys = zip(runs["point"], runs["seed"].astype(int), runs["value"].fillna(-1).astype(int))
    return pd.Series([k if k in wanted else None for k in keys], index=runs.index, dtype=object)


def sampled_runs(raw_runs: pd.DataFrame, searches: pd.DataFrame, exp: Experiment, better: str) -> pd.DataFrame:
    """The runs whose problems are checked: the best run of each instance (by max_metric, `better` "max"
    or "min"), in the runs' canonical order."""
    if raw_runs.empty:
        return raw_runs
    best_first = ranked(raw_runs, "max_metric", better)
    keys = instance_keys(best_first, searches, exp)
    picked = best_first[keys.notna() & ~keys.duplicated()]
    return picked.sort_values(list(ORDER["runs"]), kind="stable").head(MAX_CHECKS)


def stored_host_run(row: dict, exp: Experiment, variable: str | None) -> HostRun:
    """A stored run's problem as the experiment's host-side reference sees it (see plan.buckets.host_run)."""
    return host_run(exp, json.loads(row["config"]), int(row["seed"]), variable)


def reference_table(
    raw_runs: pd.DataFrame, searches: pd.DataFrame, exp: Experiment, variable: str | None, better: str
) -> pd.DataFrame:
    """One row per checked run: run_id, seed, value, the host check's numbers and the engine's metrics."""
    rows = []
    for row in sampled_runs(raw_runs, searches, exp, better).to_dict("records"):
        check = exp.reference.check(stored_host_run(row, exp, variable))
        engine = {f"engine_{k}": v for k, v in parse_metrics(row["final_metrics"]).items() if k in check}
        searched = {variable: json.loads(row["config"])[variable]} if variable else {}
        rows.append({"run_id": row["run_id"], "seed": row["seed"], **searched, **check, **engine})
    return pd.DataFrame(rows)


def verdicts(ref: pd.Series, eng: pd.Series) -> str:
    """'a/b agree' over the instances the host decided, and how many it left unverified (no verdict: NaN)."""
    unverified = int(ref.isna().sum())
    text = f"{int((ref == eng).sum())}/{int(ref.notna().sum())} agree"
    return text + (f", {unverified} unverified (the host reached no verdict)" if unverified else "")


def reference_section(
    out_dir: Path,
    report_spec: ReportSpec,
    raw_runs: pd.DataFrame,
    searches: pd.DataFrame,
    exp: Experiment,
    better: str,
    written: list[Path],
) -> str:
    """Write references.csv (and the experiment's picture of the first instance) into `out_dir`,
    appended to `written`; return the markdown section ('' when not asked for or not possible)."""
    if not report_spec.references or exp.reference is None or raw_runs.empty:
        return ""
    variable = searches["variable"].iloc[0] if not searches.empty else None
    table = reference_table(raw_runs, searches, exp, variable, better)
    if table.empty:
        return ""
    written.append(write_csv(table, Path(out_dir) / REFERENCES_CSV))
    agreement = []
    for name in [c for c in table.columns if f"engine_{c}" in table.columns]:
        ref, eng = table[name].astype(float), table[f"engine_{name}"].astype(float)
        if ref.isna().all():  # the host has no value (e.g. no W^mm for an instance that is not separable)
            agreement.append([name, "no host value", DASH])
        elif set(ref.dropna().unique()) <= {0.0, 1.0}:
            agreement.append([name, verdicts(ref, eng), DASH])
        else:
            rel = ((eng - ref).abs() / ref.abs().clip(lower=1e-30)).dropna()
            agreement.append([name, f"{len(rel)} compared", number(rel.max()) if len(rel) else DASH])
    shown = [c for c in table.columns if c != "run_id"]
    figure = instance_figure(out_dir, raw_runs, table.iloc[0]["run_id"], exp, variable)
    written += [figure] if figure else []
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
