"""The predicted rates of `[report.trajectory] rates` drawn on trajectory.png: per panel and series, the
predicted law over the steps its slope was fitted on (jaxmem.report.trajectory.rates), anchored at the
series' mean at the last of them.

scale "log":    y(t) = y_end + predicted · ln(t / t_end)     (e.g. ‖P⊥W_t‖ ≈ ‖W^mm‖·ln t)
scale "loglog": y(t) = y_end · (t / t_end)^predicted           (e.g. CE − ℋ = Θ(t⁻¹))
scale "exp":    y(t) = y_end · exp(predicted · (s − s_end))    (s the step: a linear rate v = e^predicted)

The guide spans only the fitted steps (never past the data); x is in the plot's units (step or time):
the first two laws' slopes do not depend on that unit, and "exp" is drawn against the step's x.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pandas as pd

from jaxmem.spec.report_tables import Rate, TrajectorySpec

POINTS = 50


@dataclasses.dataclass(frozen=True)
class Guide:
    """One predicted-rate line of one panel (one per series): its points and legend label."""

    x: np.ndarray
    y: np.ndarray
    label: str


def predicted_law(
    rate: Rate, predicted: float, x: np.ndarray, x_end: float, y_end: float, per_step: float = 1.0
) -> np.ndarray:
    """The predicted curve through (x_end, y_end) (see the module doc); `per_step`: x units per step."""
    if rate.scale == "loglog":
        return y_end * (x / x_end) ** predicted
    if rate.scale == "exp":
        return y_end * np.exp(predicted * (x - x_end) / per_step)
    return y_end + predicted * np.log(x / x_end)


def series_guide(rate: Rate, rows: pd.DataFrame, curves: pd.DataFrame, x: str, metric_column: str) -> Guide | None:
    """The guide of one series: `rows` are its runs' rows of the rates table, `curves` its evaluations."""
    predicted = float(pd.to_numeric(rows["predicted"], errors="coerce").mean())
    start, end = float(rows["from_step"].min()), float(rows["to_step"].max())
    fitted = curves[(curves["step"] >= start) & (curves["step"] <= end) & (curves[x] > 0)]
    if not math.isfinite(predicted) or fitted.empty:
        return None
    means = fitted.groupby(x)[metric_column].mean().dropna()
    if means.empty or (rate.scale != "log" and means.iloc[-1] <= 0):
        return None
    x_end, y_end = float(means.index[-1]), float(means.iloc[-1])
    xs = np.geomspace(float(means.index[0]), x_end, POINTS)
    per_step = float((fitted[x] / fitted["step"]).iloc[-1])
    return Guide(xs, predicted_law(rate, predicted, xs, x_end, y_end, per_step), f"predicted: {rate.label}")


def rate_guides(
    spec: TrajectorySpec, rates: pd.DataFrame | None, frame: pd.DataFrame, panel_of
) -> dict[str, list[Guide]]:
    """Per plot panel, the guides of the rates drawn there. `rates`: the rates table (rate_tables), None
    without rates;
    `frame`: the wide evaluations (run_id, step, spec.x, the metrics); `panel_of(metric, group)`: the
    plot panel holding that metric of that group panel, None where it is not drawn."""
    guides: dict[str, list[Guide]] = {}
    if rates is None or rates.empty:
        return guides
    for rate in spec.rates:
        mine = rates[rates["rate"] == rate.label]
        for (group, series), rows in mine.groupby(["panel", "series"], sort=False):
            panel = panel_of(rate.metric, group)
            if panel is None:
                continue
            curves = frame[frame["run_id"].isin(rows["run_id"])]
            guide = series_guide(rate, rows, curves, spec.x, rate.metric)
            if guide is not None:
                guides.setdefault(panel, []).append(guide)
    return guides
