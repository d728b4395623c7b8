"""Expressions of the report's tables (jaxmem.spec.expr) evaluated on the rows of a runs or searches table."""

from __future__ import annotations

import pandas as pd

from jaxmem.spec.expr import evaluate, names_in


def row_values(expression: str, frame: pd.DataFrame, bind: dict[str, str] | None = None) -> pd.Series:
    """The expression evaluated on each row's columns (floats); `bind` maps a name to the column that
    holds its value (e.g. the searched variable to `capacity`). A field that follows a bound name (its
    cell holds that name, e.g. M = "N" where M = N: jaxmem.report.export.effective_point) takes its value."""
    bind = bind or {}
    wanted = names_in(expression) | set(bind)
    columns = {name: bind.get(name, name) for name in wanted}
    columns = {name: column for name, column in columns.items() if column in frame}
    values = []
    for row in frame[list(columns.values())].itertuples(index=False):
        names = {name: v.item() if hasattr(v, "item") else v for name, v in zip(columns, row)}
        names = {name: names[v] if isinstance(v, str) and v in bind and v in names else v for name, v in names.items()}
        values.append(float(evaluate(expression, names)))
    return pd.Series(values, index=frame.index, dtype=float)


def rows_kept(where: tuple, frame: pd.DataFrame) -> pd.DataFrame:
    """The rows of `frame` whose columns hold one of the values `where` ((field, values), ...) keeps for each
    field; none where a field is no column."""
    for name, values in where:
        frame = frame[frame[name].isin(values)] if name in frame else frame.iloc[:0]
    return frame
