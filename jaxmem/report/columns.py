"""What every column of every table means: the store's tables (load_results) and the exported files.
`jaxmem list --columns` prints it."""

from __future__ import annotations

RUNS = {
    "run_id": "the run's key: a hash of its point, seed, learning rate and searched value",
    "point": "the grid point's key: a hash of its config (search variable excluded)",
    "seed": "the seed of the run's problem and initialisation",
    "lr": "its learning rate (a step is lr time units with gradient_flow)",
    "value": "the searched variable's value this run probes (empty in a grid sweep)",
    "round": "the search round that first asked for this probe (0 = first round)",
    "config": "the run's config as JSON (load_results spreads it into one column per field; in runs.csv the "
    "effective config: what the program ran, e.g. M = N where the spec says M = 0)",
    "bucket": "the compiled program (padded shape) the run trained in",
    "max_metric": "the judged metric's best evaluation over the run (runs.csv: best_<metric>, e.g. best_accuracy)",
    "final_metric": "the judged metric at the last evaluation (runs.csv: final_<metric>)",
    "final_loss": "the training loss at the last evaluation",
    "steps_run": "training steps taken (fewer than train.steps after an early stop or a give-up)",
    "steps_to_threshold": "the first evaluated step at which the success threshold was reached (empty: never)",
    "diverged": "the loss or parameters became NaN/inf; the run was frozen",
    "success": "the run meets the sweep's success rule ([success], or the search threshold)",
    "wall_time_s": "seconds of device time attributed to the run (its share of its program's segments)",
    "device": "platform:devices of the program that ran it",
    "finished_at": "when its row was stored: Unix seconds (runs.csv: ISO 8601, UTC)",
    "final_metrics": "every metric at the last evaluation, as JSON (runs.csv: one final_<name> column each)",
}
SEARCHES = {
    "unit": "the search's key: point/seed",
    "point": "the grid point's key",
    "seed": "the seed",
    "config": "the point's config as JSON (spread into columns by load_results)",
    "variable": "the searched config field (e.g. N)",
    "capacity": "the answer: the largest value that succeeds (goal = smallest: the smallest); NaN when censored below",
    "first_failure": "the value just past the answer (NaN if never seen)",
    "censored": "'' answered; 'above' still succeeding at the largest value tried; 'below' failing at the smallest",
    "rounds": "search rounds taken",
    "probes": "values probed (each one run per learning rate)",
    "non_monotone": "a success was seen above a failure",
    "params": "the model's parameter count at the answer (the experiment's count)",
    "bits": "information stored at the answer (the experiment's bound, in bits)",
    "status": "'done'",
}
OTHER = {
    "trajectories": {
        "run_id": "the run",
        "step": "the evaluated step",
        "metrics": "every metric at that step, as JSON",
    },
    "compiles": {
        "bucket": "the compiled program",
        "shape": "its padded shape, as JSON",
        "slots": "runs it holds at once",
        "seconds": "compile time",
        "at": "when it finished (Unix seconds)",
    },
    "meta": {
        "key": "spec, preset, experiment, fingerprint, resolved_spec (the merged spec, --set overrides included), "
        "elapsed_s, device, planned (units and runs), session, jaxmem_version",
        "value": "its value (text or JSON)",
    },
}
CAPACITY = {
    "point": "the grid point's key",
    "<config fields>": "the point's config; params: its parameter count",
    "n_searches": "searches (seeds) at the point",
    "n_seeds": "answered searches (inside the bracket, with a usable capacity)",
    "n_above / n_below": "searches censored above / below",
    "capacity_mean, _std, _min, _max": "over the answered searches",
    "capacity_q25, _median, _q75": "quantiles counting censored searches as bounds",
    "capacity_*_censored": "'>=' or '<=' where that quantile is a bound, else ''",
    "bits_per_param_mean": "bits / params, mean over the answered searches",
}


def tables() -> dict[str, dict[str, str]]:
    """Table name -> column -> meaning: the store's tables (every column, tests/test_cli_overview.py
    checks them against the store's), then capacity.csv."""
    return {"runs": RUNS, "searches": SEARCHES, **OTHER, "capacity.csv": CAPACITY}


def describe() -> str:
    lines = []
    for name, columns in tables().items():
        lines.append(f"{name}:")
        lines += [f"  {column}: {meaning}" for column, meaning in columns.items()]
    return "\n".join(lines)
