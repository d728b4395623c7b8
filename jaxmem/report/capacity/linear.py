"""Linear fits y = a + b·x over the grid points of a search sweep ([report] fit_linear), beside the
power law: intercept and slope with their standard errors, R², the points, the per-seed slopes, and the
verdicts of the slope and R² (jaxmem.report.verdicts: the slope's 95 % interval against its band, the
line against a + b·x^p with a free exponent).

Like the power-law fit (jaxmem.report.capacity.fit), each point enters with the mean of its searches
answered inside their range; y is the expression of that mean (the searched variable bound to it).

One claim gets one verdict: a linear fit of the same law as a `[[report.relation]]` (a linear relation of
the searched variable with the same x and y) is a diagnostic, its checks written "diagnostic, not a
verdict"; the relation, which names the claim, owns its verdict.
"""

from __future__ import annotations


import pandas as pd

from jaxmem.report.capacity.fit import fit_line, moments
from jaxmem.report.expressions import row_values
from jaxmem.report.text import group_labels, markdown_table, mean_std, number
from jaxmem.report.verdicts import Claim, law_verdict, slope_band, slope_text, slope_verdict, stated
from jaxmem.spec.report_relations import Relation
from jaxmem.spec.report_tables import LinearFit


def point_means(rows: pd.DataFrame) -> pd.DataFrame:
    """Per point: its first row with `capacity` replaced by the mean over the rows."""
    grouped = rows.groupby("point", sort=True)
    return grouped.first().assign(capacity=grouped["capacity"].mean()).reset_index()


def xy(spec: LinearFit, rows: pd.DataFrame, variable: str) -> tuple[pd.Series, pd.Series]:
    """The fit's x and y of each row, the searched variable bound to `capacity`."""
    y = spec.y or variable
    return row_values(spec.x, rows), row_values(y, rows, {variable: "capacity"})


def linear_fit(spec: LinearFit, rows: pd.DataFrame, variable: str) -> dict:
    """The pooled fit over the per-point means of the answered searches `rows`, the per-seed slopes
    (mean, std, count) and the verdicts (fit_verdicts)."""
    means = point_means(rows)
    x, y = xy(spec, means, variable)
    result = fit_line(x, y)
    slopes = [fit_line(*xy(spec, point_means(part), variable))["b"] for _, part in rows.groupby("seed")]
    result["seed_b"] = moments(slopes)
    return {**result, **fit_verdicts(spec, result, x, y, power=False)}


def fit_verdicts(spec, fit: dict, x, y, power: bool) -> dict:
    """The verdicts of a fit of y on x (`power`: ln y on ln x) whose expectations `spec` states (its
    expect_slope and min_r2): "slope_verdict", "r2_verdict" (None without the expectation) and the
    free exponent of the R² check ("law_p", "law_p_lo", "law_p_hi", where profiled)."""
    out = {"slope_verdict": None, "r2_verdict": None}
    if spec.expect_slope is not None:
        out["slope_verdict"] = slope_verdict(fit, spec.expect_slope)
    if spec.min_r2 is not None:
        out["r2_verdict"], law = law_verdict(x, y, fit["r2"], spec.min_r2, power)
        out.update({f"law_{k}": v for k, v in law.items()})
    return out


def fit_checks(spec, result: dict, section: str, subject: str = "", diagnostic: bool = False) -> list[str]:
    """The slope's and R²'s verdicts of a fit (of `subject`, in report.md's `section`) as report.md writes
    them, each stated (jaxmem.report.verdicts), e.g. ["b in [2, 4]: **PASS**", "R² ≥ 0.9: **FAIL** (R² = 0.71)"]."""
    parts = []
    if result["slope_verdict"] is not None:
        band, check = spec.expect_slope, slope_band(spec.expect_slope)
        interval = (result["b_lo"], result["b_hi"])
        claim = Claim(section, subject + check, result["slope_verdict"], result["b"], interval, band, diagnostic)
        parts.append(f"{check}: {stated(claim)}")
    if result["r2_verdict"] is not None:
        check = f"R² ≥ {number(spec.min_r2)}"
        claim = Claim(
            section, subject + check, result["r2_verdict"], result["r2"], None, (spec.min_r2, None), diagnostic
        )
        parts.append(f"{check}: {stated(claim)}")
    return parts


def same_law(spec: LinearFit, relations: tuple[Relation, ...], variable: str) -> Relation | None:
    """The linear relation that states the same law as the fit `spec` (its y the searched variable or the
    same expression, its x the same expression), which then owns the claim; None if none does."""

    def bare(expression: str) -> str:
        return "".join(expression.split())

    y = bare(spec.y or variable)
    for relation in relations:
        ys = {bare(relation.y), bare(relation.y).replace("capacity", variable)}
        if relation.fit == "linear" and bare(relation.x) == bare(spec.x) and y in ys:
            return relation
    return None


def linear_section(
    specs: tuple[LinearFit, ...], rows: pd.DataFrame, variable: str, relations: tuple[Relation, ...] = ()
) -> str:
    """The `## Linear fits` section: one row per fit and group; a fit of a relation's law is a diagnostic."""
    if not specs or rows.empty:
        return ""
    table = []
    for spec in specs:
        labels = group_labels(rows, list(spec.group_by))
        owner = same_law(spec, relations, variable)
        for label in sorted(set(labels)):
            table.append(fit_row(spec, rows[labels == label], variable, label if spec.group_by else "", owner))
    headers = ["fit", "a ± se", "b ± se (95 % CI)", "R²", "points", "b per seed (mean ± std)", "expected"]
    intro = (
        "## Linear fits\n\nLeast squares of y = a + b·x over the grid points, each at the mean of its searches "
        "answered inside their range (as the fitted slope above); standard errors from the residuals "
        "(3 or more points). Per seed: the same fit over that seed's answers. A slope is judged by its 95 % "
        "interval (3 or more distinct x), an R² also against a + b·x^p with a free exponent p (4 or more): "
        "INCONCLUSIVE where the points cannot decide. A fit of the same law as a relation is a diagnostic: the "
        "relation owns the claim's verdict.\n\n"
    )
    return intro + markdown_table(headers, table)


def fit_row(spec: LinearFit, rows: pd.DataFrame, variable: str, group: str, owner: Relation | None = None) -> list:
    """One row of the section: the fit (and its group), a, b, R², points, per-seed b, verdicts (a
    diagnostic's, with `owner`: the relation of the same law)."""
    r = linear_fit(spec, rows, variable)
    mean, std, count = r["seed_b"]
    name = f"{spec.y_label or variable} = a + b · {spec.x_label}" + (f" ({group})" if group else "")
    checks = "; ".join(fit_checks(spec, r, "Linear fits", f"{name}: ", diagnostic=owner is not None))
    if owner is not None and checks:
        checks = f'diagnostic, not a verdict (the claim is the relation "{owner.label}"): {checks}'
    return [
        name,
        mean_std(r["a"], r["a_se"], 3),
        slope_text(r),
        number(r["r2"], 4),
        r["n"],
        f"{mean_std(mean, std, 3)} ({count} seeds)",
        checks or "–",
    ]
