"""The li_thesis checks the report cannot express, from a finished sweep's CSVs. The searches' n*
(censored quantiles), their linear fits with intercept and R², ratios and success maps are in each
sweep's report.md ([report] fit_linear, ratio, success_map); what is left:

    analyze.py rate RESULTS_DIR X [METRIC [LO]]
                                             the linear rate v per run: exp of the slope of ln(METRIC)
                                             against the step inside the relative window (LO, 1e-2) (default
                                             the spec's 1e-9; 1e-5 above float32's floor), and over
                                             the run's last half (trajectories.csv; the report's trajectory
                                             rates fit against ln(step) only)
    analyze.py trend RESULTS_DIR X METRIC [GROUP]
                                             per X (and per value of the column GROUP, if given)
                                             the mean ± std of final METRIC (runs.csv) or of a runs.csv
                                             column, Spearman ρ over every run, where the mean is smallest
                                             (an interior minimum is a U-shape), and least-squares lines of
                                             the mean against X and against 1/X with R² (the report's
                                             fit_linear is for searches only)
    analyze.py theory RESULTS_DIR X QUANTITY [COLUMN]
                                             R4.10: per X the chapter-4 bound QUANTITY (rate_gap, sample_bound,
                                             E_w, E, E_2 of jaxmem.experiments.li_thesis.theory, the median over
                                             TEACHERS draws W* ~ N(0, 1)) beside the measured mean of COLUMN
                                             (runs.csv, or the searches' n* median), and Spearman ρ between them
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

from jaxmem.experiments.li_thesis import gmm, theory

TEACHERS = 200  # W* draws per point for the theory's median
POINT_FIELDS = ("d", "K", "lam2", "mu1", "mu2", "sigma1", "sigma2", "cov")
WINDOW = (1e-9, 1e-2)  # the rate window (spec E4.3): METRIC(t) / METRIC(0) inside it


def linear_fit(x, y) -> tuple[float, float, float]:
    """Least squares y = a + b·x: (a, b, R²)."""
    b, a, r, *_ = stats.linregress(x, y)
    return a, b, r**2


def rate(trajectory: pd.DataFrame, metric: str, tail: bool = False, low: float = WINDOW[0]) -> tuple[float, float, int]:
    """(v, R², evaluations used) of ln(metric) against t over the window (or, with `tail`, over the
    last half of the evaluated steps), for one run's trajectory."""
    g = trajectory.sort_values("step")
    ratio = g[metric] / g[metric].iloc[0]
    inside = g[g["step"] >= g["step"].max() / 2] if tail else g[(ratio > low) & (ratio < WINDOW[1])]
    if len(inside) < 3:
        return float("nan"), float("nan"), len(inside)
    _, slope, r2 = linear_fit(inside["step"], np.log(inside[metric]))
    return float(np.exp(slope)), r2, len(inside)


def trend(runs: pd.DataFrame, x: str, column: str) -> None:
    """A missing value (a threshold never crossed, e.g. steps_to_threshold) counts as +∞ in the ranks
    and is left out of the means and fits."""
    table = runs.groupby(x)[column].agg(["mean", "std", "min", "max", "count"])
    table["missing"] = runs[column].isna().groupby(runs[x]).sum()
    print(table.to_string())
    ranked = runs[column].fillna(np.inf)
    print(f"Spearman ρ({x}, {column}) over {len(runs)} runs = {stats.spearmanr(runs[x], ranked).statistic:.3f}")
    finite = table[np.isfinite(table["mean"])]
    where = int(np.argmin(finite["mean"].values))
    kind = "interior" if 0 < where < len(finite) - 1 else "at an end"
    print(f"smallest mean at {x} = {finite.index[where]} ({kind} of {len(finite)} points with a mean)")
    xs = finite.index.values.astype(float)
    if len(finite) >= 3:
        for name, values in ((x, xs), (f"1/{x}", 1.0 / xs)):
            if np.all(np.isfinite(values)):
                a, b, r2 = linear_fit(values, finite["mean"].values)
                print(f"mean = a + b·{name}: a = {a:.4g}, b = {b:.4g}, R² = {r2:.3f}")


def predicted(point: pd.Series, quantity: str) -> float:
    """The median over teacher draws of a theory quantity at one sweep point."""
    d, k = int(point["d"]), int(point["K"])
    spectrum = np.asarray(gmm.spectrum(d, gmm.COVARIANCES.index(point["cov"])))
    rng = np.random.default_rng(0)  # the same teachers at every point
    values = []
    for _ in range(TEACHERS):
        psi = theory.mixture(
            rng.normal(size=(d, k)),
            point["lam2"],
            (point["mu1"], point["mu2"]),
            (point["sigma1"], point["sigma2"]),
            spectrum,
        )
        if quantity in ("rate_gap", "sample_bound"):
            values.append(getattr(theory, quantity)(psi))
        else:
            values.append(theory.error_factors(psi)[quantity])
    return float(np.median(values))


def overlay(folder: Path, x: str, quantity: str, column: str | None) -> None:
    if (folder / "searches.csv").exists():
        runs = pd.read_csv(folder / "searches.csv")
        side = runs["censored"].fillna("")
        answer = runs["capacity"].where(side == "", np.where(side == "above", np.inf, 0.0))
        measured = answer.groupby(runs[x]).median().rename("n* median (censored as ±∞)")
    else:
        runs = pd.read_csv(folder / "runs.csv")
        name = column if column in runs.columns else f"final_{column}"
        measured = runs.groupby(x)[name].mean().rename(f"mean {name}")
    points = runs.groupby(x)[list(POINT_FIELDS)].first()
    table = pd.concat([measured, points.apply(lambda p: predicted(p, quantity), axis=1).rename(quantity)], axis=1)
    print(table.to_string())
    rho = stats.spearmanr(table.iloc[:, 0], table.iloc[:, 1]).statistic
    print(f"Spearman ρ(measured, predicted {quantity}) over {len(table)} points = {rho:.3f}")


def main(argv: list[str]) -> None:
    if len(argv) < 3 or argv[0] not in ("rate", "trend", "theory"):
        sys.exit(__doc__)
    what, folder, x = argv[0], Path(argv[1]), argv[2]
    if what == "rate":
        metric = argv[3] if len(argv) > 3 else "grad_norm"
        low = float(argv[4]) if len(argv) > 4 else WINDOW[0]
        runs = pd.read_csv(folder / "trajectories.csv")
        for key, g in runs.groupby([x, "seed"]):
            fall = g.sort_values("step")[metric].iloc[[0, -1]].values
            print(key, f"{metric} fell {fall[0] / fall[1]:.3g}x")
            for name, tail in (("window", False), ("last half", True)):
                v, r2, used = rate(g, metric, tail, low)
                print(f"  {name}: v = {v:.6f}, 1 - v = {1 - v:.3e}, R² = {r2:.4f} ({used} evaluations)")
    elif what == "theory":
        overlay(folder, x, argv[3], argv[4] if len(argv) > 4 else None)
    else:
        runs = pd.read_csv(folder / "runs.csv")
        column = argv[3] if argv[3] in runs.columns else f"final_{argv[3]}"
        groups = runs.groupby(argv[4]) if len(argv) > 4 else [("all runs", runs)]
        for value, part in groups:
            print(f"-- {argv[4] if len(argv) > 4 else ''} {value}")
            trend(part, x, column)


if __name__ == "__main__":
    main(sys.argv[1:])
