"""`jaxmem report DIR`: tables, plot and report.md from whatever the store holds (also mid-sweep)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from jaxmem.experiments.registry import get as get_experiment
from jaxmem.plan.buckets import Bucket, padding_waste
from jaxmem.report import write_report
from jaxmem.report.final_metrics import expand_final_metrics
from jaxmem.report.references import reference_section
from jaxmem.report.rejected import rejected_section
from jaxmem.report.trajectory_data import planned_runs
from jaxmem.spec.sweep import TrainSpec, stored_report_spec
from jaxmem.persistence.store import expand_config, load_results


def report(out_dir: str | Path) -> Path:
    """Write runs.csv (final_metrics spread into final_<name> columns), report.md and the files of
    jaxmem.report.write_report (capacity.* or heatmap.*, trajectories.* with recorded trajectories)
    into `out_dir`; return report.md's path."""
    out_dir = Path(out_dir)
    meta = load_results(out_dir, "meta").set_index("key")["value"].to_dict()
    spec = json.loads(meta.get("resolved_spec", "{}"))
    raw_runs = load_results(out_dir, "runs", expand=False)
    runs = expand_final_metrics(expand_config(raw_runs))
    runs.to_csv(out_dir / "runs.csv", index=False)
    searches = load_results(out_dir, "searches")
    compiles = load_results(out_dir, "compiles")
    meta_view = {k: meta[k] for k in ("spec", "preset", "experiment", "device", "jaxmem_version") if k in meta}
    meta_view["wall_time_s"] = float(meta.get("elapsed_s", 0.0))
    meta_view["compiles"] = len(compiles)
    meta_view["compile_time_s"] = round(float(compiles["seconds"].sum()), 2) if len(compiles) else 0.0
    train = spec.get("train", {})
    if train.get("integrator") == "gradient_flow":  # the solver's settings belong next to its results
        rtol, atol = train.get("rtol", TrainSpec.rtol), train.get("atol", TrainSpec.atol)
        meta_view["integrator"] = f"gradient flow, diffrax Tsit5, rtol {rtol:g}, atol {atol:g}"
    trajectories = load_results(out_dir, "trajectories")
    in_flight = not trajectories.empty and not set(trajectories["run_id"]) <= set(raw_runs["run_id"])
    planned = planned_runs(spec) if in_flight else None
    report_spec = stored_report_spec(spec, f"stored with the results in {out_dir}")
    paths = write_report(out_dir, report_spec, searches, runs, meta_view, train, trajectories, planned)
    report_path = next(p for p in paths if p.name == "report.md")
    exp = get_experiment(meta["experiment"])
    sections = [
        report_path.read_text().rstrip(),
        rejected_section(raw_runs, exp, train),
        reference_section(out_dir, report_spec, raw_runs, searches, exp),
        buckets_section(meta, raw_runs, compiles),
    ]
    report_path.write_text("\n\n".join(s for s in sections if s))
    return report_path


def buckets_section(meta: dict, runs: pd.DataFrame, compiles: pd.DataFrame) -> str:
    """One row per compiled program: its padded shape, slots, compile time, runs and padding waste."""
    if compiles.empty:
        return ""
    exp = get_experiment(meta["experiment"])
    rows = [
        "## Buckets (one compiled program each)",
        "",
        "| bucket | padded shape | slots | compile s | runs | padding waste (padded / true FLOPs) |",
        "|---|---|---|---|---|---|",
    ]
    for c in compiles.drop_duplicates("bucket").itertuples():
        shape = json.loads(c.shape)
        bucket = Bucket(exp.name, tuple(sorted(shape.items())))
        mine = runs[runs["bucket"] == c.bucket] if len(runs) else runs
        configs = [json.loads(x) for x in mine["config"]] if len(mine) else []
        waste = f"{padding_waste(exp, bucket, [exp.complete(x) for x in configs]):.2f}x" if configs else "-"
        sizes = ", ".join(f"{k}={v}" for k, v in sorted(shape.items()) if type(v) is int)
        rows.append(f"| {c.bucket} | {sizes} | {c.slots} | {c.seconds:.2f} | {len(mine)} | {waste} |")
    return "\n".join(rows) + "\n"
