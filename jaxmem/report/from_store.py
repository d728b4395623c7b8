"""`jaxmem report DIR`: the stored tables as CSV and Parquet, and every report file from whatever the
store holds (also mid-sweep), rebuilt from the spec stored with the results."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from jaxmem.engine.program import precision_label
from jaxmem.experiments import code_identity
from jaxmem.experiments.registry import find as find_experiment
from jaxmem.experiments.registry import searching
from jaxmem.persistence.lock import lock_state
from jaxmem.persistence.progress import finished, stored_progress
from jaxmem.persistence.store import Store, expand_config, load_results
from jaxmem.persistence.timeline import budget_of, speculated
from jaxmem.report.export import effective_runs, effective_searches, exported_runs
from jaxmem.report.files import commit, committing, staged, write_table
from jaxmem.report.partial import Partial, partial_of
from jaxmem.report.runs import expand_final_metrics
from jaxmem.report.success import with_rule_defaults
from jaxmem.report.text import number
from jaxmem.report.trajectory.data import planned_runs
from jaxmem.report.writer import write_report
from jaxmem.spec.sweep import EngineSpec, SpecError, SweepSpec, TrainSpec, parse, stored_report_spec

META_KEYS = ("spec", "preset", "experiment", "device", "jaxmem_version")


def stored_sweep(resolved: dict, folder: str = "") -> SweepSpec | None:
    """The stored resolved spec parsed again (its success rule, its plan), a user's experiment module
    also looked up in `folder`; None when it no longer parses (an older spec, an experiment not found)."""
    try:
        with searching(folder):
            return parse(resolved, name="report", preset="")
    except (SpecError, ValueError, KeyError, TypeError):
        return None


def meta_view(meta: dict, train: dict, compiles: pd.DataFrame) -> dict:
    """The sweep's metadata as report.md lists it: spec, experiment (and whether its code changed since),
    device, wall and compile time, the matmul precision, and the solver's settings for a gradient-flow sweep."""
    view = {k: meta[k] for k in META_KEYS if k in meta}
    view["wall_time_s"] = float(meta.get("elapsed_s", 0.0))
    view["compiles"] = len(compiles)
    view["compile_time_s"] = round(float(compiles["seconds"].sum()), 2) if len(compiles) else 0.0
    engine = json.loads(meta.get("resolved_spec", "{}")).get("engine", {})
    platform = str(meta.get("device", "")).split(" ")[0]  # "cpu x1 (cpu)": the platform first
    view["matmul_precision"] = precision_label(engine.get("matmul_precision", EngineSpec.matmul_precision), platform)
    view["experiment_code"] = code_identity.state(meta)
    if train.get("give_up"):
        view["early_failure"] = early_failure_text(train["give_up"], train.get("give_up_pace", TrainSpec.give_up_pace))
    if train.get("integrator") == "gradient_flow":
        rtol, atol = train.get("rtol", TrainSpec.rtol), train.get("atol", TrainSpec.atol)
        view["integrator"] = f"gradient flow, diffrax Tsit5, rtol {number(rtol)}, atol {number(atol)}"
    return view


def early_failure_text(window: int, pace: float) -> str:
    """`train.give_up` in words (jaxmem.engine.program.hopeless): a failing run's final metrics are where it stopped."""
    return (
        f"on: a run stopped once its best, gaining {number(pace)}x what it gained over its last {window} evaluations "
        "every as many from then on, could not reach the threshold in its budget (its final metrics are where it "
        "stopped)"
    )


def effective_plan(planned: pd.DataFrame, experiment) -> pd.DataFrame:
    """The configs of the plan's runs (planned_runs) as their programs run them, like the stored runs'."""
    if planned.empty:
        return planned
    keys = ["run_id", "point", "seed", "lr"]
    configs = planned.drop(columns=keys).to_dict("records")
    effective = pd.DataFrame([experiment.effective(c) for c in configs], index=planned.index)
    return pd.concat([planned[keys], effective], axis=1)


def export_tables(out_dir: Path, runs: pd.DataFrame, searches: pd.DataFrame) -> list[Path]:
    """runs.csv and runs.parquet (jaxmem.report.export: effective config and final metrics as columns,
    the judged metric named); searches.csv and searches.parquet when the sweep searched. Rows come in
    the store's canonical order (load_results)."""
    written = write_table(runs, out_dir, "runs")
    return written + (write_table(searches, out_dir, "searches") if not searches.empty else [])


def last_result(out_dir: Path) -> float | None:
    """The Unix time of the newest row the store records (Store.last_write), None in an empty store."""
    store = Store(out_dir, verify=(), write=False)
    try:
        return store.last_write()
    finally:
        store.close()


def unfinished(out_dir: Path, meta: dict, raw_runs: pd.DataFrame, raw_searches: pd.DataFrame) -> Partial | None:
    """What report.md says of the sweep in `out_dir` when it is not finished (decided as `jaxmem status`
    decides it, jaxmem.persistence.progress); None when it is."""
    found = stored_progress(meta, len(raw_runs), len(raw_searches))
    if finished(found, out_dir):
        return None
    points = (raw_searches if found.search else raw_runs)["point"].nunique()
    return partial_of(found, points, lock_state(out_dir), last_result(out_dir))


def report(out_dir: str | Path, report_table: dict | None = None, renders: int = 3) -> Path:
    """Write the stored tables (export_tables) and the files of jaxmem.report.write_report into
    `out_dir`; return report.md's path. `report_table`: a `[report]` table to use instead of the one
    stored with the results (`jaxmem report DIR --spec FILE`); the store is left unchanged.

    The files are rendered into temporary ones, then moved into place together, under the folder's report
    lock, once the store is seen to hold what they show; a store written meanwhile with no run still writing
    it (a sweep that finished or stopped while its partial state was rendered) is rendered again, up to
    `renders` times. The sweep's own final report takes that lock too, so a report racing the sweep's end
    never leaves a partial report in a finished folder."""
    out_dir = Path(out_dir)
    with staged() as stage:
        seen = store_version(out_dir)
        path = render(out_dir, report_table)
        with committing(out_dir):
            again = renders > 1 and outdated(out_dir, seen)
            if not again:
                commit(stage, out_dir)
    return report(out_dir, report_table, renders - 1) if again else path


def store_version(out_dir: Path) -> tuple:
    """The store's version (Store.version): what any write changes."""
    store = Store(out_dir, verify=(), write=False)
    try:
        return store.version()
    finally:
        store.close()


def outdated(out_dir: Path, seen: tuple) -> bool:
    """Whether a report rendered from the store at version `seen` shows an outdated state: the store was
    written since, and no live run writes it now (while one does, its next report shows more)."""
    return store_version(out_dir) != seen and not lock_state(out_dir).startswith("running")


def render(out_dir: Path, report_table: dict | None = None) -> Path:
    """Write the report's files (see report); every table shows each run's effective config
    (jaxmem.report.export): what its program ran."""
    meta = load_results(out_dir, "meta").set_index("key")["value"].to_dict()
    resolved = json.loads(meta.get("resolved_spec", "{}"))
    if report_table is not None:
        resolved = {**resolved, "report": report_table}
    folder = meta.get("experiment_folder", "")
    experiment = find_experiment(meta["experiment"], folder)
    raw_runs = load_results(out_dir, "runs", expand=False)
    raw_searches = load_results(out_dir, "searches", expand=False)
    runs = expand_final_metrics(expand_config(effective_runs(raw_runs, experiment)))
    searches = expand_config(effective_searches(raw_searches, experiment))
    compiles = load_results(out_dir, "compiles")
    trajectories = load_results(out_dir, "trajectories")
    sweep = stored_sweep(resolved, folder)
    rule = sweep.success if sweep is not None else None
    train = resolved.get("train", {})
    metric = rule.metric if rule is not None else train.get("metric", TrainSpec.metric)
    export_tables(out_dir, exported_runs(raw_runs, metric, experiment), searches)
    source = f"stored with the results in {out_dir}" if report_table is None else "given with --spec"
    report_spec = stored_report_spec(resolved, source)
    report_spec = with_rule_defaults(report_spec, resolved.get("report", {}), rule)
    in_flight = not trajectories.empty and not set(trajectories["run_id"]) <= set(raw_runs["run_id"])
    paths = write_report(
        out_dir,
        report_spec,
        searches,
        runs,
        meta_view(meta, train, compiles),
        train,
        trajectories,
        effective_plan(planned_runs(sweep), experiment) if in_flight else None,
        success=rule,
        experiment=experiment,
        raw_runs=raw_runs,
        compiles=compiles,
        final_eval=load_results(out_dir, "final_eval") if resolved.get("final_eval") else None,
        final_axes=list(resolved.get("final_eval", {})),
        search_variable=resolved.get("search", {}).get("variable"),
        partial=unfinished(out_dir, meta, raw_runs, raw_searches),
        timeline=load_results(out_dir, "timeline", expand=False) if speculated(meta) else None,  # a result only then
        step_budget=budget_of(meta),
    )
    return paths[-1]
