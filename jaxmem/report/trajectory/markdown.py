"""report.md sections of trajectory sweeps: what was recorded, first and last values, crossing times,
plateaus, the escape-time law, asymptotic rates and trends.

The tables take the stage table of jaxmem.report.trajectory.stages (and the rate and trend tables of
jaxmem.report.trajectory.rates) with two label columns added: `panel` (the group_by values) and
`series` (the color_by values); "all" when there are none.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from jaxmem.report.text import DASH, markdown_table, number, percent, spread
from jaxmem.report.trajectory.plot import Level
from jaxmem.report.trajectory.rates import MIN_RUNS, RATES_CSV, rate_verdict, trend_verdict
from jaxmem.report.trajectory.stages import crossing_column, crossing_verdict, plateau_column
from jaxmem.report.verdicts import MIN_X, Claim, Verdict, confidence, stated
from jaxmem.spec.report_tables import TrajectorySpec

MAX_RUN_ROWS = 40
RULE_CROSSING = (
    "A crossing is the first evaluation at which the metric is at or past the level; its step is interpolated "
    "linearly between that evaluation and the one before it (time = step · lr). Runs that never cross count "
    'as "never" ("not yet" while still running) and are left out of the means.'
)


def key_of(panel: str, series: str) -> str:
    """One row label from a panel and a series label."""
    parts = [p for p in (panel, series) if p != "all"]
    return ", ".join(parts) if parts else "all runs"


def overview_section(
    frame: pd.DataFrame,
    runs: pd.DataFrame,
    spec: TrajectorySpec,
    metrics: list[str],
    all_metrics: list[str],
    levels: dict[str, list[Level]],
    plot_name: str | None,
) -> str:
    """What was recorded and the chosen metrics at each run's first and last evaluation (the first at step 0
    is the untrained model: so named when every run's is)."""
    status = runs["status"].value_counts()
    counts = ", ".join(f"{int(status[s])} {s}" for s in ("finished", "running", "diverged") if s in status)
    lines = [
        "## Trajectories",
        "",
        f"{len(runs)} runs with recorded trajectories ({counts}); {len(frame)} evaluations in all, up to step "
        f"{number(int(frame['step'].max()))}. Recorded metrics: {', '.join(all_metrics)}. "
        f"Every run and evaluation is a row of `trajectories.csv` (time = step · lr).",
    ]
    texts = {panel: "; ".join(f"{lv.label} = {number(lv.y)}" for lv in lines) for panel, lines in levels.items()}
    texts = {panel: text for panel, text in texts.items() if text}
    if len(set(texts.values())) == 1:
        lines += ["", f"Reference lines: {next(iter(texts.values()))}."]
    elif texts:
        lines += ["", "Reference lines: " + "; ".join(f"{text} ({panel})" for panel, text in texts.items()) + "."]
    first = frame.groupby("run_id", sort=False).head(1).set_index("run_id")
    last = frame.groupby("run_id", sort=False).tail(1).set_index("run_id")
    rows = []
    for (panel, series), group in runs.groupby(["panel", "series"], sort=False):
        ids = group["run_id"]
        row = [key_of(panel, series), len(group), spread(last.loc[ids, "step"])]
        row += [f"{spread(first.loc[ids, m])} → {spread(last.loc[ids, m])}" for m in metrics]
        rows.append(row)
    untrained = bool((first["step"] == 0).all())
    start = "untrained" if untrained else "first"
    headers = ["runs of", "runs", "last step"] + [f"{m}: {start} → last" for m in metrics]
    when = "untrained (step 0, before any training)" if untrained else "first recorded evaluation"
    lines += [
        "",
        f"Means (± std over runs) at each run's {when} and last recorded evaluation:",
        "",
        markdown_table(headers, rows),
    ]
    if plot_name is not None:
        lines += ["", f"![trajectory]({plot_name})"]
    return "\n".join(lines)


def crossing_text(value: float, status: str) -> str:
    if math.isfinite(value):
        return number(value)
    return "not yet" if status == "running" else "never"


def crossings_section(stages: pd.DataFrame, spec: TrajectorySpec, csv_name: str) -> str:
    """Crossing times in x units per panel and series (mean ± std, runs crossed / runs), and per run."""
    if not spec.crossings:
        return ""
    unit = spec.x
    levels = []
    for c in spec.crossings:
        values = stages[crossing_column(c.label, "level")].astype(float)
        level = number(float(values.iloc[0])) if values.nunique() <= 1 else "per run"
        sign = "≤" if c.direction == "below" else "≥"
        levels.append(f"- {c.label}: {c.metric} {sign} `{c.level}` ({level})")
    rows = []
    for (panel, series), group in stages.groupby(["panel", "series"], sort=False):
        row = [key_of(panel, series), len(group)]
        for c in spec.crossings:
            values = group[crossing_column(c.label, unit)].astype(float)
            verdict = f" {reached(c, group, unit)}" if c.judged else ""
            row.append(f"{spread(values)} ({int(np.isfinite(values).sum())}/{len(group)}){verdict}")
        rows.append(row)
    headers = ["runs of", "runs"] + [f"{c.label} [{unit}]" for c in spec.crossings]
    lines = [
        "### Crossing times",
        "",
        RULE_CROSSING,
        "",
        *levels,
        "",
        f"Mean ± std over runs, in {unit}s (runs crossed / runs), and, for a crossing the spec judges (`reached`, "
        f"`after`), the verdict that every run reaches it (in order after the one named by `after`): FAIL when a "
        f"finished run does not, PASS over {MIN_X} or more runs that all do, else INCONCLUSIVE:",
        "",
        markdown_table(headers, rows),
    ]
    if len(stages) <= MAX_RUN_ROWS:
        per_run = [
            [r["run_id"], r["status"], key_of(r["panel"], r["series"]), number(r["seed"])]
            + [crossing_text(float(r[crossing_column(c.label, unit)]), r["status"]) for c in spec.crossings]
            for r in stages.to_dict("records")
        ]
        lines += ["", "Per run:", "", markdown_table(["run", "status", "runs of", "seed"] + headers[2:], per_run)]
    lines += ["", f"Per run, in steps and time, with the plateaus: `{csv_name}`."]
    return "\n".join(lines)


def reached(crossing, group: pd.DataFrame, unit: str) -> str:
    """The stated verdict that every run of `group` reaches `crossing` (stages.crossing_verdict)."""
    times = group[crossing_column(crossing.label, unit)].to_numpy(float)
    earlier = None if crossing.after is None else group[crossing_column(crossing.after, unit)].to_numpy(float)
    verdict = crossing_verdict(times, (group["status"] != "running").to_numpy(), earlier)
    runs_of = key_of(*group[["panel", "series"]].iloc[0])
    order = f" after {crossing.after}" if crossing.after else ""
    return stated(Claim("Trajectories / Crossing times", f"{crossing.label} ({runs_of}): every run{order}", verdict))


def plateaus_section(stages: pd.DataFrame, spec: TrajectorySpec) -> str:
    """Per plateau: first and last step in the band, the length, and how contiguous the band is."""
    if not spec.plateaus:
        return ""
    unit = spec.x
    lines = [
        "### Plateaus",
        "",
        "The first and last evaluation with |metric − near| ≤ tol and the length between them (means ± std over "
        "the runs that entered the band); *contiguous* counts the evaluations in the band over all evaluations "
        "from the first to the last.",
    ]
    for p in spec.plateaus:
        rows = []
        for (panel, series), group in stages.groupby(["panel", "series"], sort=False):
            in_band = int(group[plateau_column(p.label, "in_band")].sum())
            between = int(group[plateau_column(p.label, "between")].sum())
            entered = int((group[plateau_column(p.label, "in_band")] > 0).sum())
            rows.append(
                [key_of(panel, series), f"{entered}/{len(group)}"]
                + [spread(group[plateau_column(p.label, w, unit)]) for w in ("first", "last", "length")]
                + [f"{in_band}/{between}" if between else DASH]
            )
        headers = ["runs of", "runs in band", f"first [{unit}]", f"last [{unit}]", f"length [{unit}]", "contiguous"]
        lines += ["", f"**{p.label}**: {p.metric} within {number(p.tol)} of `{p.near}`", ""]
        lines.append(markdown_table(headers, rows))
    return "\n".join(lines)


def escape_section(fits: pd.DataFrame, ratios: pd.DataFrame, spec: TrajectorySpec, plot_name: str | None) -> str:
    """Fitted against predicted slopes with their ratio and verdict, slope ratios between crossings."""
    escape = spec.escape
    if escape is None or fits.empty:
        return ""
    tolerance = percent(escape.tolerance)
    rows = []
    for r in fits.to_dict("records"):
        slope = number(r["slope"])
        if math.isfinite(r["slope_se"]):
            slope += f" ± {number(r['slope_se'])}{confidence(r['slope_lo'], r['slope_hi'])}"
        group = r["group"] if escape.group_by else "all runs"
        verdict = escape_claim(r, group, escape.tolerance) if r["verdict"] else DASH
        ratio = number(r["ratio"], 3)
        rows.append([r["crossing"], group, f"{r['n']}/{r['runs']}", slope, r["r2"], r["predicted"], ratio, verdict])
    headers = [
        "crossing",
        "group",
        "runs crossed",
        f"fitted slope [{escape.y}s per unit x]",
        "r²",
        "predicted",
        "ratio",
    ]
    headers.append(f"within {tolerance}")
    lines = [
        "### Escape-time law",
        "",
        f"Least squares of each crossing (in {escape.y}s) against x = `{escape.x}` ({escape.x_label}) over the runs "
        "that crossed, slope ± its standard error (95 % CI); predicted slopes are expressions of the config "
        f"(`{', '.join(f'{k} = {v}' for k, v in escape.predicted.items()) or 'none given'}`); ratio = fitted / "
        f"predicted. PASS when the slope's 95 % interval lies within {tolerance} of the predicted slope, which "
        "needs 3 or more distinct x among the runs that crossed; INCONCLUSIVE where the runs cannot decide.",
        "",
        markdown_table(headers, rows),
    ]
    if not ratios.empty:
        rows = [
            [r["group"] if escape.group_by else "all runs", r["crossings"], r["fitted"], r["predicted"]]
            for r in ratios.to_dict("records")
        ]
        lines += [
            "",
            "Slope ratios between crossings:",
            "",
            markdown_table(["group", "ratio of", "fitted", "predicted"], rows),
        ]
    if plot_name is not None:
        lines += ["", f"![escape]({plot_name})"]
    return "\n".join(lines)


def escape_claim(fit: dict, group: str, tolerance: float) -> str:
    """The verdict of one escape fit (jaxmem.report.trajectory.escape.escape_fits' row) as report.md writes it."""
    interval = sorted(fit[side] / fit["predicted"] for side in ("slope_lo", "slope_hi"))
    claim = Claim(
        "Trajectories / Escape-time law",
        f"{fit['crossing']} ({group}): fitted / predicted slope within {percent(tolerance)}",
        Verdict(fit["verdict"], fit["reason"]),
        fit["ratio"],
        tuple(interval),
        (1 - tolerance, 1 + tolerance),
    )
    return stated(claim)


def rate_claim(group: pd.DataFrame, label: str, runs_of: str, tolerance: float) -> str:
    """The verdict of one rate over a group's runs (jaxmem.report.trajectory.rates.rate_verdict), stated."""
    verdict, mean, (low, high) = rate_verdict(group["ratio"].to_numpy(float), tolerance)
    if verdict is None:
        return DASH
    claim = Claim(
        "Trajectories / Asymptotic rates",
        f"{label} ({runs_of}): fitted / predicted slope within {percent(tolerance)}",
        verdict,
        mean,
        (low, high),
        (1 - tolerance, 1 + tolerance),
    )
    return stated(claim)


def rates_section(rates: pd.DataFrame, trends: pd.DataFrame, spec: TrajectorySpec) -> str:
    """Mean ± std of the fitted rates against their predictions, and the trends, per panel and series."""
    lines = []
    if not rates.empty:
        rows = []
        tolerances = {r.label: r.tolerance for r in spec.rates}
        for (label, panel, series), group in rates.groupby(["rate", "panel", "series"], sort=False):
            within = group["within"].dropna()
            steps = f"{spread(group['from_step'])} – {spread(group['to_step'])}"
            row = [label, key_of(panel, series), len(group), steps, spread(group["slope"]), spread(group["predicted"])]
            counted = f"{int(within.sum())}/{len(within)}" if len(within) else DASH
            verdict = rate_claim(group, label, key_of(panel, series), tolerances[label])
            rows.append(row + [spread(group["ratio"]), counted, verdict])
        tolerance = ", ".join(f"{r.label}: {percent(r.tolerance)}" for r in spec.rates)
        lines += [
            "### Asymptotic rates",
            "",
            "Per run, the least-squares slope over the evaluations of the last decades of steps, or of the rate's "
            "window (against ln step; of ln metric for power laws; of ln metric against step for linear rates); "
            f"predicted from the run's config and final metrics. Within ({tolerance}) "
            "counts the runs whose |slope / predicted − 1| is inside the tolerance; the verdict reads the mean ratio's "
            "95 % t-interval over the runs: PASS inside [1 − tolerance, 1 + tolerance], FAIL wholly outside, "
            f"INCONCLUSIVE across an edge or with fewer than {MIN_RUNS} runs. Per run: `{RATES_CSV}`.",
            "",
            markdown_table(
                ["rate", "runs of", "runs", "steps", "slope", "predicted", "slope / predicted", "within", "verdict"],
                rows,
            ),
        ]
    if not trends.empty:
        rows = []
        for (label, panel, series), group in trends.groupby(["trend", "panel", "series"], sort=False):
            monotone = int((group["against"] == 0).sum())
            direction = next(t.direction for t in spec.trends if t.label == label)
            claim = Claim(
                "Trajectories / Trends",
                f"{label} ({key_of(panel, series)}): {direction} in every run",
                trend_verdict(group["against"].to_numpy()),
                float(monotone),
            )
            rows.append(
                [
                    label,
                    key_of(panel, series),
                    f"{monotone}/{len(group)}",
                    int(group["against"].sum()),
                    spread(group["first"]) + " → " + spread(group["last"]),
                    stated(claim),
                ]
            )
        directions = "; ".join(f"{t.label}: {t.direction} (tol {number(t.tol)})" for t in spec.trends)
        lines += [
            "",
            "### Trends",
            "",
            f"{directions}. A run is monotone when no evaluation moves against the direction by more than "
            f"tol × |value|. Verdict: FAIL when a run is not monotone, PASS when each of {MIN_RUNS} or more runs is, "
            "INCONCLUSIVE with fewer runs.",
            "",
            markdown_table(["trend", "runs of", "monotone runs", "moves against", "first → last", "verdict"], rows),
        ]
    return "\n".join(lines).strip()
