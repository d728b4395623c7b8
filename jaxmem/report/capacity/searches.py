"""The searches table as the capacity report reads it: which columns describe a grid point, the searched
variable, the report's x and group_by columns, and which searches answered inside their range.

A search row (jaxmem.driver.sweep) holds `capacity`, the answer: the largest value that succeeds, or
with goal "smallest" the smallest; `first_failure`, the value just past it; and `censored`: "" when
the answer lies inside the range searched, "above" when it lies above (the answer is at least the last
value probed) and "below" when it lies below.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from jaxmem.persistence.store import SEARCH_COLUMNS
from jaxmem.spec.report_tables import ReportSpec

# Every column of the searches table except the grid point's own fields (spread from `config`).
FIXED_COLUMNS = tuple(c for c in SEARCH_COLUMNS if c != "config")


def config_columns(searches: pd.DataFrame) -> list[str]:
    """The columns of `searches` that describe the grid point (everything not fixed)."""
    return [c for c in searches.columns if c not in FIXED_COLUMNS]


def varying_columns(searches: pd.DataFrame) -> list[str]:
    """The config columns taking more than one value over the searches."""
    return [c for c in config_columns(searches) if searches[c].astype(str).nunique() > 1]


def search_variable(searches: pd.DataFrame) -> str:
    """The single searched variable name (e.g. "N")."""
    names = searches["variable"].dropna().unique()
    if len(names) != 1:
        raise ValueError(f"expected one searched variable, found {sorted(map(str, names))}")
    return str(names[0])


def x_column(report_spec: ReportSpec, searches: pd.DataFrame) -> str:
    """The x-axis column named by the report spec (default "params"), checked to exist."""
    x = report_spec.x
    if x not in searches.columns:
        raise ValueError(f"report x column {x!r} is not in the searches (columns: {list(searches.columns)})")
    return x


def group_columns(report_spec: ReportSpec, searches: pd.DataFrame) -> list[str]:
    """The report's group_by columns, checked to exist."""
    group_by = list(report_spec.group_by)
    missing = [c for c in group_by if c not in searches.columns]
    if missing:
        raise ValueError(
            f"report group_by columns {missing} are not in the searches (columns: {list(searches.columns)})"
        )
    return group_by


def censored_side(searches: pd.DataFrame) -> pd.Series:
    """Each search's `censored` as "above", "below" or "" (a missing cell is uncensored)."""
    return searches["censored"].fillna("").astype(str).str.strip()


def usable_mask(searches: pd.DataFrame, x: str) -> pd.Series:
    """Searches answered inside their range with a finite positive capacity and a finite x: what the
    point table, the linear fits and the ratios use (the power law and the log-log plot also need x > 0)."""
    capacity = pd.to_numeric(searches["capacity"], errors="coerce")
    xs = pd.to_numeric(searches[x], errors="coerce")
    return (capacity > 0) & np.isfinite(capacity) & np.isfinite(xs) & (censored_side(searches) == "")
