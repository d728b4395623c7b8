"""Where a heatmap's metric reaches its threshold: the floor in x and the success boundary y(x).

Works on the (x, y) cells of jaxmem.report.grid.cells.heatmap_cells (a `reaches` column per cell).

- Floor: the smallest x whose cell at the largest y reaches the threshold; below it, a clean floor
  has no cell reaching at any y.
- Boundary: for each x, the smallest y reaching the threshold (None when no y does). A trade-off
  between the axes shows as a boundary that never rises with x and falls somewhere.

Each is judged under the one rule (jaxmem.report.verdicts): "not testable here" with nothing to judge (a
single x; no cell reaching the threshold; for the floor, none at the largest y or none below it), else
INCONCLUSIVE with fewer than 3 distinct x. The floor PASSes when every cell below it fails and FAILs when
one reaches. The boundary FAILs "never rises" on a rise and PASSes otherwise, and PASSes "falls somewhere"
on a fall and FAILs otherwise, each only once the boundary is found at 3 or more x (a rise, to a higher
y or to no boundary, is seen between any two). Cells are means over seeds, read against the threshold:
the grid, not an interval, decides.
"""

from __future__ import annotations

import math

import pandas as pd

from jaxmem.report.verdicts import Verdict, decided, not_testable, too_few_x


def floor(cells: pd.DataFrame) -> dict:
    """The floor in x at the largest y, and whether every cell left of it fails at every y."""
    y_max = float(cells["y"].max())
    top = cells[cells["y"] == y_max].sort_values("x")
    reaching = top[top["reaches"]]
    floor_x = float(reaching["x"].iloc[0]) if len(reaching) else None
    below = cells[cells["x"] < floor_x] if floor_x is not None else cells
    return {
        "y_max": y_max,
        "floor_x": floor_x,
        "below_x": sorted(float(v) for v in below["x"].unique()),
        "cells_below": len(below),
        "cells_below_reaching": int(below["reaches"].sum()),
        "clean": bool(len(below) > 0 and not below["reaches"].any()),
    }


def boundary(cells: pd.DataFrame) -> list[dict]:
    """Per x (ascending): the smallest y reaching the threshold, and failing cells above it ("holes")."""
    rows = []
    for x, column in cells.sort_values(["x", "y"]).groupby("x", sort=True):
        reaching = column[column["reaches"]]
        y = float(reaching["y"].iloc[0]) if len(reaching) else None
        holes = int((~column["reaches"] & (column["y"] > y)).sum()) if y is not None else 0
        rows.append({"x": float(x), "y": y, "holes": holes, "cells": len(column)})
    return rows


def monotonicity(rows: list[dict]) -> dict:
    """Whether the boundary y never rises as x grows (no boundary counts as +inf), and where it does.

    `tradeoff` is True when it also falls somewhere: a larger x needs a strictly smaller y.
    """
    ys = [math.inf if r["y"] is None else r["y"] for r in rows]
    violations = [
        (rows[i]["x"], rows[i]["y"], rows[i + 1]["x"], rows[i + 1]["y"])
        for i in range(len(rows) - 1)
        if ys[i + 1] > ys[i]
    ]
    finite = [y for y in ys if math.isfinite(y)]
    return {
        "non_increasing": not violations,
        "violations": violations,
        "tradeoff": len(finite) >= 2 and any(b < a for a, b in zip(finite, finite[1:])),
    }


def untestable(cells: pd.DataFrame) -> Verdict | None:
    """ "not testable here" for a single x or no cell reaching the threshold, INCONCLUSIVE for 2 x; else None."""
    n_x = cells["x"].nunique()
    if n_x == 1:
        return not_testable("a single x value")
    if not cells["reaches"].any():
        return not_testable("no cell reaches the threshold")
    return too_few_x(n_x)


def floor_verdict(cells: pd.DataFrame, found: dict) -> Verdict:
    """Whether every cell left of the floor (`found`: floor) fails at every y."""
    if found["floor_x"] is None:
        return not_testable("no x reaches the threshold at the largest y")
    if not found["below_x"]:
        return not_testable("the floor is the smallest x of the grid")
    unknown = untestable(cells)
    if unknown is not None:
        return unknown
    return decided(found["clean"], f"{found['cells_below_reaching']} of {found['cells_below']} cells reach it")


def boundary_verdicts(cells: pd.DataFrame, rows: list[dict], mono: dict) -> tuple[Verdict, Verdict]:
    """The boundary (`rows`: boundary; `mono`: monotonicity) never rises, and falls somewhere."""
    unknown = untestable(cells)
    if unknown is not None:
        return unknown, unknown
    found = sum(r["y"] is not None for r in rows)
    few = too_few_x(found, noun="x value with a boundary", nouns="x values with a boundary")
    steps = len(mono["violations"])
    rises = decided(False, f"{steps} rise{'' if steps == 1 else 's'}") if steps else few or decided(True)
    return rises, few or decided(mono["tradeoff"], "" if mono["tradeoff"] else "it never falls")


def analyse(cells: pd.DataFrame) -> dict:
    """floor, boundary rows, the boundary's monotonicity and the verdicts (floor_verdict, never_rises,
    falls) of a cells table; {} when it is empty."""
    if cells.empty:
        return {}
    rows, found = boundary(cells), floor(cells)
    mono = monotonicity(rows)
    never_rises, falls = boundary_verdicts(cells, rows, mono)
    return {
        "floor": found,
        "boundary": rows,
        "monotonicity": mono,
        "floor_verdict": floor_verdict(cells, found),
        "never_rises": never_rises,
        "falls": falls,
    }
