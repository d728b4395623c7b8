"""report.md: sweep summary, capacity table, slope and collapse, bits per parameter, runs."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from jaxmem.report.analysis import (
    config_columns,
    format_number,
    group_columns,
    point_table,
    x_column,
)
from jaxmem.spec.report_tables import ReportSpec

META_FIELDS = (
    ("spec", "Spec"),
    ("preset", "Preset"),
    ("experiment", "Experiment"),
    ("device", "Device"),
    ("jaxmem_version", "jaxmem version"),
    ("wall_time_s", "Total wall time"),
)


def markdown_table(headers: list[str], rows: list[list]) -> str:
    """A GitHub-flavoured markdown table; cells go through format_number."""
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(format_number(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def format_duration(seconds: float) -> str:
    """Seconds as e.g. "754.2 s (12.6 min)"."""
    if seconds >= 3600:
        return f"{seconds:.1f} s ({seconds / 3600:.2f} h)"
    if seconds >= 60:
        return f"{seconds:.1f} s ({seconds / 60:.1f} min)"
    return f"{seconds:.1f} s"


def pm(mean: float, std: float, digits: int = 3) -> str:
    """ "mean ± std", dropping the std when it is undefined."""
    if not np.isfinite(mean):
        return "–"
    return f"{mean:.{digits}f}" if not np.isfinite(std) else f"{mean:.{digits}f} ± {std:.{digits}f}"


def meta_section(meta: dict) -> str:
    """Bullets for the known meta keys present, then any other scalar keys."""
    known = dict(META_FIELDS)
    bullets = []
    for key, name in META_FIELDS:
        if meta.get(key) is not None:
            value = format_duration(float(meta[key])) if key == "wall_time_s" else meta[key]
            bullets.append(f"- {name}: {format_number(value)}")
    bullets += [
        f"- {key}: {format_number(value)}"
        for key, value in sorted(meta.items())
        if key not in known and isinstance(value, (str, int, float, bool))
    ]
    return "## Sweep\n\n" + ("\n".join(bullets) if bullets else "No sweep metadata recorded.")


def capacity_section(report_spec: ReportSpec, searches: pd.DataFrame, variable: str) -> str:
    """The per-point capacity table, rows sorted by group then x."""
    x = x_column(report_spec, searches)
    group_by = group_columns(report_spec, searches)
    table = point_table(searches, x).sort_values(group_by + [x], kind="stable")
    varying = [c for c in config_columns(searches) if searches[c].astype(str).nunique() > 1]
    columns = list(dict.fromkeys(group_by + varying + [x, "params"]))
    headers = columns + [f"{variable} mean ± std", "min", "max", "seeds used", "excluded", "bits/param"]
    rows = [
        [r[c] for c in columns]
        + [
            pm(r["capacity_mean"], r["capacity_std"], 1),
            r["capacity_min"],
            r["capacity_max"],
            r["n_seeds"],
            r["n_excluded"],
            r["bits_per_param_mean"],
        ]
        for r in table.to_dict("records")
    ]
    extreme = "Smallest" if report_spec.search_goal == "smallest" else "Largest"
    intro = f"## Capacity\n\n{extreme} {variable} reaching the success threshold, per grid point.\n\n"
    return intro + markdown_table(headers, rows)


def slope_section(summary: dict) -> str:
    """The pooled fit, the per-seed spread and the acceptance verdict."""
    fit = summary["fit"] or summary["variable"]
    lines = [
        "## Fitted slope",
        "",
        f"Least squares of ln({fit}) on ln({summary['x']}) over the per-point means of "
        f"{summary['n_points']} grid points. Excluded: {summary['excluded']} of {summary['n_searches']} "
        f"searches (capacity NaN or censored); {summary['excluded_points']} grid points had no usable value "
        "and are left out of the fit.",
        "",
    ]
    if not np.isfinite(summary["slope"]):
        lines.append("- Slope: not measurable (fewer than two distinct x values).")
    else:
        lines += [
            f"- Slope: **{summary['slope']:.3f}**",
            f"- Law: {fit} ≈ {math.exp(summary['intercept']):.4g} · {summary['x']}^{summary['slope']:.3f}",
            f"- Per-seed fits: {pm(summary['slope_seed_mean'], summary['slope_seed_std'])} "
            f"(mean ± std over {summary['n_seed_fits']} seeds)",
        ]
    if summary["expect_slope"] is not None:
        lo, hi = summary["expect_slope"]
        verdict = "PASS" if summary["pass"] else "FAIL"
        lines.append(f"- Expected slope in [{lo}, {hi}]: **{verdict}**")
    if summary["collapse"] is not None:
        lines += ["", collapse_section(summary["collapse"], summary["x"])]
    return "\n".join(lines)


def collapse_section(collapse: dict, x: str) -> str:
    """Residuals about the common law and the per-group slopes and values at the middle of x."""
    rows = [[label, g["n_points"], g["slope"], g["value_at_mid"]] for label, g in collapse["groups"].items()]
    return "\n".join(
        [
            "### Collapse onto one curve",
            "",
            f"- RMS residual about the common law (ln space): {collapse['rms']:.4f} "
            f"(a factor {math.exp(collapse['rms']):.3f})",
            f"- Max |residual|: {collapse['max_abs']:.4f} (a factor {math.exp(collapse['max_abs']):.3f})",
            f"- Spread of the per-group fits at {x} = {collapse['x_mid']:.4g} (max/min): {collapse['spread']:.3f}",
            "",
            markdown_table(["group", "points", "slope", f"fitted value at {x} = {collapse['x_mid']:.4g}"], rows),
        ]
    )


def bits_section(summary: dict) -> str:
    """Bits stored per parameter at capacity, overall and per group."""
    lines = [
        "## Bits per parameter",
        "",
        f"Information stored at capacity divided by the parameter count, over usable searches: "
        f"**{pm(summary['bits_per_param_mean'], summary['bits_per_param_std'])}**",
    ]
    groups = summary["bits_per_param_by_group"]
    if len(groups) > 1:
        rows = [[label, pm(g["mean"], g["std"]), g["n"]] for label, g in groups.items()]
        lines += ["", markdown_table(["group", "bits/param", "searches"], rows)]
    return "\n".join(lines)


def runs_section(runs: pd.DataFrame) -> str:
    """Counts of probe runs, divergences, successes, wall time and compile columns."""
    if runs.empty:
        return "## Runs\n\nNo probe runs recorded."
    bullets = [f"- Probe runs: {len(runs)}"]
    for column, name in (("diverged", "Diverged"), ("success", "Successful")):
        if column in runs:
            bullets.append(f"- {name}: {int(runs[column].fillna(False).astype(bool).sum())}")
    if "wall_time_s" in runs:
        bullets.append(f"- Total run wall time: {format_duration(float(runs['wall_time_s'].sum()))}")
    for column in (c for c in runs.columns if "compile" in c):
        bullets.append(f"- {column} (total): {format_number(pd.to_numeric(runs[column], errors='coerce').sum())}")
    return "## Runs\n\n" + "\n".join(bullets)


def render_report(
    report_spec: ReportSpec,
    searches: pd.DataFrame,
    runs: pd.DataFrame,
    meta: dict,
    summary: dict,
    plot_name: str | None,
    extra_sections: Sequence[str] = (),
) -> str:
    """The full report.md text; capacity sections only when there are searches, then `extra_sections`."""
    sections = [f"# {report_spec.title or 'Capacity report'}", meta_section(meta)]
    if not searches.empty:
        sections += [
            capacity_section(report_spec, searches, summary["variable"]),
            slope_section(summary),
            bits_section(summary),
        ]
    sections += [s for s in extra_sections if s]
    sections.append(runs_section(runs))
    if plot_name is not None:
        sections.append(f"## Plot\n\n![capacity]({plot_name})")
    return "\n\n".join(sections) + "\n"
