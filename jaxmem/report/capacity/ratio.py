"""Per-point ratios of a search sweep ([report] ratio): an expression of the searched variable and the
config (e.g. n / n_cnt) over the searches answered inside their range, as the median and min–max of
each grid point, and how many point medians lie inside the expected range: PASS when every one does, over
3 or more points (jaxmem.report.verdicts: INCONCLUSIVE below), FAIL when one does not."""

from __future__ import annotations

import pandas as pd

from jaxmem.report.capacity.points import point_table
from jaxmem.report.capacity.searches import usable_mask, x_column
from jaxmem.report.expressions import row_values
from jaxmem.report.text import number
from jaxmem.report.verdicts import MIN_X, Claim, decided, stated, too_few_x
from jaxmem.spec.report_tables import Ratio, ReportSpec

STATS = ("median", "min", "max")


def ratio_table(ratio: Ratio, rows: pd.DataFrame, variable: str) -> pd.DataFrame:
    """Per point (the index): `median`, `min`, `max` and `n` of the ratio over the answered searches `rows`."""
    values = row_values(ratio.expr, rows, {variable: "capacity"})
    return values.groupby(rows["point"]).agg([*STATS, "count"]).rename(columns={"count": "n"})


def with_ratios(points: pd.DataFrame, ratios: tuple[Ratio, ...], rows: pd.DataFrame, variable: str) -> pd.DataFrame:
    """The point table with "<label> median", "<label> min" and "<label> max" columns per ratio."""
    for ratio in ratios:
        table = ratio_table(ratio, rows, variable)[list(STATS)]
        points = points.join(table.add_prefix(f"{ratio.label} "), on="point")
    return points


def capacity_points(report_spec: ReportSpec, searches: pd.DataFrame, variable: str) -> pd.DataFrame:
    """capacity.csv: the point table (jaxmem.report.capacity.points) with the report's ratio columns."""
    x = x_column(report_spec, searches)
    rows = searches[usable_mask(searches, x)]
    return with_ratios(point_table(searches, x), report_spec.ratios, rows, variable)


def ratio_cell(row: dict, ratio: Ratio) -> str:
    """e.g. "2.5 (2–3)": the median and the min–max over the searches; "–" without any."""
    median, lo, hi = (row[f"{ratio.label} {s}"] for s in STATS)
    return number(median) + ("" if pd.isna(median) else f" ({number(lo)}–{number(hi)})")


def ratio_summary(ratio: Ratio, table: pd.DataFrame) -> str:
    """One line: the range of the point medians and of every search, and the expectation's verdict."""
    table = table[table["n"] > 0]
    if table.empty:
        return f"- {ratio.label}: no answered search."
    text = (
        f"- {ratio.label}: point medians {number(table['median'].min())}–{number(table['median'].max())} "
        f"over {len(table)} points (single searches {number(table['min'].min())}–{number(table['max'].max())})"
    )
    if ratio.expect is None:
        return text + "."
    lo, hi = ratio.expect
    inside = int(table["median"].between(lo, hi).sum())
    outside = decided(False) if inside < len(table) else None
    verdict = outside or too_few_x(len(table), MIN_X, "point") or decided(True)
    claim = Claim(
        "Capacity", f"{ratio.label}: every point median in [{number(lo)}, {number(hi)}]", verdict, band=(lo, hi)
    )
    return text + f"; medians in [{number(lo)}, {number(hi)}]: {inside} of {len(table)}, {stated(claim)}."
