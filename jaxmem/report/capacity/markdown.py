"""report.md sections of search sweeps: the capacity table, the fitted slope and collapse, bits per
parameter, and every metric at capacity."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from jaxmem.report.capacity.at_capacity import capacity_metrics_table
from jaxmem.report.capacity.points import point_table
from jaxmem.report.capacity.ratio import capacity_points, ratio_cell, ratio_summary, ratio_table
from jaxmem.report.capacity.searches import group_columns, usable_mask, varying_columns, x_column
from jaxmem.report.runs import metric_columns, with_untrained
from jaxmem.report.success import better, judged_metric, metric_label, rule_text
from jaxmem.report.text import DASH, markdown_table, mean_std, number
from jaxmem.report.verdicts import Claim, confidence, stated
from jaxmem.spec.report_tables import ReportSpec
from jaxmem.spec.sweep import SuccessRule

CENSORING = (
    "A search is censored when its answer lies outside the range it searched: above it (at least the last "
    "value probed) or below it (at most). The median and quartiles count every search, a censored one "
    "ordered past all answers on its side, and are a bound (≥, ≤) where they draw on one. *Answered*: the "
    "searches with an answer inside their range, of all; the mean ± std (which the fit uses) and bits/param "
    "are over these alone."
)


def bounded(value: float, censored: str) -> str:
    """A censored quantile (jaxmem.report.capacity.censored): "40", "≥ 512", "≤ 8" or "unknown"."""
    if censored == "both":
        return "unknown"
    sign = {"above": "≥ ", "below": "≤ "}.get(censored, "")
    if sign and not np.isfinite(value):
        return f"{censored} the range"
    return sign + number(value)


def censored_text(row: dict) -> str:
    """e.g. "1 above, 2 below"; "–" when no search of the point is censored."""
    parts = [f"{row[f'n_{side}']} {side}" for side in ("above", "below") if row[f"n_{side}"]]
    return ", ".join(parts) or DASH


def point_keys(report_spec: ReportSpec, searches: pd.DataFrame) -> list[str]:
    """The columns naming a grid point in the tables: group_by, the varying config fields, x."""
    x = x_column(report_spec, searches)
    return list(dict.fromkeys(group_columns(report_spec, searches) + varying_columns(searches) + [x]))


def sorted_points(table: pd.DataFrame, report_spec: ReportSpec, searches: pd.DataFrame) -> pd.DataFrame:
    """Rows by group, then x, then point id."""
    keys = group_columns(report_spec, searches) + [x_column(report_spec, searches), "point"]
    return table.sort_values(keys, kind="stable")


def answered_text(row: dict, planned: int | None) -> str:
    """Answered searches of a grid point, of those finished ("3/4") or, in an unfinished sweep, of the
    `planned` ones, with how many have not finished ("3/5 (1 not finished)")."""
    if planned is None:
        return f"{row['n_seeds']}/{row['n_searches']}"
    missing = planned - row["n_searches"]
    return f"{row['n_seeds']}/{planned}" + (f" ({missing} not finished)" if missing > 0 else "")


def capacity_section(
    report_spec: ReportSpec, searches: pd.DataFrame, variable: str, rule: SuccessRule | None, planned: int | None = None
) -> str:
    """The per-point capacity table: censored quantiles, answered and censored counts, the answered
    searches' mean ± std and bits per parameter. `planned`: the searches planned per grid point of an
    unfinished sweep, which the answered counts are of."""
    table = sorted_points(capacity_points(report_spec, searches, variable), report_spec, searches)
    columns = list(dict.fromkeys(point_keys(report_spec, searches) + ["params"]))
    ratios = report_spec.ratios
    headers = columns + [
        f"{variable} median",
        "25–75 %",
        "answered",
        "censored",
        "mean ± std (answered)",
        *(f"{r.label} median (min–max)" for r in ratios),
        "bits/param",
    ]
    rows = [
        [r[c] for c in columns]
        + [
            bounded(r["capacity_median"], r["capacity_median_censored"]),
            f"{bounded(r['capacity_q25'], r['capacity_q25_censored'])} – "
            f"{bounded(r['capacity_q75'], r['capacity_q75_censored'])}",
            answered_text(r, planned),
            censored_text(r),
            mean_std(r["capacity_mean"], r["capacity_std"]),
            *(ratio_cell(r, ratio) for ratio in ratios),
            r["bits_per_param_mean"],
        ]
        for r in table.to_dict("records")
    ]
    extreme = "Smallest" if report_spec.search_goal == "smallest" else "Largest"
    judged = f" ({rule_text(rule)})" if rule is not None else ""
    intro = f"{extreme} {variable} reaching the success threshold{judged}, per grid point over its searches."
    text = f"## Capacity\n\n{intro} {CENSORING}\n\n" + markdown_table(headers, rows)
    if ratios:
        answered = searches[usable_mask(searches, x_column(report_spec, searches))]
        summaries = [ratio_summary(r, ratio_table(r, answered, variable)) for r in ratios]
        text += "\n\nRatios over the answered searches of each point:\n\n" + "\n".join(summaries)
    return text


def left_out_text(summary: dict) -> str:
    """What the fit's means leave out and why."""
    above, below = summary["censored_above"], summary["censored_below"]
    text = f"Left out of those means: {summary['excluded']} of {summary['n_searches']} searches"
    if above or below:
        text += (
            f", {above} censored above and {below} below the range searched (their answers are not known: "
            "where a point has censored searches its mean leans into the range, which its median does not)"
        )
    return text + (
        f"; {summary['excluded_points']} grid points had no answered search (or an x ≤ 0, which a power law cannot "
        "take) and are left out of the fit."
    )


def slope_section(summary: dict) -> str:
    """The pooled fit, what it left out, the per-seed spread and the acceptance verdict."""
    fit = summary["fit"] or summary["variable"]
    lines = [
        "## Fitted slope",
        "",
        f"Least squares of ln({fit}) on ln({summary['x']}) over the per-point means of the searches answered "
        f"inside their range, at {summary['n_points']} grid points. {left_out_text(summary)}",
        "",
    ]
    if not np.isfinite(summary["slope"]):
        lines.append("- Slope: not measurable (fewer than two distinct x values).")
    else:
        slope = number(summary["slope"], 3)
        lines += [
            f"- Slope: **{slope}**{confidence(summary['slope_lo'], summary['slope_hi'])}",
            f"- Law: {fit} ≈ {number(math.exp(summary['intercept']))} · {summary['x']}^{slope}",
            f"- Per-seed fits: {mean_std(summary['slope_seed_mean'], summary['slope_seed_std'], 3)} "
            f"(mean ± std over {summary['n_seed_fits']} seeds)",
        ]
    if summary["expect_slope"] is not None:
        lo, hi = summary["expect_slope"]
        check = f"Expected slope in [{number(lo)}, {number(hi)}]"
        interval = (summary["slope_lo"], summary["slope_hi"])
        claim = Claim("Fitted slope", check, summary["pass"], summary["slope"], interval, (lo, hi))
        lines.append(f"- {check}: {stated(claim)}")
    if summary["collapse"] is not None:
        lines += ["", collapse_section(summary["collapse"], summary["x"])]
    return "\n".join(lines)


def collapse_section(collapse: dict, x: str) -> str:
    """Residuals about the common law and the per-group slopes and values at the middle of x."""
    rows = [[label, g["n_points"], g["slope"], g["value_at_mid"]] for label, g in collapse["groups"].items()]
    mid = number(collapse["x_mid"])
    return "\n".join(
        [
            "### Collapse onto one curve",
            "",
            f"- RMS residual about the common law (ln space): {number(collapse['rms'], 4)} "
            f"(a factor {number(math.exp(collapse['rms']), 3)})",
            f"- Max |residual|: {number(collapse['max_abs'], 4)} (a factor {number(math.exp(collapse['max_abs']), 3)})",
            f"- Spread of the per-group fits at {x} = {mid} (max/min): {number(collapse['spread'], 3)}",
            "",
            markdown_table(["group", "points", "slope", f"fitted value at {x} = {mid}"], rows),
        ]
    )


def bits_section(summary: dict) -> str:
    """Bits stored per parameter at capacity, overall and per group."""
    lines = [
        "## Bits per parameter",
        "",
        "Information stored at capacity divided by the parameter count, over the answered searches: "
        f"**{mean_std(summary['bits_per_param_mean'], summary['bits_per_param_std'], 3)}**",
    ]
    groups = summary["bits_per_param_by_group"]
    if len(groups) > 1:
        rows = [[label, mean_std(g["mean"], g["std"], 3), g["n"]] for label, g in groups.items()]
        lines += ["", markdown_table(["group", "bits/param", "searches"], rows)]
    return "\n".join(lines)


def metrics_at_capacity_section(
    report_spec: ReportSpec,
    searches: pd.DataFrame,
    runs: pd.DataFrame,
    variable: str | None,
    rule: SuccessRule | None,
    train_metric: str | None,
) -> str:
    """Every metric of the runs at each search's answer, mean over the searches of a grid point."""
    table = capacity_metrics_table(searches, runs, better(rule))
    if table.empty:
        return ""
    keys = point_keys(report_spec, searches)
    info = point_table(searches, x_column(report_spec, searches))[["point", *keys]]
    table = sorted_points(info.merge(table, on="point"), report_spec, searches)
    judged = judged_metric(rule, train_metric)
    metrics = with_untrained(metric_columns(table.columns), table.columns, {judged}, judged)
    headers = [*keys, f"{variable or 'capacity'} (mean)", "searches"]
    headers += [metric_label(c, rule, train_metric) for c in metrics]
    rows = [
        [r[c] for c in keys] + [r["capacity"], r["searches"]] + [number(r[c], 4) for c in metrics]
        for r in table.to_dict("records")
    ]
    extreme = "smallest" if report_spec.search_goal == "smallest" else "largest"
    intro = (
        f"## Metrics at capacity\n\nFor each search, the best successful run at its answer (the {extreme} "
        "successful probe); every metric at that run's last evaluation, mean over the searches of a grid point; "
        "untrained: the same run's at initialisation (step 0).\n\n"
    )
    return intro + markdown_table(headers, rows)
