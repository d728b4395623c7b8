"""`[[report.relation]]` (jaxmem.spec.report_relations): a per-run quantity against an expression of
the config. Per group and x value: the rows, how many lack a value, and the median, quartiles and
min–max of y. Then a fit over the finite medians, Spearman ρ over every row, where the smallest median
lies, and the verdicts of the expectations the relation states (jaxmem.report.verdicts: PASS, FAIL or
INCONCLUSIVE). Writes relations.csv, relation_fits.csv and relations.png, and returns report.md's section.

Every check along x needs 3 or more x values with a median; `expect_level` judges the mean of y over a
group's rows (3 or more finite values) by its 95 % t-interval against [lo, hi] (verdicts.mean_in_band).
The slope is judged by its 95 % interval, the R² of a law against the same law with a free exponent
(jaxmem.report.verdicts). The shape checks judge the
medians beyond the seed spread, which is each x's 25–75 % range (every x then needs 2 or more values):
- `minimum = "interior"` PASSes when the smallest median lies inside the x range and on each side of it
  some x has its 25–75 % range wholly above the minimum's; FAILs when the smallest median lies at an
  end and every interior x is above it in that sense; else INCONCLUSIVE (the minimum lies within the
  seed spread).
- `monotone = "non-increasing"` FAILs when a larger x has its 25–75 % range wholly above a smaller x's
  (a rise beyond the spread), PASSes when, without such a rise, a larger x lies wholly below a smaller
  one (a fall beyond the spread), else is INCONCLUSIVE; "non-decreasing" the mirror image.

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

from jaxmem.report.capacity.fit import fit_line
from jaxmem.report.capacity.linear import fit_checks, fit_verdicts
from jaxmem.report.capacity.searches import censored_side
from jaxmem.report.capacity.stable import flagged_units
from jaxmem.report.expressions import row_values, rows_kept
from jaxmem.report.files import write_csv
from jaxmem.report.relations_plot import plot_relations
from jaxmem.report.text import group_labels, markdown_table, mean_std, number
from jaxmem.report.verdicts import (
    Claim,
    Verdict,
    confidence,
    decided,
    flat,
    inconclusive,
    mean_in_band,
    not_testable,
    slope_text,
    stated,
    too_few_x,
)
from jaxmem.spec.report_relations import Relation
from jaxmem.spec.tables import names_of

FILL = {"high": math.inf, "low": -math.inf}
SIDE_FILL = {"above": math.inf, "below": -math.inf}
NUMBER = re.compile(r"(-?\d+(?:\.\d+)?(?:e-?\d+)?)")
MISSING_WORDS = {"drop": "left out", "high": "ranked above every value", "low": "ranked below every value"}


def relation_rows(relation: Relation, runs: pd.DataFrame, searches: pd.DataFrame) -> pd.DataFrame:
    """One row per run (per search when y uses `capacity`): group, x, y (NaN: no value) and a censored
    search's `side` ("above", "below"; "" otherwise)."""
    frame = runs.copy().assign(side="")  # copy: a de-fragmented frame (pandas PerformanceWarning otherwise)
    if relation.over_searches:
        side = censored_side(searches) if not searches.empty else ""
        frame = searches.assign(capacity=searches["capacity"].where(side == ""), side=side)
        frame = with_run_metrics(frame, runs, sorted(n for n in names_of(relation.x) if n.startswith("final_")))
    frame = kept(relation, frame)
    if frame.empty:
        return pd.DataFrame(columns=["group", "x", "y", "side"])
    x, y = row_values(relation.x, frame), row_values(relation.y, frame)
    group = group_labels(frame, list(relation.group_by))
    return pd.DataFrame({"group": group, "x": x, "y": y, "side": frame["side"].to_numpy()})


def kept(relation: Relation, frame: pd.DataFrame) -> pd.DataFrame:
    """The rows of `frame` with the config values the relation's `where` keeps."""
    return rows_kept(relation.where, frame)


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
    """Per group and x: rows, missing (no value), values (that count, `ranked`) and their median, q25,
    q75, min, max."""
    out = []
    for (group, x), part in rows.groupby(["group", "x"], sort=True):
        y = ranked(part, missing)
        quantiles = quartiles(y)
        low, high = (y.min(), y.max()) if y.size else (math.nan, math.nan)
        missing_count = int(part["y"].isna().sum())
        out.append([group, x, len(part), missing_count, y.size, quantiles[1], quantiles[0], quantiles[2], low, high])
    columns = ["group", "x", "rows", "missing", "values", "median", "q25", "q75", "min", "max"]
    return pd.DataFrame(out, columns=columns)


def fit_points(relation: Relation, medians: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """The x and the medians the fit uses: the finite ones (positive ones, and positive x, for a power law)."""
    x, y = medians["x"].to_numpy(float), medians["median"].to_numpy(float)
    keep = np.isfinite(x) & np.isfinite(y)
    if relation.fit == "power":
        keep &= (x > 0) & (y > 0)
    return x[keep], y[keep]


def fitted(relation: Relation, x: np.ndarray, y: np.ndarray) -> dict:
    """fit_line over the fit's points (ln y on ln x for a power law); {} with fit = "none"."""
    if relation.fit == "none":
        return {}
    return fit_line(np.log(x), np.log(y)) if relation.fit == "power" else fit_line(x, y)


def spearman(rows: pd.DataFrame, missing: str) -> float:
    """ρ(x, y) over the rows that count (`ranked`); NaN with fewer than 3 or a constant side."""
    part = rows if missing in FILL else rows.dropna(subset=["y"])
    x, y = part["x"].to_numpy(float), ranked(part, missing)
    if len(y) < 3 or np.unique(x).size < 2 or np.unique(y).size < 2:
        return math.nan
    return float(stats.spearmanr(x, y).statistic)


def shape_points(medians: pd.DataFrame) -> pd.DataFrame:
    """The x values with a median (a bound at ±∞ included), ascending."""
    return medians.dropna(subset=["median"]).sort_values("x")


def smallest_inside(medians: pd.DataFrame) -> bool | None:
    """Whether the smallest median lies strictly inside the x range; None with fewer than 3 medians."""
    points = shape_points(medians)
    if len(points) < 3:
        return None
    return 0 < int(np.argmin(points["median"].to_numpy(float))) < len(points) - 1


def without_spread(points: pd.DataFrame) -> Verdict | None:
    """INCONCLUSIVE for fewer than 3 x values or an x with a single value (no seed spread); else None."""
    few = too_few_x(len(points))
    if few is not None:
        return few
    return inconclusive("an x with a single value: no seed spread") if (points["values"] < 2).any() else None


def minimum_verdict(medians: pd.DataFrame) -> Verdict:
    """`minimum = "interior"` beyond the seed spread (module docstring)."""
    points = shape_points(medians)
    unknown = without_spread(points)
    if unknown is not None:
        return unknown
    q25, q75 = points["q25"].to_numpy(float), points["q75"].to_numpy(float)
    where = int(np.argmin(points["median"].to_numpy(float)))
    above = q25 > q75[where]  # the x values whose 25–75 % range lies wholly above the minimum's
    if 0 < where < len(points) - 1:
        if above[:where].any() and above[where + 1 :].any():
            return decided(True)
    elif above[1:-1].all():
        return decided(False, "smallest median at an end, below every interior x beyond the seed spread")
    return inconclusive("minimum within the seed spread")


def monotone_verdict(medians: pd.DataFrame, direction: str) -> Verdict:
    """`monotone` beyond the seed spread (module docstring)."""
    points = shape_points(medians)
    unknown = without_spread(points)
    if unknown is not None:
        return unknown
    q25, q75 = points["q25"].to_numpy(float), points["q75"].to_numpy(float)
    if direction == "non-decreasing":  # the mirror image: a fall is a rise of −y
        q25, q75 = -q75, -q25
    later = np.triu(np.ones((len(points), len(points)), dtype=bool), k=1)  # [i, j]: x_j > x_i
    if (later & (q25[None, :] > q75[:, None])).any():
        return decided(False, "a step against it beyond the seed spread")
    if (later & (q75[None, :] < q25[:, None])).any():
        return decided(True)
    return inconclusive("no change beyond the seed spread")


def rank_verdict(relation: Relation, rho: float, n_x: int) -> Verdict | None:
    """Spearman ρ against `rank` and `min_rank`; None without `rank`."""
    sign = {"increasing": 1, "decreasing": -1}.get(relation.rank)
    if sign is None:
        return None
    few = too_few_x(n_x)
    if few is not None:
        return few
    return inconclusive("no ρ: a constant side") if math.isnan(rho) else decided(sign * rho >= relation.min_rank)


def verdicts(relation: Relation, fit: dict, x: np.ndarray, y: np.ndarray, rho: float, medians: pd.DataFrame) -> dict:
    """A verdict per expectation the relation states ("<check>_verdict"; None where it states none), and
    the free exponent of its R² check (jaxmem.report.capacity.linear.fit_verdicts)."""
    out = fit_verdicts(relation, fit, x, y, power=relation.fit == "power")  # none with fit = "none" (the spec)
    out["rank_verdict"] = rank_verdict(relation, rho, len(shape_points(medians)))
    out["monotone_verdict"] = monotone_verdict(medians, relation.monotone) if relation.monotone else None
    out["minimum_verdict"] = minimum_verdict(medians) if relation.minimum else None
    return out


def level(relation: Relation, rows: pd.DataFrame) -> dict:
    """The mean of a group's finite y and its verdict against `expect_level` (jaxmem.report.verdicts.mean_in_band):
    level, level_lo, level_hi, level_verdict; {} without the expectation."""
    if relation.expect_level is None:
        return {}
    verdict, mean, (low, high) = mean_in_band(rows["y"].to_numpy(float), relation.expect_level, "row")
    return {"level": mean, "level_lo": low, "level_hi": high, "level_verdict": verdict or not_testable("no value")}


def summarise(relation: Relation, rows: pd.DataFrame) -> tuple[pd.DataFrame, list[dict]]:
    """The per-x table and, per group, the fit, ρ, where the smallest median lies and the verdicts."""
    table = per_x(rows, relation.missing)
    fits = []
    for group in sorted(table["group"].unique(), key=natural):
        medians = table[table["group"] == group]
        x, y = fit_points(relation, medians)
        fit, rho = fitted(relation, x, y), spearman(rows[rows["group"] == group], relation.missing)
        fits.append(
            {
                "group": group,
                **fit,
                "spearman": rho,
                "interior_minimum": smallest_inside(medians),
                **verdicts(relation, fit, x, y, rho, medians),
                **level(relation, rows[rows["group"] == group]),
            }
        )
    return table, fits


def section_of(relation: Relation) -> str:
    """The section its claims are stated in (Claim.section)."""
    return f"Relations / {relation.label}"


def expectations(relation: Relation, result: dict) -> str:
    """e.g. "b in [0.5, 2] (95 % CI [0.8, 1.3]): **PASS**; ρ ≥ 0.8: **FAIL**"; "–" without expectations."""
    section, subject = section_of(relation), f"{result['group']}: " if relation.group_by else ""
    parts = fit_checks(relation, result, section, subject)
    if result["rank_verdict"] is not None:
        side = "≥ " if relation.rank == "increasing" else "≤ −"
        band = (relation.min_rank, None) if relation.rank == "increasing" else (None, -relation.min_rank)
        check = f"ρ {side}{number(relation.min_rank)}"
        claim = Claim(section, subject + check, result["rank_verdict"], result["spearman"], None, band)
        parts.append(f"{check}: {stated(claim)}")
    if result.get("level_verdict") is not None:
        lo, hi = relation.expect_level
        check = f"mean {relation.y_label} in [{number(lo)}, {number(hi)}]"
        interval = (result["level_lo"], result["level_hi"])
        claim = Claim(section, subject + check, result["level_verdict"], result["level"], interval, (lo, hi))
        measured = f"{number(result['level'])}{confidence(*interval)}"
        parts.append(f"{check}: mean {measured}: {stated(claim)}")
    for check, key in ((f"medians {relation.monotone} in x", "monotone"), ("interior minimum", "minimum")):
        if result[f"{key}_verdict"] is not None:
            parts.append(f"{check}: {stated(Claim(section, subject + check, result[f'{key}_verdict']))}")
    return "; ".join(parts) or "–"


def law(relation: Relation) -> str:
    """The fitted law in words."""
    if relation.fit == "power":
        return f"ln({relation.y_label}) = a + b · ln({relation.x_label})"
    return f"{relation.y_label} = a + b · {relation.x_label}"


def relation_section(relation: Relation, table: pd.DataFrame, fits: list[dict], note: str = "") -> str:
    """report.md's lines of one relation: the per-x table, the `note` under it, and one line per group."""
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
    lines += [note, ""] if note else []
    for f in fits:
        where = f"{f['group']}: " if grouped else ""
        fit = ""
        if "b" in f:
            a, b, r2 = mean_std(f["a"], f["a_se"], 3), slope_text(f), number(f["r2"], 4)
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
    results, notes = [], []
    for relation in relations:
        rows = relation_rows(relation, runs, searches)
        if not rows.empty:
            results.append((relation, *summarise(relation, rows)))
            notes.append(flagged_units(kept(relation, searches)) if relation.over_searches else "")
    if not results:
        return []
    written.append(
        write_csv(
            pd.concat([t.assign(relation=r.label) for r, t, _ in results], ignore_index=True), out_dir / "relations.csv"
        )
    )
    fit_rows = [{"relation": r.label, "fit": r.fit, **csv_row(f)} for r, _, fits in results for f in fits]
    written.append(write_csv(pd.DataFrame(fit_rows), out_dir / "relation_fits.csv"))
    written.append(plot_relations(out_dir / "relations.png", results))
    intro = (
        "## Relations\n\nPer x value the median, quartiles and min–max over runs (searches, for a capacity). "
        "The fit is over the finite medians and Spearman ρ over every row: relations.csv, relation_fits.csv, "
        "relations.png. Every check needs 3 or more x values with a median: a slope is judged by its 95 % "
        "interval, an R² also against the same law with a free exponent, a trend or a minimum of the medians "
        "beyond their 25–75 % spread; INCONCLUSIVE where the data cannot decide."
    )
    return [intro] + [relation_section(r, t, fits, note) for (r, t, fits), note in zip(results, notes)]


def csv_row(result: dict) -> dict:
    """A group's result as a row of relation_fits.csv: each verdict as `<check>_verdict` and `<check>_reason`."""
    row = {}
    for key, value in result.items():
        row.update(flat(key.removesuffix("_verdict"), value) if key.endswith("_verdict") else {key: value})
    return row
