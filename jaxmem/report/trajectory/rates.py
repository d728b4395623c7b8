"""Asymptotic rates and monotone trends along trajectories (`[report.trajectory] rates, trends`).

Rate: per run, the least-squares slope of the metric against ln(step) (scale "log", e.g. ‖W_t‖ ≈
‖W^mm‖·ln t, Thrampoulidis 2024 spec §4.5), of ln(metric) against ln(step) ("loglog": the exponent
of a power law, e.g. CE − ℋ = Θ(1/t)) or of ln(metric) against step ("exp": ln v of a linear rate,
metric ∝ v^step), over the evaluations in the last `decades` decades of steps (step ≥ last step /
10^decades, step > 0), or with a `window` over those whose metric / the run's first value lies in
(lo, hi] (the linear phase, before a float floor). `predicted` is evaluated per run with its config fields,
lr, seed and its metrics at the last evaluation; ratio = slope / predicted, within when
|ratio − 1| ≤ tolerance.

Trend: per run, the consecutive evaluations whose metric moves against the direction by more than
tol·|value| (float round-off is not a violation), and the metric's last value.

A rate or trend with `where` is measured on the runs with those config values only. Verdicts, per (rate or
trend, panel, series), under jaxmem.report.verdicts' rule:
- rate: the mean of the runs' fitted / predicted ratios and its 95 % t-interval over the runs (n − 1 degrees of
  freedom, jaxmem.report.verdicts.mean_in_band); PASS when the interval lies within [1 − tolerance,
  1 + tolerance], FAIL when wholly outside it, INCONCLUSIVE when it crosses an edge or with fewer than 3 runs;
  no verdict without a prediction;
- trend: FAIL when some run moves against the direction (a counterexample decides), PASS when none does over
  3 or more runs, INCONCLUSIVE with fewer.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pandas as pd

from jaxmem.report.trajectory.data import load_trajectories, names_of
from jaxmem.report.trajectory.escape import fit_line
from jaxmem.spec.expr import ExpressionError, evaluate
from jaxmem.report.verdicts import MIN_X, Verdict, decided, mean_in_band, too_few_x
from jaxmem.spec.report_tables import Rate, TrajectorySpec, Trend

MIN_RUNS = MIN_X  # runs a rate's or a trend's verdict needs

RATES_CSV = "rates.csv"


def run_rate(run: pd.DataFrame, rate: Rate, names: dict) -> dict:
    """One run's fitted slope over its last decades, with the predicted slope and their ratio."""
    steps = run["step"].to_numpy(float)
    values = run[rate.metric].to_numpy(float)
    last = steps.max() if steps.size else math.nan
    keep = (steps > 0) & np.isfinite(values)
    if rate.window is None:
        keep &= steps >= last / 10**rate.decades
    else:
        ratio = values / values[np.isfinite(values)][0] if np.isfinite(values).any() else values
        keep &= (ratio > rate.window[0]) & (ratio <= rate.window[1])
    logged = rate.scale in ("loglog", "exp")
    if logged:
        keep &= values > 0
    y = np.log(values[keep]) if logged else values[keep]
    fit = fit_line(steps[keep] if rate.scale == "exp" else np.log(steps[keep]), y)
    predicted = math.nan
    if rate.predicted is not None:
        try:
            predicted = float(evaluate(rate.predicted, names))
        except ExpressionError as err:
            raise ValueError(f"report.trajectory.rates ({rate.label}): {err}") from None
    ratio = fit["slope"] / predicted if predicted else math.nan
    return {
        "rate": rate.label,
        "from_step": float(steps[keep].min()) if keep.any() else math.nan,
        "to_step": last if rate.window is None or not keep.any() else float(steps[keep].max()),
        "n": fit["n"],
        "slope": fit["slope"],
        "r2": fit["r2"],
        "predicted": predicted,
        "ratio": ratio,
        "within": abs(ratio - 1) <= rate.tolerance if math.isfinite(ratio) else None,
    }


def run_trend(run: pd.DataFrame, trend: Trend) -> dict:
    """One run's moves against the trend's direction and its last value."""
    values = run[trend.metric].to_numpy(float)
    values = values[np.isfinite(values)]
    moves = np.diff(values) * (1 if trend.direction == "increasing" else -1)
    against = moves < -trend.tol * np.abs(values[1:])
    return {
        "trend": trend.label,
        "moves": int(moves.size),
        "against": int(against.sum()),
        "worst": float(-moves.min()) if moves.size and against.any() else 0.0,
        "first": float(values[0]) if values.size else math.nan,
        "last": float(values[-1]) if values.size else math.nan,
    }


def rate_tables(frame: pd.DataFrame, runs: pd.DataFrame, spec: TrajectorySpec):
    """(rates, trends): one row per (run, rate) and per (run, trend), with run_id, panel and series."""
    rate_rows, trend_rows = [], []
    by_run = dict(tuple(frame.groupby("run_id", sort=False)))
    for run in runs.to_dict("records"):
        if run["run_id"] not in by_run:
            continue
        evaluations = by_run[run["run_id"]].sort_values("step")
        names = names_of(evaluations.iloc[-1].to_dict(), list(evaluations.columns))  # config fields and metrics
        label = {"run_id": run["run_id"], "panel": run["panel"], "series": run["series"], "seed": run["seed"]}
        rate_rows += [{**label, **run_rate(evaluations, r, names)} for r in spec.rates if kept(r.where, run)]
        trend_rows += [{**label, **run_trend(evaluations, t)} for t in spec.trends if kept(t.where, run)]
    return pd.DataFrame(rate_rows), pd.DataFrame(trend_rows)


def kept(where: tuple, run: dict) -> bool:
    """Whether a run's config has one of the values `where` keeps for each of its fields."""
    return all(field in run and run[field] in values for field, values in where)


def rate_verdict(ratios: np.ndarray, tolerance: float) -> tuple[Verdict | None, float, tuple[float, float]]:
    """(verdict, mean ratio, its 95 % interval) of one group's fitted / predicted ratios (see the module's
    docstring); verdict None where no run has a prediction."""
    return mean_in_band(ratios, (1 - tolerance, 1 + tolerance), "run")


def trend_verdict(against: np.ndarray) -> Verdict:
    """A trend's verdict from each run's count of moves against its direction (see the module's docstring)."""
    moved = int((against > 0).sum())
    if moved:
        return decided(False, f"{moved} of {against.size} runs move against it")
    return too_few_x(against.size, MIN_RUNS, "run") or decided(True)


def rate_columns(raw: pd.DataFrame | None, runs: pd.DataFrame, spec: TrajectorySpec) -> pd.DataFrame:
    """`runs` with `rate_<metric>` and `rate_<metric>_r2` per run: the fitted slope (and its R²) of the first
    rate on each metric (a relation's quantities); `runs` unchanged without rates or trajectories."""
    first = {}
    for rate in spec.rates:
        first.setdefault(rate.metric, rate)
    if not first or raw is None or raw.empty:
        return runs
    traj = load_trajectories(raw, runs)
    labelled = traj.runs.assign(panel="all", series="all")
    only_first = dataclasses.replace(spec, rates=tuple(first.values()), trends=())
    rates, _ = rate_tables(traj.frame, labelled, only_first)
    metric_of = {rate.label: rate.metric for rate in first.values()}
    rates = rates.assign(metric=rates["rate"].map(metric_of))
    wide = rates.pivot(index="run_id", columns="metric", values=["slope", "r2"])
    columns = {f"rate_{m}{end}": wide[(value, m)] for m in first for value, end in (("slope", ""), ("r2", "_r2"))}
    return runs.merge(pd.DataFrame(columns).rename_axis("run_id").reset_index(), on="run_id", how="left")
