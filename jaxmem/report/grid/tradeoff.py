"""Where a heatmap's metric reaches its threshold: the floor in x and the success boundary y(x).

Works on the (x, y) cells of jaxmem.report.grid.cells.heatmap_cells (a `reaches` column per cell).

- Floor: the smallest x whose cell at the largest y reaches the threshold; below it, a clean floor
  has no cell reaching at any y.
- Boundary: for each x, the smallest y reaching the threshold (None when no y does). A trade-off
  between the axes shows as a boundary that never rises with x and falls somewhere.
"""

from __future__ import annotations

import math

import pandas as pd


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


def analyse(cells: pd.DataFrame) -> dict:
    """floor, boundary rows and the boundary's monotonicity of a cells table; {} when it is empty."""
    if cells.empty:
        return {}
    rows = boundary(cells)
    return {"floor": floor(cells), "boundary": rows, "monotonicity": monotonicity(rows)}
