"""The exported runs and searches tables (runs.csv / .parquet, searches.csv / .parquet) in the form a
reader needs without the code: each run's effective config (what its program ran: e.g. a linear
memory's m = 1, M = N and no bias, where the stored config says 0 and the default), each search's
point the same way (a field that follows the searched variable named by it: M = "N"), the judged
metric named (`best_<metric>`, `final_<metric>`), every final metric as its own column, and
`finished_at` as an ISO 8601 time (UTC)."""

from __future__ import annotations

import json

import pandas as pd

from jaxmem.persistence.store import expand_config
from jaxmem.report.runs import PREFIX, expand_final_metrics


def effective_config(cell: str, experiment) -> str:
    """A stored config (JSON) as the program saw it (`Experiment.effective`); unchanged where the
    experiment is unknown or the config is not one of its complete configs (an older store)."""
    if experiment is None:
        return cell
    try:
        return json.dumps(experiment.effective(json.loads(cell)), sort_keys=True)
    except (KeyError, TypeError, ValueError):
        return cell


def effective_point(cell: str, experiment, variable: str) -> str:
    """A search's point config (JSON, without the searched variable) as its programs ran it: fields
    that follow the variable (equal to it at two values of it) hold its name; unchanged where the
    experiment is unknown or the config incomplete."""
    if experiment is None:
        return cell
    try:
        point = json.loads(cell)
        a, b = (experiment.effective({**point, variable: v}) for v in (1_000_003, 1_000_033))
    except (KeyError, TypeError, ValueError):
        return cell
    follows = {k for k in a if a[k] != b[k] and (a[k], b[k]) == (1_000_003, 1_000_033)}
    return json.dumps({k: variable if k in follows else v for k, v in a.items() if k != variable}, sort_keys=True)


def effective_runs(raw_runs: pd.DataFrame, experiment=None) -> pd.DataFrame:
    """The stored runs (load_results(expand=False)) with each config as its program ran it."""
    if raw_runs.empty:
        return raw_runs
    return raw_runs.assign(config=[effective_config(c, experiment) for c in raw_runs["config"]])


def effective_searches(raw_searches: pd.DataFrame, experiment=None) -> pd.DataFrame:
    """The stored searches (load_results(expand=False)) with each point's config as its programs ran it."""
    if raw_searches.empty:
        return raw_searches
    config = [effective_point(c, experiment, v) for c, v in zip(raw_searches["config"], raw_searches["variable"])]
    return raw_searches.assign(config=config)


def exported_searches(raw_searches: pd.DataFrame, experiment=None) -> pd.DataFrame:
    """The stored searches (load_results(expand=False)) as searches.csv holds them."""
    return expand_config(effective_searches(raw_searches, experiment))


def iso_times(seconds: pd.Series) -> pd.Series:
    """Unix times as ISO 8601 text in UTC (millisecond precision); empty where missing."""
    stamps = pd.to_datetime(pd.to_numeric(seconds, errors="coerce"), unit="s", utc=True)
    return stamps.dt.strftime("%Y-%m-%dT%H:%M:%S.%f").str[:-3].add("Z").where(stamps.notna(), None)


def named_metric(runs: pd.DataFrame, metric: str) -> pd.DataFrame:
    """`max_metric` as `best_<metric>`; `final_metric` as `final_<metric>` (dropped where the final
    metrics already hold that column)."""
    out = runs.rename(columns={"max_metric": f"best_{metric}"})
    final = PREFIX + metric
    return out.drop(columns="final_metric") if final in out else out.rename(columns={"final_metric": final})


def exported_runs(raw_runs: pd.DataFrame, metric: str, experiment=None) -> pd.DataFrame:
    """The stored runs (JSON config and final_metrics, load_results(expand=False)) as runs.csv holds them."""
    if raw_runs.empty:
        return expand_final_metrics(expand_config(raw_runs))
    runs = effective_runs(raw_runs, experiment).assign(finished_at=iso_times(raw_runs["finished_at"]))
    return named_metric(expand_final_metrics(expand_config(runs)), metric)
