"""`[[report.agreement]]` (jaxmem.spec.report_agreement): per metric, how far apart the final values
of runs that differ only in one config field are. Writes agreement.csv (one row per pair and metric)
and returns report.md's section."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from jaxmem.report.files import write_csv
from jaxmem.report.runs import PREFIX, config_fields
from jaxmem.report.text import markdown_table, number
from jaxmem.report.verdicts import Claim, decided, stated
from jaxmem.spec.report_agreement import Agreement

IDENTITY = ("seed", "lr")


def relative(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """|a − b| / max(|a|, |b|), 0 where both are 0 (NaN where either is)."""
    scale = np.maximum(np.abs(a), np.abs(b))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(scale == 0, 0.0, np.abs(a - b) / scale)


def metric_columns(runs: pd.DataFrame, agreement: Agreement) -> list[str]:
    """The final-metric columns compared."""
    if agreement.metrics:
        return [f"{PREFIX}{m}" for m in agreement.metrics if f"{PREFIX}{m}" in runs]
    return [c for c in runs.columns if c.startswith(PREFIX) and c != "final_metric"]  # (the judged metric's copy)


def pairs(runs: pd.DataFrame, agreement: Agreement) -> pd.DataFrame:
    """One row per (pair of runs, metric): the value compared, its reference value and their differences."""
    field, metrics = agreement.field, metric_columns(runs, agreement)
    values = sorted(runs[field].dropna().unique().tolist(), key=str)
    reference = agreement.reference if agreement.reference is not None else (values[0] if values else None)
    keys = [c for c in config_fields(runs) if c != field]
    keys += list(IDENTITY)
    base = runs[runs[field] == reference]
    rows = []
    for other in (v for v in values if v != reference):
        joined = runs[runs[field] == other].merge(base, on=keys, suffixes=("", "_reference"))
        for metric in metrics:
            a, b = joined[metric].to_numpy(float), joined[f"{metric}_reference"].to_numpy(float)
            rows.append(
                pd.DataFrame(
                    {
                        "seed": joined["seed"],
                        "lr": joined["lr"],
                        field: other,
                        "reference": reference,
                        "metric": metric[len(PREFIX) :],
                        "value": a,
                        "reference_value": b,
                        "abs_diff": np.abs(a - b),
                        "rel_diff": relative(a, b),
                    }
                )
            )
    return pd.concat(rows, ignore_index=True) if rows else pd.DataFrame()


def agreement_section(agreement: Agreement, table: pd.DataFrame) -> str:
    """report.md's lines of one agreement: per metric the pairs and the largest differences."""
    lines = [f"### {agreement.label}", ""]
    if table.empty:
        return "\n".join(lines + [f"No pair of runs differs only in {agreement.field}."])
    body = []
    for metric, group in table.groupby("metric", sort=True):
        worst = float(group["rel_diff"].max())
        verdict = "–" if agreement.rtol is None else stated(agreed(agreement, metric, worst))
        body.append([metric, len(group), number(group["abs_diff"].max()), number(worst), verdict])
    expected = f" ≤ {number(agreement.rtol)}" if agreement.rtol is not None else ""
    others = ", ".join(str(v) for v in table[agreement.field].unique())
    lines.append(
        f"{agreement.field} = {others} against {agreement.field} = {table['reference'].iloc[0]!s}, paired on every "
        "other config field, seed and lr:"
    )
    headers = ["metric", "pairs", "largest abs. Δ", "largest rel. Δ", f"expected{expected}"]
    lines += ["", markdown_table(headers, body)]
    return "\n".join(lines)


def agreed(agreement: Agreement, metric: str, worst: float) -> Claim:
    """The claim that `metric` agrees within rtol: its largest relative difference over the pairs."""
    check = f"{metric}: largest relative difference ≤ {number(agreement.rtol)}"
    verdict = decided(worst <= agreement.rtol)
    return Claim(f"Agreement / {agreement.label}", check, verdict, worst, None, (0.0, agreement.rtol))


def agreement_sections(
    out_dir: Path, agreements: tuple[Agreement, ...], runs: pd.DataFrame, written: list[Path]
) -> list[str]:
    """Write agreement.csv; return report.md's section (nothing without agreements or runs)."""
    if not agreements or runs.empty:
        return []
    tables = [(a, pairs(runs, a)) for a in agreements if a.field in runs]
    if not tables:
        return []
    frames = [t.assign(agreement=a.label) for a, t in tables if not t.empty]
    if frames:
        written.append(write_csv(pd.concat(frames, ignore_index=True), out_dir / "agreement.csv"))
    intro = "## Agreement\n\nFinal metrics of runs that differ only in one config field (agreement.csv)."
    return [intro] + [agreement_section(a, t) for a, t in tables]
