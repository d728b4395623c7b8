"""write_report: every report file of one sweep, report.md last, written once and atomically.

Search sweeps get the capacity files (jaxmem.report.capacity), grid sweeps the heatmap and per-point
metrics (jaxmem.report.grid), sweeps with recorded trajectories the trajectory files
(jaxmem.report.trajectory); given the stored runs and the experiment, report.md also holds the rejected
instances, the host reference checks (jaxmem.report.checks) and the compiled programs. verdicts.json holds
every verdict report.md states, one entry per claim (jaxmem.report.verdicts.verdicts_json).

Every output is a function of the results alone: the tables are put in the store's canonical row order
first (jaxmem.persistence.store.ORDER), and a best run is chosen by value, then learning rate, then
run_id (jaxmem.report.runs.ranked).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from jaxmem.experiments.interface import Experiment
from jaxmem.persistence.store import ORDER, expand_config
from jaxmem.report.capacity.report import write_capacity_report, write_success_map
from jaxmem.report.capacity.stable import stable_searches
from jaxmem.report.captions import captioning
from jaxmem.report.checks.references import reference_section
from jaxmem.report.critical_path import critical_path_section
from jaxmem.report.checks.rejected import rejected_section
from jaxmem.report.files import write_text
from jaxmem.report.grid.report import is_grid_sweep, write_grid_report
from jaxmem.report.overview import buckets_section, meta_section, runs_section
from jaxmem.report.partial import Partial, marked
from jaxmem.report.runs import expand_final_metrics
from jaxmem.report.success import better
from jaxmem.report.trajectory.report import write_trajectory_report
from jaxmem.report.agreement import agreement_sections
from jaxmem.report.final_eval import final_eval_sections
from jaxmem.report.relations import relation_sections
from jaxmem.report.trajectory.rates import rate_columns
from jaxmem.report.verdicts import stating, verdicts_json
from jaxmem.spec.report_tables import ReportSpec
from jaxmem.spec.sweep import SuccessRule


def canonical(frame: pd.DataFrame | None, table: str) -> pd.DataFrame | None:
    """`frame` in the canonical order of the store's `table` (by the ORDER columns it has)."""
    if frame is None or frame.empty:
        return frame
    keys = [c for c in ORDER[table] if c in frame]
    return frame.sort_values(keys, kind="stable").reset_index(drop=True) if keys else frame


def spec_axes(raw_runs: pd.DataFrame) -> list[str]:
    """The config fields that vary over the stored runs (their configs as the spec gave them)."""
    configs = expand_config(raw_runs[["config"]]) if not raw_runs.empty else raw_runs
    return [c for c in configs.columns if c != "config" and configs[c].astype(str).nunique() > 1]


def write_report(
    out_dir: Path,
    report_spec: ReportSpec,
    searches: pd.DataFrame,
    runs: pd.DataFrame,
    meta: dict,
    train_spec: dict | None = None,
    trajectories: pd.DataFrame | None = None,
    planned: pd.DataFrame | None = None,
    *,
    success: SuccessRule | None = None,
    experiment: Experiment | None = None,
    raw_runs: pd.DataFrame | None = None,
    compiles: pd.DataFrame | None = None,
    final_eval: pd.DataFrame | None = None,
    final_axes: list[str] | None = None,
    search_variable: str | None = None,
    partial: Partial | None = None,
    timeline: pd.DataFrame | None = None,
    step_budget: int | None = None,
) -> list[Path]:
    """Write the report files into out_dir and return their paths, report.md last.

    `runs` and `searches` have their config spread into columns (jaxmem.persistence.store.load_results);
    `train_spec` is the sweep's [train] table and `success` its success rule (jaxmem.spec.sweep): they
    name the judged metric and its direction. `trajectories` is the store's trajectories table and
    `planned` the configs of runs in flight (jaxmem.report.trajectory.data.planned_runs). With the
    `experiment`, the stored `raw_runs` (JSON config and final_metrics) and the `compiles` table,
    report.md also gets the rejected instances, the reference checks and the buckets. `final_eval` is
    the store's test-time table (jaxmem.persistence.store.final_eval_frame) over `final_axes`.
    `search_variable`: the spec's searched variable, for the success map of a search sweep whose
    probes ran but none of whose searches has finished (a capped or interrupted sweep). `partial`: what
    an unfinished sweep's report says of it (jaxmem.report.partial), in its first line and in every
    section of results; None for a finished sweep. `timeline`: the store's timeline table, with the
    sweep's `step_budget` (train.steps) for its critical path section (jaxmem.report.critical_path).
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    searches, trajectories = canonical(searches, "searches"), canonical(trajectories, "trajectories")
    runs = expand_final_metrics(canonical(runs, "runs"))
    if report_spec.search_answer == "stable" and not searches.empty:
        searches = stable_searches(searches, runs, report_spec.search_goal)
    raw_runs, compiles = canonical(raw_runs, "runs"), canonical(compiles, "compiles")
    train_metric = (train_spec or {}).get("metric")
    written: list[Path] = []
    results = []
    seeds = {int(seed) for frame in (runs, searches) if "seed" in frame for seed in frame["seed"].dropna()}
    # every verdict the sections state, for verdicts.json; the figures wait for their captions (claims, size)
    with stating() as claims, captioning(claims, meta.get("preset", ""), seeds):
        if not searches.empty:
            per_point = partial.per_point if partial is not None else None
            results += write_capacity_report(
                out_dir, report_spec, searches, runs, success, train_metric, written, planned=per_point
            )
        elif is_grid_sweep(runs):
            results += write_grid_report(out_dir, report_spec, runs, success, train_metric, written)
        elif search_variable and report_spec.success_map is not None and not runs.empty:
            results.append(write_success_map(out_dir, report_spec, searches, runs, search_variable, written))
        axes = spec_axes(raw_runs) if raw_runs is not None else None
        results += write_trajectory_report(out_dir, report_spec, trajectories, runs, planned, written, axes)
        if final_eval is not None:
            metrics = list(experiment.metrics) if experiment is not None else []
            results += final_eval_sections(
                out_dir, report_spec.final_eval, final_eval, final_axes or [], metrics, written
            )
        rated = rate_columns(trajectories, runs, report_spec.trajectory) if report_spec.relations else runs
        results += relation_sections(out_dir, report_spec.relations, rated, searches, written)
        results += agreement_sections(out_dir, report_spec.agreements, runs, written)
    headline = partial.headline() if partial is not None else ""
    written.append(write_text(out_dir / "verdicts.json", verdicts_json(claims, meta, seeds, headline)))
    sections = [f"# {report_spec.title or 'Capacity report'}", headline, meta_section(meta)]
    sections += [marked(s, partial) for s in results]
    sections.append(runs_section(runs, success))
    sections.append(critical_path_section(timeline, compiles, step_budget))
    if experiment is not None and raw_runs is not None:
        sections += [
            rejected_section(raw_runs, experiment, train_spec or {}),
            reference_section(out_dir, report_spec, raw_runs, searches, experiment, better(success), written),
        ]
        if compiles is not None:
            sections.append(buckets_section(experiment, raw_runs, compiles))
    text = "\n\n".join(s.strip("\n") for s in sections if s) + "\n"
    written.append(write_text(out_dir / "report.md", text))
    return written
