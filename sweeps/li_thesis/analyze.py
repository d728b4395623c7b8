"""The li_thesis check the report cannot express, from a finished sweep's CSVs. The fits of n*, T_conv
and the final metrics against the theory's variable, Spearman ρ and U-shape checks are `[[report.relation]]`
tables in each sweep's report.md, and the linear rates v are the rate sweeps' `[report.trajectory] rates`
(`scale = "exp"`); what is left:

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
    if len(argv) < 3 or argv[0] != "theory":
        sys.exit(__doc__)
    overlay(Path(argv[1]), argv[2], argv[3], argv[4] if len(argv) > 4 else None)


if __name__ == "__main__":
    main(sys.argv[1:])
