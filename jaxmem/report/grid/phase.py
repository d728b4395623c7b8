"""Phase diagrams of grid sweeps (`[report.heatmap] levels`): the success rate over seeds per (x, y) cell
and, per x and level, where it first reaches the level as y grows.

Rate: the seeds at threshold over the seeds of a cell (n_success / seeds, jaxmem.report.grid.cells).
Per x and level: the smallest grid y whose rate reaches the level, and the crossing interpolated
linearly in y between it and the grid y below it (whose rate is under the level). A column already at
the level at its smallest y crosses at or below it ("≤"); one that never reaches it has no crossing.
`dips` counts the cells above the first reaching one that fall back under the level.
"""

from __future__ import annotations

import math

import pandas as pd

from jaxmem.report.text import markdown_table, number, percent


def with_rate(cells: pd.DataFrame) -> pd.DataFrame:
    """The cells with `success_rate` = n_success / seeds."""
    return cells.assign(success_rate=cells["n_success"] / cells["seeds"])


def crossing(ys: list[float], rates: list[float], level: float) -> dict:
    """Where one column's rate (ys ascending) first reaches `level`: `y` (grid), `crossing`
    (interpolated; NaN when none), `below_grid` (reached at the smallest y) and `dips`."""
    first = next((i for i, r in enumerate(rates) if r >= level), None)
    if first is None:
        return {"y": None, "crossing": math.nan, "below_grid": False, "dips": 0}
    dips = sum(r < level for r in rates[first + 1 :])
    if first == 0:
        return {"y": ys[0], "crossing": ys[0], "below_grid": True, "dips": dips}
    (y0, r0), (y1, r1) = (ys[first - 1], rates[first - 1]), (ys[first], rates[first])
    return {"y": ys[first], "crossing": y0 + (level - r0) / (r1 - r0) * (y1 - y0), "below_grid": False, "dips": dips}


def phase_boundaries(cells: pd.DataFrame, levels: tuple[float, ...]) -> dict[float, list[dict]]:
    """Per level, one row per x (ascending): x and the column's crossing (see `crossing`)."""
    columns = [(x, c.sort_values("y")) for x, c in cells.groupby("x", sort=True)]
    return {
        level: [{"x": float(x), **crossing(c["y"].tolist(), c["success_rate"].tolist(), level)} for x, c in columns]
        for level in levels
    }


def crossing_text(row: dict) -> str:
    """e.g. "48.2 (grid 64)", "≤ 8", "none"."""
    if row["y"] is None:
        return "none"
    if row["below_grid"]:
        return f"≤ {number(row['y'])}"
    dips = f", {row['dips']} dip{'s' * (row['dips'] > 1)} above" if row["dips"] else ""
    return f"{number(row['crossing'])} (grid {number(row['y'])}{dips})"


def phase_section(x_label: str, y_label: str, cells: pd.DataFrame, boundaries: dict[float, list[dict]]) -> str:
    """The `### Phase diagram` part of the heatmap section: the crossings per x and the rate matrix."""
    levels = list(boundaries)
    xs = [r["x"] for r in boundaries[levels[0]]]
    rows = [[x] + [crossing_text(boundaries[level][i]) for level in levels] for i, x in enumerate(xs)]
    headers = [x_label] + [f"{y_label} at rate {percent(level)}" for level in levels]
    counts = cells.assign(text=[f"{s}/{n}" for s, n in zip(cells["n_success"], cells["seeds"])])
    matrix = counts.pivot(index="y", columns="x", values="text").sort_index(ascending=False)
    matrix_rows = [[y] + list(matrix.loc[y]) for y in matrix.index]
    return "\n".join(
        [
            "### Phase diagram: success rate over seeds",
            "",
            f"Per {x_label}, the {y_label} where the success rate (seeds at threshold / seeds) first reaches "
            f"each level, interpolated linearly in {y_label} from the grid value below it (grid: the first "
            f"{y_label} reaching it; ≤: reached at the smallest {y_label}; none: never; dips: cells above it "
            "that fall back under the level).",
            "",
            markdown_table(headers, rows),
            "",
            f"Seeds at threshold / seeds per cell. Rows: {y_label}, largest first; columns: {x_label}.",
            "",
            markdown_table([f"{y_label} \\ {x_label}"] + [number(x) for x in matrix.columns], matrix_rows),
        ]
    )
