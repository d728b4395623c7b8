"""The li_thesis analyses the report cannot do yet, from a finished sweep's CSVs (a stand-in until the
report has linear fits with intercept, success maps and rate fits):

    analyze.py nstar RESULTS_DIR X         n*(0.5), n*(0.9) per X (searches.csv); fits N* = a + b·X and a + b·X^-2
    analyze.py rate RESULTS_DIR X          the linear rate v per run (trajectories.csv, grad_norm)
    analyze.py trend RESULTS_DIR X METRIC  mean ± std of the final METRIC per X (runs.csv), Spearman ρ

n*(q): with nested training sets a seed's success is monotone in n, so the success rate over seeds
crosses q at the q-quantile of the per-seed thresholds (a censored search counts as +∞).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

WINDOW = (1e-5, 1e-2)  # the rate window: ‖∇f_n(W_t)‖ / ‖∇f_n(W_0)‖ inside it (float32 stand-in, README)


def linear_fit(x, y) -> tuple[float, float, float]:
    """Least squares y = a + b·x: (a, b, R²)."""
    b, a, r, *_ = stats.linregress(x, y)
    return a, b, r**2


def nstar(folder: Path, x: str) -> pd.DataFrame:
    searches = pd.read_csv(folder / "searches.csv")
    value = searches["threshold"].where(searches["censored"].isna() | (searches["censored"] == ""), np.inf)
    table = searches.assign(n=value).groupby(x)["n"]
    return pd.DataFrame({"n*(0.5)": table.quantile(0.5), "n*(0.9)": table.quantile(0.9), "seeds": table.size()})


def rate(trajectory: pd.DataFrame) -> tuple[float, float]:
    """(v, R²) of ln‖∇f_n‖ against t over the window, for one run's trajectory."""
    g = trajectory.sort_values("step")
    ratio = g["grad_norm"] / g["grad_norm"].iloc[0]
    inside = g[(ratio > WINDOW[0]) & (ratio < WINDOW[1])]
    if len(inside) < 3:
        return float("nan"), float("nan")
    _, slope, r2 = linear_fit(inside["step"], np.log(inside["grad_norm"]))
    return float(np.exp(slope)), r2


def main(argv: list[str]) -> None:
    what, folder, x = argv[0], Path(argv[1]), argv[2]
    if what == "nstar":
        table = nstar(folder, x)
        print(table.to_string())
        finite = table[np.isfinite(table["n*(0.5)"])]
        for name, xs in (("x", finite.index.values), ("x^-2", finite.index.values**-2.0)):
            if len(finite) >= 3:
                print(name, "a, b, R² =", linear_fit(xs, finite["n*(0.5)"]))
    elif what == "rate":
        runs = pd.read_csv(folder / "trajectories.csv")
        for key, g in runs.groupby([x, "seed"]):
            v, r2 = rate(g)
            print(key, f"v = {v:.6f}, 1 - v = {1 - v:.3e}, R² = {r2:.4f}")
    else:
        runs = pd.read_csv(folder / "runs.csv")
        metric = f"final_{argv[3]}"
        print(runs.groupby(x)[metric].agg(["mean", "std", "count"]).to_string())
        print("Spearman ρ =", stats.spearmanr(runs[x], runs[metric]).statistic)


if __name__ == "__main__":
    main(sys.argv[1:])
