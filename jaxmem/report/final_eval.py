"""The test-time axes of a sweep (`[final_eval]`): final_eval.csv / .parquet (one row per run and
point, see jaxmem.persistence.store.final_eval_frame), final_eval.png (every metric against the
`[report.final_eval]` x, default the first test-time axis, one line per setting: the other test-time
axes and the sweep's varying fields, the median over seeds and learning rates with their min–max band;
dashed: the same runs untrained), the read-offs (`readoff`): final_eval_readoff.csv and a section of
report.md, and the untrained baseline: each metric at the largest x, trained against untrained (the
stored `untrained_<metric>` columns: the runs' parameters at initialisation evaluated at the same point).

A read-off's slope (ln median x* against ln `against`) is judged as every slope is (jaxmem.report.verdicts:
its 95 % interval inside the expected band, over 3 or more distinct values). A test-time axis along which
the read-off's metric is equal at every other point (the in-domain error against the OOD noise) does not
set one read-off apart from another: the read-off is listed once, not once per value of that axis."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from jaxmem.persistence.untrained import UNTRAINED
from jaxmem.report.capacity.fit import fit_line
from jaxmem.report.files import write_csv, write_table
from jaxmem.report.final_eval_plot import equal_columns, plot_final_eval, setting_groups, setting_label
from jaxmem.report.text import markdown_table, number
from jaxmem.report.verdicts import Claim, confidence, mean_in_band, not_testable, slope_text, slope_verdict, stated
from jaxmem.report.expressions import row_values, rows_kept
from jaxmem.spec.report_tables import Comparison, FinalEvalSpec, Readoff

UNTRAINED_X_STAR = UNTRAINED + "x_star"  # a read-off's x* of the untrained model


def settings_of(frame: pd.DataFrame, x: str, metrics: list[str]) -> list[str]:
    """The columns that tell one curve from another: every column but the run's identity, x and the
    metrics that takes more than one value."""
    fixed = {"run_id", "seed", "lr", x, *metrics}
    return [c for c in frame.columns if c not in fixed and frame[c].astype(str).nunique() > 1]


def split_untrained(frame: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame | None]:
    """The test-time table as two tables of the same form: the trained runs' metrics, and the untrained
    model's (its `untrained_<metric>` columns under the metrics' names; None when it has none)."""
    baseline = {c: c[len(UNTRAINED) :] for c in frame.columns if c.startswith(UNTRAINED)}
    trained = frame.drop(columns=list(baseline))
    if not baseline:
        return trained, None
    return trained, frame.drop(columns=[m for m in baseline.values() if m in frame]).rename(columns=baseline)


def stays_from(xs: np.ndarray, ys: np.ndarray, level: float, at_most: bool) -> float:
    """The smallest x from which y stays at most (at least) `level` at every larger x; inf if it never
    does at the largest x. `xs` ascending."""
    bad = ys > level if at_most else ys < level
    if bad[-1]:
        return math.inf
    last_bad = np.flatnonzero(bad)
    return float(xs[last_bad[-1] + 1] if len(last_bad) else xs[0])


def idle_axes(frame: pd.DataFrame, x: str, metric: str, axes: list[str]) -> list[str]:
    """The test-time axes other than `x` along which `metric` is equal at every other point (NaN equal to
    NaN): they do not change the read-off."""
    idle = []
    for axis in (a for a in axes if a != x):
        keys = ["run_id"] + [a for a in axes if a != axis]
        if (frame.groupby(keys, sort=False, dropna=False)[metric].nunique(dropna=False) <= 1).all():
            idle.append(axis)
    return idle


def readoff_table(
    frame: pd.DataFrame, x: str, readoff: Readoff, axes: list[str], metrics: list[str], idle: list[str] = ()
) -> pd.DataFrame:
    """Per run and per value of the other test-time axes but the `idle` ones (idle_axes; left out): its
    identity and config, and the read-off x* (column `x_star`)."""
    keys = ["run_id"] + [a for a in axes if a != x and a not in idle]
    frame = frame[frame[list(idle)].eq(frame[list(idle)].iloc[0]).all(axis=1)] if idle else frame
    identity = [c for c in frame.columns if c not in metrics and c != x and c not in idle]
    rows = []
    for _, curve in frame.groupby(keys, sort=True):
        curve = curve.sort_values(x)
        xs, ys = curve[x].to_numpy(float), curve[readoff.metric].to_numpy(float)
        rows.append({**curve.iloc[0][identity].to_dict(), "x_star": stays_from(xs, ys, readoff.level, readoff.at_most)})
    return pd.DataFrame(rows)


def power_fit(x: np.ndarray, y: np.ndarray) -> dict:
    """fit_line of ln y against ln x over the finite positive pairs (its slope b with the 95 % interval)."""
    keep = np.isfinite(x) & np.isfinite(y) & (x > 0) & (y > 0)
    return fit_line(np.log(x[keep]), np.log(y[keep]))


def readoff_summary(table: pd.DataFrame, readoff: Readoff, settings: list[str]) -> tuple[pd.DataFrame, list[dict]]:
    """Per setting and `against` value: median, min, max of x* over seeds (and of the untrained model's,
    `untrained_x_star`, where the table has it: untrained_median, _min, _max); per setting the fit of
    ln(median) against ln(against) (power_fit)."""
    by = [c for c in settings if c != readoff.against] + ([readoff.against] if readoff.against else [])
    grouped = table.groupby(by, sort=True, dropna=False)
    summary = grouped["x_star"].agg(["median", "min", "max", "count"]).reset_index()
    if UNTRAINED_X_STAR in table:
        untrained = grouped[UNTRAINED_X_STAR].agg(["median", "min", "max"]).add_prefix(UNTRAINED)
        summary = pd.concat([summary, untrained.reset_index(drop=True)], axis=1)
    slopes = []
    if readoff.against:
        others = [c for c in by if c != readoff.against]
        for key, group in summary.groupby(others, sort=True, dropna=False) if others else [((), summary)]:
            key = key if isinstance(key, tuple) else (key,)
            fit = power_fit(group[readoff.against].to_numpy(float), group["median"].to_numpy(float))
            slopes.append({"setting": dict(zip(others, key)), "fit": fit})
    return summary, slopes


def readoff_section(table: pd.DataFrame, summary: pd.DataFrame, slopes: list[dict], readoff: Readoff, x: str) -> str:
    """report.md's lines of one read-off (with the untrained model's x* where the summary has it)."""
    lines = [f"### {readoff.label}", "", f"x = {x}; {len(table)} curves; median (min–max) over seeds:", ""]
    stats = ("median", "min", "max", "count")
    baseline = UNTRAINED + "median" in summary
    columns = [c for c in summary.columns if c not in stats and not c.startswith(UNTRAINED)]
    extra = ["untrained x* median", "untrained min–max"] if baseline else []
    lines += ["| " + " | ".join(columns + ["x* median", "min–max", "seeds"] + extra) + " |"]
    lines += ["| " + " | ".join(["---"] * len(columns) + ["---:"] * (3 + len(extra))) + " |"]
    for row in summary.to_dict("records"):
        cells = [str(row[c]) for c in columns] + x_star_cells(row) + [str(row["count"])]
        cells += x_star_cells(row, UNTRAINED) if baseline else []
        lines.append("| " + " | ".join(cells) + " |")
    for s in slopes:
        where = ", ".join(f"{k}={v}" for k, v in s["setting"].items()) or "all runs"
        fit, slope = s["fit"], f"slope of ln x* against ln {readoff.against}"
        verdict = ""
        if readoff.expect_slope is not None:
            band = tuple(readoff.expect_slope)
            claim = Claim(
                f"Test-time axes / {readoff.label}",
                f"{where}: {slope} in [{number(band[0])}, {number(band[1])}]",
                slope_verdict(fit, band),
                fit["b"],
                (fit["b_lo"], fit["b_hi"]),
                band,
            )
            verdict = f"; expected in [{number(band[0])}, {number(band[1])}]: {stated(claim)}"
        lines.append(f"- {where}: {slope} = {slope_text(fit)} over {fit['n']} finite medians{verdict}")
    return "\n".join(lines)


def x_star_cells(row: dict, prefix: str = "") -> list[str]:
    """A read-off summary row's median and min–max of x* (`prefix`: the untrained model's)."""
    return [f"{row[prefix + 'median']:g}", f"{row[prefix + 'min']:g}–{row[prefix + 'max']:g}"]


def final_eval_sections(
    out_dir: Path, spec: FinalEvalSpec, frame: pd.DataFrame, axes: list[str], metrics: list[str], written: list[Path]
) -> list[str]:
    """Write final_eval.csv, .parquet, .png and final_eval_readoff.csv (nothing when no run was evaluated
    at test time); return report.md's section."""
    if frame.empty or not axes:
        return []
    x = spec.x or axes[0]
    trained, untrained = split_untrained(frame)
    shown = [m for m in (spec.metrics or metrics) if m in trained.columns and trained[m].notna().any()]
    written += write_table(frame, out_dir, "final_eval")
    by = settings_of(trained, x, list(metrics))
    written.append(plot_final_eval(out_dir / "final_eval.png", trained, x, shown, by, untrained))
    sections = [
        "## Test-time axes",
        f"Each finished run's final parameters evaluated at every point of {' × '.join(axes)} "
        f"({trained['run_id'].nunique()} runs, {len(trained)} rows): final_eval.csv, final_eval.png.",
    ]
    if untrained is not None:
        judged = list(dict.fromkeys([r.metric for r in spec.readoffs] + list(spec.metrics))) or shown
        sections.append(untrained_section(trained, untrained, x, judged, by))
    sections += [compare_section(frame, x, comparison, by) for comparison in spec.comparisons]
    tables = []
    for readoff in spec.readoffs:
        idle = idle_axes(trained, x, readoff.metric, axes)
        table = readoff_table(trained, x, readoff, axes, list(metrics), idle)
        if untrained is not None:  # the same curves in the same order, of the untrained model
            baseline = readoff_table(untrained, x, readoff, axes, list(metrics), idle)
            table[UNTRAINED_X_STAR] = baseline["x_star"].to_numpy()
        settings = settings_of(table.drop(columns=["x_star", UNTRAINED_X_STAR], errors="ignore"), x, [])
        summary, slopes = readoff_summary(table, readoff, settings)
        tables.append(table.assign(readoff=readoff.label))
        sections.append(readoff_section(table, summary, slopes, readoff, x))
    if tables:
        written.append(write_csv(pd.concat(tables, ignore_index=True), out_dir / "final_eval_readoff.csv"))
    return sections


def untrained_section(trained: pd.DataFrame, untrained: pd.DataFrame, x: str, metrics: list[str], by: list[str]) -> str:
    """Each of `metrics` at the largest x per setting (values of `by`): the trained runs' median against
    the same runs untrained (split_untrained), one row per metric or, with fewer metrics than settings,
    per setting; a metric equal for both at every point (a property of the test tasks, not of the model)
    is left out."""
    learned = [m for m in metrics if m in untrained and not equal_columns(trained[m], untrained[m])]
    left_out = [m for m in metrics if m in untrained and m not in learned]
    largest = sorted(trained[x].dropna().unique())[-1]  # numbers by value, text in sorted order
    end = trained[x] == largest
    groups = zip(setting_groups(trained[end], by), setting_groups(untrained[end], by))
    pairs = [(key, t, u) for (key, t), (_, u) in groups]
    if len(learned) <= len(pairs):
        headers = ["setting"] + learned
        rows = [[setting_label(by, key)] + [medians(t, u, m) for m in learned] for key, t, u in pairs]
    else:
        headers = ["metric"] + [setting_label(by, key) for key, _, _ in pairs]
        rows = [[m] + [medians(t, u, m) for _, t, u in pairs] for m in learned]
    lines = [
        "### Untrained baseline",
        "",
        f"Median over runs at the largest {x} ({number(largest)}), trained / untrained: the same runs' "
        f"parameters at initialisation evaluated at the same points (dashed in final_eval.png; every point: the "
        f"{UNTRAINED}<metric> columns of final_eval.csv).",
    ]
    if left_out:
        lines.append(f"Equal at every point, a property of the test tasks: {', '.join(left_out)}.")
    return "\n".join(lines + (["", markdown_table(headers, rows)] if learned else []))


def compare_section(frame: pd.DataFrame, x: str, comparison: Comparison, by: list[str]) -> str:
    """A comparison, per setting (values of `by`) at the largest (smallest) x: the runs' paired differences
    metric − other (each row holds both: a metric and its untrained_<metric>, two learners' errors), their mean's
    95 % t-interval on the claimed side of 0 PASSes, on the other FAILs, else INCONCLUSIVE (3 or more runs:
    jaxmem.report.verdicts.mean_in_band)."""
    frame = rows_kept(comparison.where, frame)
    points = sorted(frame[x].dropna().unique())
    section = f"Test-time axes / Compared: {comparison.label}"
    claimed = (None, 0.0) if comparison.below else (0.0, None)  # the band as verdicts.json writes it
    if not points:
        nothing = Claim(section, comparison.label, not_testable(f"no run with a {x} value"), None, None, claimed)
        return f"### Compared: {comparison.label}\n\n{stated(nothing)}"
    at = points[-1] if comparison.at == "largest" else points[0]
    chosen = frame[frame[x] == at]
    left = row_values(comparison.metric, chosen)
    right = row_values(comparison.other, chosen) if isinstance(comparison.other, str) else comparison.other
    differences = (left - right).rename("difference")
    band = (-math.inf, 0.0) if comparison.below else (0.0, math.inf)
    rows = []
    for key, group in setting_groups(chosen.assign(difference=differences, left=left), by):
        verdict, mean, (low, high) = mean_in_band(group["difference"].to_numpy(float), band, "run")
        label = setting_label(by, key)
        verdict = verdict or not_testable("no value")
        claim = Claim(section, f"{label}: {comparison.label}", verdict, mean, (low, high), claimed)
        other = number(float(np.median(right[group.index])), 3) if isinstance(right, pd.Series) else number(right)
        rows.append(
            [
                label,
                f"{number(group['left'].median(), 3)} / {other}",
                number(mean, 3) + confidence(low, high),
                stated(claim),
            ]
        )
    side = "below" if comparison.below else "above"
    lines = [
        f"### Compared: {comparison.label}",
        "",
        f"At the {comparison.at} {x} ({number(at)}), per setting: the medians over runs of {comparison.metric} and "
        f"of {comparison.other}, and the mean of the runs' paired differences with its 95 % t-interval; PASS when "
        f"the interval lies {side} 0, FAIL when on the other side, INCONCLUSIVE across 0 or with fewer than 3 runs.",
        "",
        markdown_table(["setting", f"{comparison.metric} / {comparison.other}", "difference", "verdict"], rows),
    ]
    return "\n".join(lines)


def medians(trained: pd.DataFrame, untrained: pd.DataFrame, metric: str) -> str:
    """ "trained / untrained": the metric's median over the rows of each."""
    return f"{number(trained[metric].median(), 3)} / {number(untrained[metric].median(), 3)}"
