"""Trajectories as one wide table: a row per (run, evaluated step) with the run's config and every metric.

The store keeps trajectories in long format (run_id, step, JSON metrics), and a run's config only once
it finishes (table `runs`). Mid-sweep, the configs of runs still in flight come from the sweep's plan
(`planned_runs`: the grid points × seeds × learning rates of the resolved spec, with the engine's run
ids); runs of neither (e.g. probes of a search still open) keep empty config cells.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pandas as pd

from jaxmem.plan.runs import make_run
from jaxmem.report.runs import config_fields, parse_metrics
from jaxmem.spec.sweep import SweepSpec

RUN_KEYS = ("run_id", "status", "point", "seed", "lr")
EVALUATION_COLUMNS = ("step", "time")  # a config field of one of these names is config_<name> in the wide table


@dataclasses.dataclass(frozen=True)
class Trajectories:
    """`frame`: run_id, step, time (= step · lr), status, point, seed, lr, the config `fields` (one named
    step or time as config_step, config_time), the `metrics`; sorted by run then step. `runs`: one row
    per run with RUN_KEYS and the fields under their own names."""

    frame: pd.DataFrame
    runs: pd.DataFrame
    fields: list[str]
    metrics: list[str]


def planned_runs(spec: SweepSpec | None) -> pd.DataFrame:
    """Run ids and configs of a grid sweep's plan (search sweeps, and a stored spec that no longer
    parses, None: empty)."""
    if spec is None or spec.search is not None:
        return pd.DataFrame()
    rows = []
    for point in spec.points:
        for seed in spec.seeds:
            for lr in spec.train.learning_rates:
                run = make_run(point, seed, lr, None, None, 0)
                rows.append({"run_id": run.run_id, "point": run.point, "seed": seed, "lr": lr, **run.config})
    return pd.DataFrame(rows)


def run_table(runs: pd.DataFrame, planned: pd.DataFrame | None, run_ids) -> tuple[pd.DataFrame, list[str]]:
    """One row per run of `run_ids`: status ("finished", "diverged", or "running" when the store has no
    row yet), point, seed, lr and the config fields (from `runs`, else from `planned`)."""
    fields = config_fields(runs) if not runs.empty else []
    known = pd.DataFrame(columns=list(RUN_KEYS))
    if not runs.empty:
        known = runs[[c for c in ("run_id", "point", "seed", "lr") if c in runs] + fields].copy()
        diverged = runs["diverged"].fillna(False).astype(bool) if "diverged" in runs else False
        known["status"] = np.where(diverged, "diverged", "finished")
    frames = [known]
    if planned is not None and not planned.empty:
        extra = planned[~planned["run_id"].isin(known["run_id"])].copy()
        extra["status"] = "running"
        fields += [c for c in planned.columns if c not in RUN_KEYS and c not in fields]
        frames.append(extra)
    frames = [f for f in frames if not f.empty]
    table = pd.concat(frames, ignore_index=True) if frames else known
    wanted = pd.DataFrame({"run_id": list(dict.fromkeys(run_ids))})
    table = wanted.merge(table, on="run_id", how="left")
    table["status"] = table["status"].fillna("running")
    for column in RUN_KEYS:
        if column not in table:
            table[column] = np.nan
    table["lr"] = pd.to_numeric(table["lr"], errors="coerce")
    fields = [f for f in fields if f in table]
    return table[list(RUN_KEYS) + fields], fields


def load_trajectories(raw: pd.DataFrame, runs: pd.DataFrame, planned: pd.DataFrame | None = None) -> Trajectories:
    """The wide table of the store's `trajectories` rows (run_id, step, metrics JSON); `runs` is the
    expanded runs table (load_results), `planned` the plan of in-flight runs (planned_runs)."""
    raw = raw.sort_values(["run_id", "step"], kind="stable").reset_index(drop=True)
    values = pd.DataFrame([parse_metrics(m) for m in raw["metrics"]], index=raw.index)
    metrics = [str(c) for c in values.columns]
    table, fields = run_table(runs, planned, raw["run_id"])
    fields = [f for f in fields if f not in metrics]
    wide = table[list(RUN_KEYS) + fields].rename(columns={f: f"config_{f}" for f in EVALUATION_COLUMNS})
    frame = raw[["run_id", "step"]].merge(wide, on="run_id", how="left")
    frame["step"] = pd.to_numeric(frame["step"])
    frame.insert(2, "time", frame["step"] * frame["lr"])
    frame = pd.concat([frame, values.astype(float)], axis=1)
    return Trajectories(frame=frame, runs=table[list(RUN_KEYS) + fields], fields=fields, metrics=metrics)


def names_of(row: dict, fields: list[str]) -> dict[str, float]:
    """The numbers an expression may use for one run: its numeric config fields, lr and seed."""
    names = {}
    for key in [*fields, "lr", "seed"]:
        value = row.get(key)
        if hasattr(value, "item"):
            value = value.item()
        if isinstance(value, (int, float)) and not isinstance(value, bool) and not math.isnan(value):
            names[key] = value
    return names


def common_names(rows: pd.DataFrame, fields: list[str]) -> dict[str, float]:
    """The names (names_of) that take one value over all of `rows` whose config is known: what a panel
    or a group shares."""
    records = [names_of(r, fields) for r in rows.to_dict("records") if isinstance(r.get("point"), str)]
    if not records:
        return {}
    return {k: v for k, v in records[0].items() if all(r.get(k) == v for r in records[1:])}


def varying(runs: pd.DataFrame, fields: list[str]) -> list[str]:
    """The fields (and lr) taking more than one value over `runs`."""
    return [c for c in [*fields, "lr"] if c in runs and runs[c].astype(str).nunique() > 1]
