"""Read-offs the report cannot make yet, for the chapter 6/7 sweeps (README_ch6_ch7.md, "Engine and
report requests"; the minimal l_ts is in report.md, `[report.final_eval] readoff`): from a sweep's
output folder,

    python sweeps/li_thesis/ch6_ch7_readoff.py prune OUT [--metric ood_hinge] [--tol 0.02]
        per (seed, order, α'): the largest pruning rate up to which the metric stays within tol of the
        unpruned model's, beside the run's small_fraction (R6.8).
"""

from __future__ import annotations

import argparse

import numpy as np
import pandas as pd

from jaxmem.persistence.store import load_results


def prune_knee(out: str, metric: str, tol: float) -> None:
    frame = load_results(out, "final_eval")
    rows = []
    for (seed, order, alpha), curve in frame.groupby(["seed", "prune_order", "alpha_test"]):
        curve = curve.sort_values("prune_rate")
        base = curve[metric].iloc[0]
        within = (curve[metric] - base).to_numpy() <= tol
        knee = curve["prune_rate"].iloc[np.argmin(within) - 1] if not within.all() else curve["prune_rate"].iloc[-1]
        rows.append(
            {
                "seed": seed,
                "order": order,
                "alpha_test": alpha,
                "flat_up_to": knee,
                "small_fraction": curve["small_fraction"].iloc[0],
            }
        )
    table = pd.DataFrame(rows)
    print(f"largest pruning rate with {metric} within {tol} of the unpruned model's (mean, min–max over seeds):")
    print(
        table.groupby(["order", "alpha_test"])[["flat_up_to", "small_fraction"]]
        .agg(["mean", "min", "max"])
        .round(3)
        .to_string()
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    prune = sub.add_parser("prune")
    prune.add_argument("out")
    prune.add_argument("--metric", default="ood_hinge")
    prune.add_argument("--tol", type=float, default=0.02)
    args = parser.parse_args()
    prune_knee(args.out, args.metric, args.tol)


if __name__ == "__main__":
    main()
