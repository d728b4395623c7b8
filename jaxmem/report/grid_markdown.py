"""report.md sections for grid sweeps (heatmap, floor, boundary, per-point metrics) and the final
metrics of search sweeps at capacity."""

from __future__ import annotations

import pandas as pd

from jaxmem.report.analysis import config_columns, format_number, group_columns, point_table, x_column
from jaxmem.report.final_metrics import capacity_metrics_table
from jaxmem.report.heatmap import varying_fields
from jaxmem.report.markdown import markdown_table
from jaxmem.spec.report_tables import HeatmapSpec, ReportSpec


def metric_label(column: str, train_metric: str | None) -> str:
    """A readable column name: max_metric is "max <train metric>", final_x is "final x"."""
    if column == "max_metric":
        return f"max {train_metric}" if train_metric else "max_metric"
    if column.startswith("final_"):
        return "final " + column[len("final_") :]
    return column


def metric_columns(columns) -> list[str]:
    """max_metric first, then the final_* columns by name."""
    return sorted(
        (c for c in columns if c == "max_metric" or c.startswith("final_")), key=lambda c: (c != "max_metric", c)
    )


def number(value) -> str:
    """Metric values to 4 decimals (format_number would round e.g. 0.99996 to 1)."""
    if isinstance(value, float) and value == value and abs(value) < 1000:
        return f"{value:.4f}"
    return format_number(value)


def comparison(spec: HeatmapSpec) -> str:
    return f"{'≥' if spec.better == 'max' else '≤'} {format_number(spec.threshold)}"


def heatmap_section(
    spec: HeatmapSpec, cells: pd.DataFrame, analysis: dict, train_metric: str | None, plot_name: str | None
) -> str:
    """What the heatmap shows, the floor, the boundary with its monotonicity, and the value matrix."""
    metric = metric_label(spec.metric, train_metric)
    name = metric[:1].upper() + metric[1:]
    xs, ys = sorted(cells["x"].unique()), sorted(cells["y"].unique())
    lines = [
        "## Heatmap",
        "",
        f"{name} over {spec.x_label} (x = `{spec.x}`) and {spec.y_label} (y = `{spec.y}`): "
        f"{len(cells)} cells, {len(xs)} x values × {len(ys)} y values. Per grid point and seed the best "
        f"learning rate counts; cells are means over seeds. A cell reaches the threshold when its value is "
        f"{comparison(spec)}.",
        "",
        floor_text(spec, analysis["floor"], metric),
        "",
        boundary_text(spec, analysis["boundary"], analysis["monotonicity"]),
        "",
        "### Values",
        "",
        f"{name} per cell; bold cells reach the threshold. Rows: {spec.y_label}, largest first; "
        f"columns: {spec.x_label}.",
        "",
        value_matrix(spec, cells),
    ]
    if plot_name is not None:
        lines += ["", f"![heatmap]({plot_name})"]
    return "\n".join(lines)


def floor_text(spec: HeatmapSpec, floor: dict, metric: str) -> str:
    """The floor in x at the largest y, and whether everything left of it fails."""
    x, y = spec.x_label, spec.y_label
    head = f"### Floor in {x}\n\n"
    y_max = format_number(floor["y_max"])
    if floor["floor_x"] is None:
        return head + (
            f"- No {x} reaches the threshold at the largest {y} ({y_max}): the floor lies above the grid "
            f"({floor['cells_below_reaching']} of {floor['cells_below']} cells reach it at smaller {y})."
        )
    found = format_number(floor["floor_x"])
    lines = [f"- Smallest {x} with {metric} {comparison(spec)} at the largest {y} ({y_max}): **{found}**"]
    if not floor["below_x"]:
        lines.append(f"- That is the smallest {x} of the grid: no floor is visible inside it.")
    else:
        below = ", ".join(format_number(v) for v in floor["below_x"])
        verdict = "yes" if floor["clean"] else "no"
        lines.append(
            f"- Every cell with {x} below it ({below}; {floor['cells_below']} cells) fails at every {y}: "
            f"**{verdict}** ({floor['cells_below_reaching']} of them reach the threshold)"
        )
    return head + "\n".join(lines)


def boundary_text(spec: HeatmapSpec, rows: list[dict], mono: dict) -> str:
    """Per x the smallest y reaching the threshold, and whether it falls as x grows."""
    x, y = spec.x_label, spec.y_label
    table = markdown_table(
        [x, f"smallest {y} reaching the threshold", "cells above it that fail", "cells"],
        [[r["x"], r["y"] if r["y"] is not None else "none", r["holes"], r["cells"]] for r in rows],
    )
    bullets = [
        f"- Boundary never rises as {x} grows (no boundary counts as above the grid): "
        f"**{'yes' if mono['non_increasing'] else 'no'}**"
    ]
    for x1, y1, x2, y2 in mono["violations"]:
        bullets.append(
            f"  - rises from {y} = {format_number(y1)} at {x} = {format_number(x1)} to "
            f"{'none' if y2 is None else format_number(y2)} at {x} = {format_number(x2)}"
        )
    found = [r for r in rows if r["y"] is not None]
    falls = f"**{'yes' if mono['tradeoff'] else 'no'}**"
    if len(found) >= 2:
        falls += (
            f" ({y} = {format_number(found[0]['y'])} at {x} = {format_number(found[0]['x'])}, "
            f"{format_number(found[-1]['y'])} at {format_number(found[-1]['x'])})"
        )
    bullets.append(f"- Trade-off, the smallest {y} reaching the threshold falls somewhere as {x} grows: {falls}")
    return f"### Boundary: smallest {y} per {x}\n\n" + table + "\n\n" + "\n".join(bullets)


def value_matrix(spec: HeatmapSpec, cells: pd.DataFrame) -> str:
    """The cells as a y × x table of the metric, bold where the threshold is reached."""
    values = cells.pivot(index="y", columns="x", values=spec.metric).sort_index(ascending=False)
    reaches = cells.pivot(index="y", columns="x", values="reaches").reindex_like(values)
    xs = sorted(values.columns)
    rows = []
    for y in values.index:
        row = [format_number(y)]
        for x in xs:
            v = values.at[y, x]
            text = f"{v:.3f}" if pd.notna(v) else "–"
            hit = reaches.at[y, x]
            row.append(f"**{text}**" if pd.notna(hit) and bool(hit) else text)
        rows.append(row)
    header = [f"{spec.y_label} \\ {spec.x_label}"] + [format_number(x) for x in xs]
    return markdown_table(header, rows)


def points_section(points: pd.DataFrame, spec: HeatmapSpec | None, train_metric: str | None) -> str:
    """Per grid point: its varying fields, [x, y], seeds, best lr, the metric and every final metric."""
    if points.empty:
        return ""
    axes = ["x", "y"] if spec is not None else []
    metrics = metric_columns(points.columns)
    if spec is not None and spec.metric not in metrics:
        metrics.insert(0, spec.metric)
    fields = varying_fields(points)
    columns = fields + axes + ["seeds", "best_lr"] + metrics + (["n_success"] if spec is not None else [])
    table = points.sort_values(fields + axes, kind="stable")
    headers = [
        {
            "x": spec.x_label if spec else "x",
            "y": spec.y_label if spec else "y",
            "best_lr": "best lr",
            "n_success": "seeds at threshold",
        }.get(c, metric_label(c, train_metric))
        for c in columns
    ]
    rows = [[number(r[c]) if c in metrics else r[c] for c in columns] for r in table.to_dict("records")]
    intro = (
        "## Grid points\n\nOne row per grid point: the best learning rate's run per seed, means over seeds. "
        "Final values are at each run's last evaluation (a run that stopped early stops there).\n\n"
    )
    return intro + markdown_table(headers, rows)


def capacity_metrics_section(
    report_spec: ReportSpec,
    searches: pd.DataFrame,
    runs: pd.DataFrame,
    variable: str | None,
    train_metric: str | None,
) -> str:
    """Search sweeps: every metric of the runs at each search's capacity value, mean over searches."""
    table = capacity_metrics_table(searches, runs)
    if table.empty:
        return ""
    x = x_column(report_spec, searches)
    group_by = group_columns(report_spec, searches)
    varying = [c for c in config_columns(searches) if searches[c].astype(str).nunique() > 1]
    info = point_table(searches, x)[["point", *dict.fromkeys(group_by + varying + [x])]]
    table = info.merge(table, on="point").sort_values(group_by + [x], kind="stable")
    keys = list(dict.fromkeys(group_by + varying + [x]))
    metrics = metric_columns(table.columns)
    headers = keys + [f"{variable or 'capacity'} (mean)", "searches"] + [metric_label(c, train_metric) for c in metrics]
    rows = [
        [r[c] for c in keys] + [r["capacity"], r["searches"]] + [number(r[c]) for c in metrics]
        for r in table.to_dict("records")
    ]
    intro = (
        "## Metrics at capacity\n\nFor each search, the best successful run at its capacity (the largest "
        "successful probe); every metric at that run's last evaluation, mean over the searches of a grid point.\n\n"
    )
    return intro + markdown_table(headers, rows)
