"""report.md sections about the sweep itself: its metadata, its runs, and its compiled programs."""

from __future__ import annotations

import json

import pandas as pd

from jaxmem.experiments.interface import Experiment
from jaxmem.plan.buckets import Bucket, padding_waste
from jaxmem.report.success import rule_text
from jaxmem.report.text import duration, markdown_table, number
from jaxmem.spec.sweep import SuccessRule

META_FIELDS = (
    ("spec", "Spec"),
    ("preset", "Preset"),
    ("experiment", "Experiment"),
    ("experiment_code", "Experiment code"),
    ("device", "Device"),
    ("matmul_precision", "Matmul precision"),
    ("early_failure", "Early-failure rule"),
    ("jaxmem_version", "jaxmem version"),
    ("wall_time_s", "Total wall time"),
)


def meta_section(meta: dict) -> str:
    """Bullets for the known meta keys present (an empty one, e.g. the preset of a spec without presets, left
    out), then any other scalar keys."""
    known = dict(META_FIELDS)
    bullets = []
    for key, name in META_FIELDS:
        if meta.get(key) not in (None, ""):
            value = duration(float(meta[key])) if key == "wall_time_s" else meta[key]
            bullets.append(f"- {name}: {number(value)}")
    bullets += [
        f"- {key}: {number(value)}"
        for key, value in sorted(meta.items())
        if key not in known and isinstance(value, (str, int, float, bool))
    ]
    return "## Sweep\n\n" + ("\n".join(bullets) if bullets else "No sweep metadata recorded.")


def runs_section(runs: pd.DataFrame, rule: SuccessRule | None) -> str:
    """Counts of probe runs, divergences and successes (with the success rule), wall time, compile columns."""
    if runs.empty:
        return "## Runs\n\nNo probe runs recorded."
    bullets = [f"- Probe runs: {len(runs)}"]
    if rule is not None:
        bullets.append(f"- Success: {rule_text(rule)}")
    for column, name in (("diverged", "Diverged"), ("success", "Successful")):
        if column in runs:
            bullets.append(f"- {name}: {int(runs[column].fillna(False).astype(bool).sum())}")
    if "wall_time_s" in runs:
        bullets.append(f"- Total run wall time: {duration(float(runs['wall_time_s'].sum()))}")
    for column in (c for c in runs.columns if "compile" in c):
        bullets.append(f"- {column} (total): {number(pd.to_numeric(runs[column], errors='coerce').sum())}")
    return "## Runs\n\n" + "\n".join(bullets)


def buckets_section(exp: Experiment, runs: pd.DataFrame, compiles: pd.DataFrame) -> str:
    """One row per compiled program: its padded shape, slots, compile time, runs and padding waste.
    `runs` are the stored runs (JSON config); a bucket compiled twice shows its first compile."""
    if compiles.empty:
        return ""
    rows = []
    for c in compiles.drop_duplicates("bucket").itertuples():
        shape = json.loads(c.shape)
        bucket = Bucket(exp.name, tuple(sorted(shape.items())))
        mine = runs[runs["bucket"] == c.bucket] if len(runs) else runs
        configs = [json.loads(x) for x in mine["config"]] if len(mine) else []
        waste = number(padding_waste(exp, bucket, [exp.complete(x) for x in configs]), 2) + "x" if configs else "-"
        sizes = ", ".join(f"{k}={v}" for k, v in sorted(shape.items()) if type(v) is int)
        rows.append([c.bucket, sizes, c.slots, number(c.seconds, 2), len(mine), waste])
    headers = ["bucket", "padded shape", "slots", "compile s", "runs", "padding waste (padded / true FLOPs)"]
    return "## Buckets (one compiled program each)\n\n" + markdown_table(headers, rows)
