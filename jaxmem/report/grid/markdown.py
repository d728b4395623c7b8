"""report.md sections of grid sweeps: the heatmap, its floor and boundary, and the per-point metrics, each
beside the untrained model's value of the metric judged (see jaxmem.report.runs.with_untrained)."""

from __future__ import annotations

import pandas as pd

from jaxmem.report.grid.cells import varying_fields
from jaxmem.report.runs import metric_columns, shown_metric, with_untrained
from jaxmem.report.success import comparison, judged_metric, metric_label
from jaxmem.report.text import markdown_table, number
from jaxmem.report.verdicts import Claim, Verdict, stated
from jaxmem.spec.report_tables import HeatmapSpec
from jaxmem.spec.sweep import SuccessRule


def heatmap_section(
    spec: HeatmapSpec,
    cells: pd.DataFrame,
    analysis: dict,
    metric: str,
    plot_name: str | None,
    untrained: str | None = None,
) -> str:
    """What the heatmap shows (`metric`: its metric's label), the floor, the boundary with its
    monotonicity (`analysis`: jaxmem.report.grid.tradeoff.analyse; {} for a categorical axis), the
    value matrix, and the untrained model's matrix (`untrained`: its column in `cells`, None for none)."""
    name = metric[:1].upper() + metric[1:]
    xs, ys = sorted(cells["x"].unique()), sorted(cells["y"].unique())
    lines = [
        "## Heatmap",
        "",
        f"{name} over {spec.x_label} (x = `{spec.x}`) and {spec.y_label} (y = `{spec.y}`): "
        f"{len(cells)} cells, {len(xs)} x values × {len(ys)} y values. Per grid point and seed the best "
        f"learning rate counts; cells are means over seeds. A cell reaches the threshold when its value is "
        f"{comparison(spec.better, spec.threshold)}.",
        "",
        *(
            [
                floor_text(spec, analysis["floor"], metric, analysis["floor_verdict"]),
                "",
                boundary_text(spec, analysis),
            ]
            if analysis
            else ["A categorical axis (text values, in sorted order) has no floor or boundary: see the values."]
        ),
        "",
        "### Values",
        "",
        f"{name} per cell; bold cells reach the threshold. Rows: {spec.y_label}, largest first; "
        f"columns: {spec.x_label}.",
        "",
        value_matrix(spec, cells),
    ]
    if untrained is not None and untrained in cells and cells[untrained].notna().any():
        lines += ["", untrained_matrix(spec, cells, untrained, name)]
    if plot_name is not None:
        lines += ["", f"![heatmap]({plot_name})"]
    return "\n".join(lines)


def floor_text(spec: HeatmapSpec, floor: dict, metric: str, verdict: Verdict) -> str:
    """The floor in x at the largest y, and whether everything left of it fails (`verdict`)."""
    x, y = spec.x_label, spec.y_label
    head = f"### Floor in {x}\n\n"
    y_max = number(floor["y_max"])
    if floor["floor_x"] is None:
        lines = [
            f"- No {x} reaches the threshold at the largest {y} ({y_max}): the floor lies above the grid "
            f"({floor['cells_below_reaching']} of {floor['cells_below']} cells reach it at smaller {y})."
        ]
    else:
        reaching = f"{metric} {comparison(spec.better, spec.threshold)}"
        lines = [f"- Smallest {x} with {reaching} at the largest {y} ({y_max}): **{number(floor['floor_x'])}**"]
    shown = floor["floor_x"] is not None and floor["below_x"]
    below = f" ({', '.join(number(v) for v in floor['below_x'])}; {floor['cells_below']} cells)" if shown else ""
    claim = Claim(f"Heatmap / Floor in {x}", f"every cell with {x} below the floor fails at every {y}", verdict)
    lines.append(f"- Every cell with {x} below the floor{below} fails at every {y}: {stated(claim)}")
    return head + "\n".join(lines)


def boundary_text(spec: HeatmapSpec, analysis: dict) -> str:
    """Per x the smallest y reaching the threshold, whether it never rises and whether it falls as x grows."""
    x, y, rows = spec.x_label, spec.y_label, analysis["boundary"]
    section = f"Heatmap / Boundary: smallest {y} per {x}"
    table = markdown_table(
        [x, f"smallest {y} reaching the threshold", "cells above it that fail", "cells"],
        [[r["x"], r["y"] if r["y"] is not None else "none", r["holes"], r["cells"]] for r in rows],
    )
    rises = f"Boundary never rises as {x} grows (no boundary counts as above the grid)"
    bullets = [f"- {rises}: {stated(Claim(section, rises, analysis['never_rises']))}"]
    for x1, y1, x2, y2 in analysis["monotonicity"]["violations"]:
        bullets.append(
            f"  - rises from {y} = {number(y1)} at {x} = {number(x1)} to "
            f"{'none' if y2 is None else number(y2)} at {x} = {number(x2)}"
        )
    found = [r for r in rows if r["y"] is not None]
    falls = f"Trade-off, the smallest {y} reaching the threshold falls somewhere as {x} grows"
    ends = (
        f" ({y} = {number(found[0]['y'])} at {x} = {number(found[0]['x'])}, {number(found[-1]['y'])} at "
        f"{number(found[-1]['x'])})"
        if len(found) >= 2
        else ""
    )
    bullets.append(f"- {falls}: {stated(Claim(section, falls, analysis['falls']))}{ends}")
    return f"### Boundary: smallest {y} per {x}\n\n" + table + "\n\n" + "\n".join(bullets)


def untrained_matrix(spec: HeatmapSpec, cells: pd.DataFrame, column: str, name: str) -> str:
    """The untrained model's values of the heatmap's metric (`column`), as a matrix like the trained one's,
    with how many cells reach the threshold without training."""
    reached = int(spec.reaches(cells[column]).sum())
    return "\n".join(
        [
            "### Untrained model",
            "",
            f"{name} of the same runs untrained (their parameters at initialisation, step 0), per cell; bold "
            f"cells reach the threshold without training: {reached} of {len(cells)}.",
            "",
            value_matrix(spec, cells, column),
        ]
    )


def value_matrix(spec: HeatmapSpec, cells: pd.DataFrame, column: str | None = None) -> str:
    """The cells as a y × x table of the metric (or of `column`), bold where the threshold is reached."""
    column = column or spec.metric
    values = cells.pivot(index="y", columns="x", values=column).sort_index(ascending=False)
    reached = cells.assign(reaches=spec.reaches(cells[column]))
    reaches = reached.pivot(index="y", columns="x", values="reaches").reindex_like(values)
    xs = sorted(values.columns)
    rows = []
    for y in values.index:
        row = [number(y)]
        for x in xs:
            v = values.at[y, x]
            text = number(v, 3)
            hit = reaches.at[y, x]
            row.append(f"**{text}**" if pd.notna(hit) and bool(hit) else text)
        rows.append(row)
    header = [f"{spec.y_label} \\ {spec.x_label}"] + [number(x) for x in xs]
    return markdown_table(header, rows)


def points_section(
    points: pd.DataFrame, spec: HeatmapSpec | None, rule: SuccessRule | None, train_metric: str | None
) -> str:
    """Per grid point: its varying fields, [x, y], seeds, best lr, the metric and every final metric, the
    judged metric's (and the heatmap's) beside the untrained model's."""
    if points.empty:
        return ""
    axes = ["x", "y"] if spec is not None else []
    metrics = metric_columns(points.columns)
    if spec is not None and spec.metric not in metrics:
        metrics.insert(0, spec.metric)
    judged = judged_metric(rule, train_metric)
    baselined = {judged, shown_metric(spec.metric, judged) if spec is not None else None}
    metrics = with_untrained(metrics, points.columns, baselined, judged)
    fields = varying_fields(points)
    columns = fields + axes + ["seeds", "best_lr"] + metrics + (["n_success"] if spec is not None else [])
    table = points.sort_values(fields + axes + ["point"], kind="stable")
    headers = [
        {
            "x": spec.x_label if spec else "x",
            "y": spec.y_label if spec else "y",
            "best_lr": "best lr",
            "n_success": "seeds at threshold",
        }.get(c, metric_label(c, rule, train_metric))
        for c in columns
    ]
    rows = [[number(r[c], 4) if c in metrics else r[c] for c in columns] for r in table.to_dict("records")]
    intro = (
        "## Grid points\n\nOne row per grid point: the best learning rate's run per seed, means over seeds. "
        "Final values are at each run's last evaluation (a run that stopped early stops there); untrained "
        "values are the same runs' at initialisation (step 0), before any training.\n\n"
    )
    return intro + markdown_table(headers, rows)
