"""`[[report.relation]]` (jaxmem.spec.report_relations): a per-run quantity against an expression of
the config. Per group and x value: the rows, how many lack a value, and the median, quartiles and
min–max of y. Then a fit over the finite medians, Spearman ρ over every row, and whether the smallest
median is interior. Writes relations.csv, relation_fits.csv and relations.png, and returns report.md's
section.

A row without a value is a run whose threshold was never reached, or a search censored outside its
range. With `missing = "drop"` it is left out. With "high" or "low" it ranks above or below every value
(+∞ or −∞ in ρ and the quantiles, so a median can be infinite); the fit still uses finite medians only.
A censored search ranks on its own side whatever `missing` says (unless "drop"): above its range at
+∞, below it (an answer at most the lowest value probed) at −∞.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

from jaxmem.report.capacity.linear import checked, fit_line, fit_verdicts, judged, passed
from jaxmem.report.capacity.searches import censored_side
from jaxmem.report.expressions import row_values
from jaxmem.report.files import write_csv
from jaxmem.report.relations_plot import plot_relations
from jaxmem.report.text import group_labels, markdown_table, mean_std, number
from jaxmem.spec.report_relations import Relation
from jaxmem.spec.tables import names_of

FILL = {"high": math.inf, "low": -math.inf}
SIDE_FILL = {"above": math.inf, "below": -math.inf}
NUMBER = re.compile(r"(-?\d+(?:\.\d+)?(?:e-?\d+)?)")
MISSING_WORDS = {"drop": "left out", "high": "ranked above every value", "low": "ranked below every value"}


def relation_rows(relation: Relation, runs: pd.DataFrame, searches: pd.DataFrame) -> pd.DataFrame:
    """One row per run (per search when y uses `capacity`): group, x, y (NaN: no value) and a censored
    search's `side` ("above", "below"; "" otherwise)."""
    frame = runs.assign(side="")
    if relation.over_searches:
        side = censored_side(searches) if not searches.empty else ""
        frame = searches.assign(capacity=searches["capacity"].where(side == ""), side=side)
        frame = with_run_metrics(frame, runs, sorted(n for n in names_of(relation.x) if n.startswith("final_")))
    for name, values in relation.where:
        frame = frame[frame[name].isin(values)] if name in frame else frame.iloc[:0]
    if frame.empty:
        return pd.DataFrame(columns=["group", "x", "y", "side"])
    x, y = row_values(relation.x, frame), row_values(relation.y, frame)
    group = group_labels(frame, list(relation.group_by))
    return pd.DataFrame({"group": group, "x": x, "y": y, "side": frame["side"].to_numpy()})


def with_run_metrics(searches: pd.DataFrame, runs: pd.DataFrame, metrics: list[str]) -> pd.DataFrame:
    """The searches with each of `metrics` as the median over the search's runs (same point and seed)."""
    if not metrics or searches.empty:
        return searches
    medians = runs.groupby(["point", "seed"])[metrics].median().reset_index()
    return searches.drop(columns=[m for m in metrics if m in searches]).merge(medians, on=["point", "seed"], how="left")


def natural(label: str) -> list:
    """A sort key that orders the numbers inside labels by value ("n=50" before "n=100")."""
    return [(0, float(part), "") if NUMBER.fullmatch(part) else (1, 0.0, part) for part in NUMBER.split(label) if part]


def ranked(rows: pd.DataFrame, missing: str) -> np.ndarray:
    """The values of `rows` that count: a row without one left out ("drop") or put at ±∞ ("high",
    "low"; a censored search at the side it is censored on)."""
    if missing not in FILL:
        return rows["y"].dropna().to_numpy(float)
    fill = rows["side"].map(SIDE_FILL).fillna(FILL[missing])
    return rows["y"].fillna(fill).to_numpy(float)


def quartiles(y: np.ndarray) -> list[float]:
    """q25, median, q75, interpolated linearly between order statistics; a quantile that interpolates
    towards ±∞ is ±∞ (a bound). NaN without values."""
    if not y.size:
        return [math.nan] * 3
    ordered = np.sort(y)
    return [interpolated(ordered, q) for q in (0.25, 0.5, 0.75)]


def interpolated(ordered: np.ndarray, q: float) -> float:
    """The q-quantile of sorted values (numpy's "linear" rule, without ∞ − ∞)."""
    position = q * (ordered.size - 1)
    low, high = ordered[math.floor(position)], ordered[math.ceil(position)]
    weight = position - math.floor(position)
    if weight == 0 or low == high:
        return float(low)
    return float(high) if math.isinf(high) else float(low) if math.isinf(low) else float(low + weight * (high - low))


def cell(value: float) -> str:
    """A table cell: ∞ / −∞ for a missing value that ranks, else the number."""
    return ("∞" if value > 0 else "−∞") if math.isinf(value) else number(value)


def per_x(rows: pd.DataFrame, missing: str) -> pd.DataFrame:
    """Per group and x: rows, missing (no value), and the median, q25, q75, min, max of the values that
    count (`ranked`)."""
    out = []
    for (group, x), part in rows.groupby(["group", "x"], sort=True):
        y = ranked(part, missing)
        quantiles = quartiles(y)
        low, high = (y.min(), y.max()) if y.size else (math.nan, math.nan)
        out.append(
            [group, x, len(part), int(part["y"].isna().sum()), quantiles[1], quantiles[0], quantiles[2], low, high]
        )
    return pd.DataFrame(out, columns=["group", "x", "rows", "missing", "median", "q25", "q75", "min", "max"])


def fitted(relation: Relation, medians: pd.DataFrame) -> dict:
    """The fit over the finite medians (positive ones, and positive x, for a power law): fit_line's a, b,
    their standard errors, R² and n; {} with fit = "none"."""
    if relation.fit == "none":
        return {}
    x, y = medians["x"].to_numpy(float), medians["median"].to_numpy(float)
    keep = np.isfinite(x) & np.isfinite(y)
    if relation.fit == "power":
        keep &= (x > 0) & (y > 0)
        return fit_line(np.log(x[keep]), np.log(y[keep]))
    return fit_line(x[keep], y[keep])


def spearman(rows: pd.DataFrame, missing: str) -> float:
    """ρ(x, y) over the rows that count (`ranked`); NaN with fewer than 3 or a constant side."""
    part = rows if missing in FILL else rows.dropna(subset=["y"])
    x, y = part["x"].to_numpy(float), ranked(part, missing)
    if len(y) < 3 or np.unique(x).size < 2 or np.unique(y).size < 2:
        return math.nan
    return float(stats.spearmanr(x, y).statistic)


def interior_minimum(medians: pd.DataFrame) -> bool | None:
    """Whether the smallest finite median (x ascending) lies strictly inside the x range; None with
    fewer than 3 finite medians."""
    finite = medians[np.isfinite(medians["median"].to_numpy(float))].sort_values("x")
    if len(finite) < 3:
        return None
    where = int(np.argmin(finite["median"].to_numpy(float)))
    return 0 < where < len(finite) - 1


def monotone_medians(medians: pd.DataFrame, direction: str) -> bool | None:
    """Whether the per-x medians (a bound at ±∞ included) never rise ("non-increasing") or never fall
    ("non-decreasing") as x grows, and move that way at least once (all equal is no trend); None with
    fewer than 2 medians."""
    ordered = medians.dropna(subset=["median"]).sort_values("x")["median"].to_numpy(float)
    if len(ordered) < 2:
        return None
    earlier, later = ordered[:-1], ordered[1:]
    if direction == "non-decreasing":
        earlier, later = later, earlier
    return bool(np.all(later <= earlier) and np.any(later < earlier))


def verdicts(relation: Relation, fit: dict, rho: float, interior: bool | None, monotone: bool | None) -> dict:
    """PASS (True) / FAIL (False) / UNMEASURED per expectation the relation states; None where it states none."""
    slope, r2 = fit.get("b", math.nan), fit.get("r2", math.nan)
    sign = {"increasing": 1, "decreasing": -1}.get(relation.rank)
    lo_hi = relation.expect_slope
    return {
        "slope_pass": judged(lo_hi is not None, slope, lambda b: lo_hi[0] <= b <= lo_hi[1]),
        "r2_pass": judged(relation.min_r2 is not None, r2, lambda value: value >= relation.min_r2),
        "rank_pass": judged(sign is not None, rho, lambda value: sign * value >= relation.min_rank),
        "monotone_pass": checked(relation.monotone is not None, monotone),
        "minimum_pass": checked(relation.minimum is not None, interior),
    }


def summarise(relation: Relation, rows: pd.DataFrame) -> tuple[pd.DataFrame, list[dict]]:
    """The per-x table and, per group, the fit, ρ, the interior-minimum check and the verdicts."""
    table = per_x(rows, relation.missing)
    fits = []
    for group in sorted(table["group"].unique(), key=natural):
        medians = table[table["group"] == group]
        fit, rho = fitted(relation, medians), spearman(rows[rows["group"] == group], relation.missing)
        interior = interior_minimum(medians)
        monotone = monotone_medians(medians, relation.monotone) if relation.monotone else None
        fits.append(
            {
                "group": group,
                **fit,
                "spearman": rho,
                "interior_minimum": interior,
                **verdicts(relation, fit, rho, interior, monotone),
            }
        )
    return table, fits


def expectations(relation: Relation, result: dict) -> str:
    """e.g. "b in [0.5, 2]: PASS; ρ ≥ 0.8: FAIL"; "–" without expectations."""
    parts = fit_verdicts(relation, result)
    if result["rank_pass"] is not None:
        side = "≥ " if relation.rank == "increasing" else "≤ −"
        parts.append(f"ρ {side}{number(relation.min_rank)}: {passed(result['rank_pass'])}")
    if result["monotone_pass"] is not None:
        parts.append(f"medians {relation.monotone} in x: {passed(result['monotone_pass'])}")
    if result["minimum_pass"] is not None:
        parts.append(f"interior minimum: {passed(result['minimum_pass'])}")
    return "; ".join(parts) or "–"


def law(relation: Relation) -> str:
    """The fitted law in words."""
    if relation.fit == "power":
        return f"ln({relation.y_label}) = a + b · ln({relation.x_label})"
    return f"{relation.y_label} = a + b · {relation.x_label}"


def relation_section(relation: Relation, table: pd.DataFrame, fits: list[dict]) -> str:
    """report.md's lines of one relation: the per-x table and one line per group."""
    grouped = bool(relation.group_by)
    headers = (["group"] if grouped else []) + [relation.x_label, "rows", "no value", "median", "25–75 %", "min–max"]
    body = [
        ([r.group] if grouped else [])
        + [
            number(r.x),
            r.rows,
            r.missing,
            cell(r.median),
            f"{cell(r.q25)} – {cell(r.q75)}",
            f"{cell(r.min)} – {cell(r.max)}",
        ]
        for r in table.itertuples(index=False)
    ]
    missing = MISSING_WORDS[relation.missing]
    kept = "".join(f"; only {name} in {list(values)}" for name, values in relation.where)
    lines = [
        f"### {relation.label}",
        "",
        f"y = {relation.y}; x = {relation.x}{kept}; rows without a value {missing}.",
        "",
    ]
    lines += [markdown_table(headers, body), ""]
    for f in fits:
        where = f"{f['group']}: " if grouped else ""
        fit = ""
        if "b" in f:
            a, b, r2 = mean_std(f["a"], f["a_se"], 3), mean_std(f["b"], f["b_se"], 3), number(f["r2"], 4)
            fit = f"{law(relation)}: a = {a}, b = {b}, R² = {r2} over {f['n']} medians; "
        shape = (
            ""
            if relation.minimum is None or f["interior_minimum"] is None
            else f"; smallest median {'inside' if f['interior_minimum'] else 'at an end of'} the x range"
        )
        lines.append(
            f"- {where}{fit}Spearman ρ = {number(f['spearman'], 3)}{shape}. Expected: {expectations(relation, f)}"
        )
    return "\n".join(lines)


def relation_sections(
    out_dir: Path, relations: tuple[Relation, ...], runs: pd.DataFrame, searches: pd.DataFrame, written: list[Path]
) -> list[str]:
    """Write relations.csv, relation_fits.csv and relations.png; return report.md's section (nothing
    without relations or rows)."""
    results = []
    for relation in relations:
        rows = relation_rows(relation, runs, searches)
        if not rows.empty:
            results.append((relation, *summarise(relation, rows)))
    if not results:
        return []
    written.append(
        write_csv(
            pd.concat([t.assign(relation=r.label) for r, t, _ in results], ignore_index=True), out_dir / "relations.csv"
        )
    )
    fit_rows = [{"relation": r.label, "fit": r.fit, **f} for r, _, fits in results for f in fits]
    written.append(write_csv(pd.DataFrame(fit_rows), out_dir / "relation_fits.csv"))
    written.append(plot_relations(out_dir / "relations.png", results))
    intro = (
        "## Relations\n\nPer x value the median, quartiles and min–max over runs (searches, for a capacity). "
        "The fit is over the finite medians and Spearman ρ over every row: relations.csv, relation_fits.csv, "
        "relations.png."
    )
    return [intro] + [relation_section(r, t, fits) for r, t, fits in results]
