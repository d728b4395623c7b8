"""Non-monotone searches: a search answered by the rule's stated definition (`[report] search_answer =
"stable"`), and the notes that flag them under the tables that abbreviate the searches.

A search is non-monotone (the searches table's `non_monotone`) when one of its probes succeeded beyond
one that failed: with goal "smallest", a success below a failure (seed 0 at α = 0.3 succeeds at
l_tr = 3, fails at 4 and 5, succeeds at 6). Its bracket's answer (3) then depends on which probes it
happened to test. The stable answer reads every probe of the search from the runs (a probe succeeds
when any of its learning rates does): with goal "smallest" the smallest probed value from which every
larger probed value succeeds (6), with "largest" the largest up to which every smaller one succeeds.
It is censored as the bracket would be where no probed value qualifies (below the range where every
probe succeeds, with goal "smallest"). Only non-monotone searches change (a monotone search's bracket
answer is its stable answer); the bits stored at a changed answer are not known to the report (NaN).
"""

from __future__ import annotations

import math

import pandas as pd

from jaxmem.report.capacity.searches import varying_columns
from jaxmem.report.text import number

PROBE_COLUMNS = ("point", "seed", "value", "success")
DEFINITION = {
    "smallest": "the smallest probed value from which every larger one succeeds",
    "largest": "the largest probed value up to which every smaller one succeeds",
}


def non_monotone(searches: pd.DataFrame) -> pd.Series:
    """Whether each search is non-monotone (False where the column is missing)."""
    if "non_monotone" not in searches:
        return pd.Series(False, index=searches.index)
    return searches["non_monotone"].fillna(False).astype(bool)


def probe_outcomes(runs: pd.DataFrame | None) -> dict[tuple[str, int], list[tuple[int, bool]]]:
    """Per (point, seed): its probed values ascending, each with whether any of its runs succeeded."""
    if runs is None or runs.empty or not set(PROBE_COLUMNS) <= set(runs.columns):
        return {}
    probed = runs.dropna(subset=["value"]).groupby(["point", "seed", "value"])["success"].any()
    out: dict[tuple[str, int], list[tuple[int, bool]]] = {}
    for (point, seed, value), ok in probed.items():
        out.setdefault((str(point), int(seed)), []).append((int(value), bool(ok)))
    return out


def stable_answer(probes: list[tuple[int, bool]], goal: str) -> tuple[float, float, str] | None:
    """(capacity, first_failure, censored) by the stable definition, in the searches table's convention;
    None where the answer lies past the far end of the probes (as the bracket's censoring says)."""
    values, ok = [float(v) for v, _ in probes], [o for _, o in probes]
    if goal == "largest":
        if not ok[0]:
            return None
        last = next((i - 1 for i in range(1, len(ok)) if not ok[i]), len(ok) - 1)
        return (values[-1], math.nan, "above") if last == len(ok) - 1 else (values[last], values[last + 1], "")
    if not ok[-1]:
        return None
    first = next((i + 1 for i in range(len(ok) - 2, -1, -1) if not ok[i]), 0)
    return (values[0], math.nan, "below") if first == 0 else (values[first], values[first - 1], "")


def stable_searches(searches: pd.DataFrame, runs: pd.DataFrame | None, goal: str) -> pd.DataFrame:
    """`searches` with every non-monotone search answered by the stable definition (module docstring)."""
    flagged = non_monotone(searches)
    probes = probe_outcomes(runs) if flagged.any() else {}
    out = searches.copy()
    for i in searches.index[flagged]:
        found = probes.get((str(searches.at[i, "point"]), int(searches.at[i, "seed"])))
        answer = stable_answer(found, goal) if found else None
        if answer is not None:
            if answer[0] != out.at[i, "capacity"] and "bits" in out:
                out.at[i, "bits"] = math.nan
            out.loc[i, ["capacity", "first_failure", "censored"]] = list(answer)
    return out


def unit_label(search: pd.Series, columns: list[str]) -> str:
    """e.g. "alpha=0.3, seed 0"."""
    point = ", ".join(f"{c}={number(search[c])}" for c in columns) or f"point {search['point']}"
    return f"{point}, seed {search['seed']}"


def answer_text(search: pd.Series) -> str:
    """The search's answer as the tables count it, e.g. "6", "≤ 1 (censored below)"."""
    side = "" if pd.isna(search["censored"]) else str(search["censored"]).strip()
    sign = {"above": "≥ ", "below": "≤ "}.get(side, "")
    value = search["capacity"] if math.isfinite(search["capacity"]) else search["first_failure"]
    return f"{sign}{number(value)}" + (f" (censored {side})" if side else "")


def non_monotone_note(searches: pd.DataFrame, runs: pd.DataFrame | None, goal: str, answer: str) -> str:
    """The note under the capacity table: every non-monotone search, its probes (✓ success, ✗ failure)
    and the answer the tables use, and which definition that is; "" without a non-monotone search."""
    flagged = searches[non_monotone(searches)]
    if flagged.empty:
        return ""
    columns, probes = varying_columns(searches), probe_outcomes(runs)
    items = []
    for _, search in flagged.iterrows():
        found = probes.get((str(search["point"]), int(search["seed"])), [])
        shown = ", ".join(f"{v} {'✓' if ok else '✗'}" for v, ok in found)
        item = f"{unit_label(search, columns)}" + (f": probes {shown}" if shown else "") + f" → {answer_text(search)}"
        if answer == "bracket" and found:
            stable = stable_answer(found, goal)
            item += f" (stable: {number(stable[0]) if stable else 'past the probes'})"
        items.append(item)
    used = (
        f'the stable answers (`search_answer = "stable"`): {DEFINITION[goal]}'
        if answer == "stable"
        else f'the searches\' brackets; `[report] search_answer = "stable"` would use {DEFINITION[goal]}'
    )
    return (
        f"\n\nNon-monotone searches (a probe succeeded beyond one that failed): {len(flagged)} of {len(searches)}. "
        + "; ".join(items)
        + f". The tables use {used}."
    )


def flagged_units(searches: pd.DataFrame) -> str:
    """The note under a relation's table over searches, e.g. "Non-monotone searches among these: 1
    (alpha=0.3, seed 0; see the Capacity section)."; "" without one."""
    flagged = searches[non_monotone(searches)]
    if flagged.empty:
        return ""
    columns = varying_columns(searches)
    units = "; ".join(unit_label(s, columns) for _, s in flagged.iterrows())
    return f"Non-monotone searches among these: {len(flagged)} ({units}; see the Capacity section)."
