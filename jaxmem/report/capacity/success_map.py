"""The success map of a search sweep ([report] success_map): every probe on (x, searched value), its
success rate over the seeds that probed it, and each seed's answer.

A probe of one search (point, seed, value) succeeds when any of its learning rates does. Probes of
grid points that share a panel (the group_by combination) and an x are pooled.
"""

from __future__ import annotations

import pandas as pd

from jaxmem.report.capacity.searches import censored_side
from jaxmem.report.expressions import row_values
from jaxmem.report.text import group_labels, markdown_table, number
from jaxmem.spec.report_tables import ReportSpec


def map_axes(report_spec: ReportSpec) -> tuple[str, list[str]]:
    """The map's x expression and group_by, the [report] ones where the map leaves them out."""
    spec = report_spec.success_map
    group_by = report_spec.group_by if spec.group_by is None else spec.group_by
    return spec.x or report_spec.x, list(group_by)


def placed(frame: pd.DataFrame, report_spec: ReportSpec) -> pd.DataFrame:
    """`frame` with its panel (`group`) and `x` columns."""
    x, group_by = map_axes(report_spec)
    return frame.assign(group=group_labels(frame, group_by), x=row_values(x, frame))


def probe_table(report_spec: ReportSpec, runs: pd.DataFrame) -> pd.DataFrame:
    """success_map.csv: one row per (group, x, value), sorted: seeds (that probed it), successes, rate."""
    probes = runs.assign(value=pd.to_numeric(runs["value"], errors="coerce"), success=runs["success"].fillna(False))
    probes = probes.dropna(subset=["value"])
    probes["success"] = probes["success"].astype(bool)
    first = probes.groupby(["point", "seed", "value"], sort=False)
    per_seed = first.first().drop(columns="success").join(first["success"].any()).reset_index()
    per_seed = placed(per_seed, report_spec)
    grouped = per_seed.groupby(["group", "x", "value"], sort=True)["success"]
    table = grouped.agg(seeds="count", successes="sum").reset_index()
    table["successes"] = table["successes"].astype(int)
    return table.assign(rate=table["successes"] / table["seeds"])


def answers(report_spec: ReportSpec, searches: pd.DataFrame) -> pd.DataFrame:
    """Each search's group, x and answer (`capacity`; NaN when it has none) and its `censored` side
    (no rows before the first search finishes)."""
    if searches.empty:
        return pd.DataFrame(columns=["group", "x", "seed", "capacity", "censored"])
    frame = placed(searches, report_spec)
    frame["capacity"] = pd.to_numeric(frame["capacity"], errors="coerce")
    frame["censored"] = censored_side(searches)
    return frame[["group", "x", "seed", "capacity", "censored"]]


def answer_text(rows: pd.DataFrame) -> str:
    """The answers of one (group, x), ascending; censored ones as "≥ v" / "≤ v" / "none"."""
    signs = {"above": "≥ ", "below": "≤ "}
    cells = sorted(rows.itertuples(), key=lambda r: (pd.isna(r.capacity), r.capacity))
    return ", ".join(("none" if pd.isna(r.capacity) else signs.get(r.censored, "") + number(r.capacity)) for r in cells)


def success_map_section(
    report_spec: ReportSpec, table: pd.DataFrame, searches: pd.DataFrame, plot_name: str | None, variable: str
) -> str:
    """The `## Success map` section: per panel and x, every probed value with its successes over the
    seeds that probed it, and the seeds' answers."""
    x, group_by = map_axes(report_spec)
    x_label = report_spec.success_map.x_label or x
    found = answers(report_spec, searches)
    rows = []
    for (group, x_value), part in table.groupby(["group", "x"], sort=True):
        probes = " · ".join(f"{number(r.value)}: {r.successes}/{r.seeds}" for r in part.itertuples())
        mine = found[(found["group"] == group) & (found["x"] == x_value)]
        rows.append(([group] if group_by else []) + [x_value, probes, answer_text(mine)])
    headers = (["group"] if group_by else []) + [x_label, f"{variable}: successful seeds / seeds probed", "answers"]
    intro = (
        f"## Success map\n\nEvery probe of the searches by {x_label} and {variable}: the seeds whose search "
        f"probed that {variable} and how many of them succeeded (at any learning rate), with each search's "
        f"answer (≥ / ≤: censored above / below its range). Table: success_map.csv."
        + (" No search has finished yet: the map holds the probes run so far." if searches.empty else "")
    )
    text = f"{intro}\n\n" + markdown_table(headers, rows)
    return text + (f"\n\n![success map]({plot_name})" if plot_name else "")
