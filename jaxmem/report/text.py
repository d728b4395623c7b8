"""How the report writes numbers and tables: one number formatter (`number`) behind every cell, label,
duration, spread and percentage of report.md and the plots."""

from __future__ import annotations

import math
import re

import numpy as np
import pandas as pd

DASH = "–"  # a value that is missing or undefined


def number(value, decimals: int | None = None) -> str:
    """A value as the report writes it: "–" for None and NaN, booleans and integers plainly, other
    values as str. A float with `decimals` gets that many decimals when it keeps two significant digits
    and is below 1000 (0.4381 → "0.438" with 3); otherwise floats from 1000 to 1e9 are rounded, whole
    floats written as integers, and the rest to 4 significant digits (1e-05, 0.04381, 3.466)."""
    if value is None or (isinstance(value, (float, np.floating)) and math.isnan(value)):
        return DASH
    if isinstance(value, (bool, np.bool_)):
        return str(bool(value))
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if not isinstance(value, (float, np.floating)):
        return str(value)
    value = float(value)
    if decimals is not None and (value == 0 or 10 ** (1 - decimals) <= abs(value) < 1000):
        return f"{value:.{decimals}f}"
    if 1000 <= abs(value) < 1e9:
        return f"{value:.0f}"
    return str(int(value)) if value.is_integer() else f"{value:.4g}"


def rounded(value: float, low: float = math.nan, high: float = math.nan) -> str:
    """`value` to the precision its interval [low, high] supports, two significant digits of the half-width
    but no more than three of the largest of them (5.455e-16 in [−3.1, 3.1] → "0.0", 47.13 in [15.8, 97.6]
    → "47", −0.4999999 in [−0.5000001, −0.4999998] → "-0.500"); without an interval as `number` writes it."""
    half = (high - low) / 2
    if not (math.isfinite(half) and half > 0):
        return number(value, 3)
    largest = max(abs(value), abs(low), abs(high))
    decimals = max(0, min(1 - math.floor(math.log10(half)), 2 - math.floor(math.log10(largest))))
    text = f"{value:.{decimals}f}"
    return text[1:] if text.startswith("-") and float(text) == 0 else text


def percent(fraction: float) -> str:
    """0.1 → "10%"."""
    return number(100 * fraction) + "%"


def duration(seconds: float) -> str:
    """Seconds as e.g. "754.2 s (12.6 min)"."""
    text = f"{number(seconds, 1)} s"
    if seconds >= 3600:
        return f"{text} ({number(seconds / 3600, 2)} h)"
    if seconds >= 60:
        return f"{text} ({number(seconds / 60, 1)} min)"
    return text


def mean_std(mean: float, std: float, decimals: int | None = None) -> str:
    """ "mean ± std", the std left out when it is undefined or 0; "–" without a mean."""
    if not np.isfinite(mean):
        return DASH
    text = number(mean, decimals)
    return text + (f" ± {number(std, decimals)}" if np.isfinite(std) and std > 0 else "")


def spread(values, decimals: int | None = None) -> str:
    """mean_std of the finite values (sample std; 0 for equal values, whose computed std can be a round-off
    such as 1e-16); "–" when there are none."""
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v)]
    if not v.size:
        return DASH
    std = (0.0 if v.min() == v.max() else float(v.std(ddof=1))) if v.size >= 2 else math.nan
    return mean_std(float(v[0]) if v.min() == v.max() else float(v.mean()), std, decimals)


UNESCAPED_PIPE = re.compile(r"(?<!\\)\|")


def table_cell(value, written=number) -> str:
    """`value` as `written` writes it, its pipes escaped so that a name such as |L|* stays in one cell."""
    return UNESCAPED_PIPE.sub(r"\|", written(value))


def row_cells(line: str) -> list[str]:
    """The cells of one markdown table row, an escaped pipe (\\|) kept inside its cell."""
    inner = line.strip()
    inner = inner[1:] if inner.startswith("|") else inner
    inner = inner[:-1] if inner.endswith("|") and not inner.endswith("\\|") else inner
    return [cell.strip() for cell in UNESCAPED_PIPE.split(inner)]


def markdown_table(headers: list[str], rows: list[list], written=number) -> str:
    """A GitHub-flavoured markdown table; cells go through `table_cell` (values as `written` writes them)."""
    lines = ["| " + " | ".join(table_cell(h, written) for h in headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(table_cell(c, written) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def group_labels(frame: pd.DataFrame, group_by: list[str]) -> pd.Series:
    """One label per row, e.g. "m_over_d=2, model=mlp"; "all" without grouping."""
    if not group_by:
        return pd.Series("all", index=frame.index)
    labels = [
        ", ".join(f"{c}={number(v)}" for c, v in zip(group_by, values))
        for values in frame[group_by].itertuples(index=False)
    ]
    return pd.Series(labels, index=frame.index, dtype=object)
