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
    "config": "the run's config as JSON, as the spec gave it, defaults filled in (load_results spreads it into one "
    "column per field); runs.csv and every table of the report show the effective config instead: what the "
    "program ran (e.g. a linear memory's M = N, m = 1 and no bias where the stored config says M = 0, m = 0, "
    "mlp_bias = True), with the experiment's derived entries",
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
    "final_metrics": "every metric at the last evaluation, as JSON (runs.csv: one final_<name> column each); in a "
    "sweep that trains also untrained_<name>: the metric of the untrained model, the run's parameters at "
    "initialisation (step 0), before any training (runs.csv: one untrained_<name> column each)",
}
SEARCHES = {
    "unit": "the search's key: point/seed",
    "point": "the grid point's key",
    "seed": "the seed",
    "config": "the point's config as JSON (spread into columns by load_results); searches.csv and the report: "
    "the effective config, a field that follows the searched variable holding its name (M = N)",
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
    "final_eval": {
        "run_id": "the run whose trained parameters were evaluated at test time ([final_eval])",
        "point": "the index of the evaluated point in the product of the test-time axes",
        "at": "the test-time fields' values there, as JSON (load_results spreads them into columns; the run's "
        "own value of such a field becomes trained_<field>)",
        "metrics": "every metric there, as JSON (spread into columns by load_results); a trainable experiment's "
        "also as untrained_<name>: the run's parameters at initialisation evaluated at the same point",
    },
    "compiles": {
        "bucket": "the compiled program",
        "shape": "its padded shape, as JSON",
        "slots": "runs it holds at once",
        "seconds": "compile time (wall clock, less any time the process was stopped: SIGSTOP, Ctrl-Z)",
        "at": "when it finished (Unix seconds)",
    },
    "timeline": {
        "kind": '"run" or "search" (a sweep that speculates: engine.speculation > 0)',
        "id": "the run's id, or the search's unit",
        "start": "the logical step (program steps since the sweep began) at which the run's slot was filled (0 for a "
        "search)",
        "end": "the step at which it stopped (a search: ended)",
        "known_at": "the step at which the driver knew its outcome",
        "status": '"done", or "frozen": taken out of its slot once no search wanted it (no outcome, not a failure)',
    },
    "meta": {
        "key": "spec, preset, experiment, fingerprint, resolved_spec (the merged spec, --set overrides included), "
        "elapsed_s, device, planned (units and runs), session, jaxmem_version",
        "value": "its value (text or JSON)",
    },
}
CAPACITY = {
    "point": "the grid point's key",
    "<config fields>": "the point's effective config (as in searches.csv); params: its parameter count",
    "n_searches": "searches (seeds) at the point",
    "n_seeds": "answered searches, not seeds: those inside their bracket, with a usable capacity (of n_searches)",
    "n_above / n_below": "searches censored above / below",
    "capacity_mean, _std, _min, _max": "over the answered searches",
    "capacity_q25, _median, _q75": "quantiles counting censored searches as bounds",
    "capacity_*_censored": "'' a value; 'above' a lower bound (it draws on searches censored above); 'below' an "
    "upper bound; 'both' unknown (NaN)",
    "bits_per_param_mean": "bits / params, mean over the answered searches",
}


TRAJECTORIES_CSV = {
    "run_id, point, seed, lr": "the run (as in runs)",
    "step": "the evaluated step",
    "time": "step · lr (the time of gradient flow)",
    "status": "finished, diverged, or running (mid-sweep: its config from the sweep's plan)",
    "<config fields>": "the run's effective config; a field named step or time is config_step, config_time",
    "<metrics>": "every metric at that step",
}

HEATMAP_CSV = {
    "x, y": "the cell's axes ([report.heatmap] x and y; text for a categorical axis); sorted by x, then y",
    "<metric>, final_<name>, untrained_<name>": "the heatmap's metric, every final metric and every metric of "
    "the untrained model (step 0), mean over the cell's grid points' seeds (per point and seed the best "
    "learning rate)",
    "points, seeds": "grid points and (point, seed) pairs in the cell",
    "n_success": "seeds reaching the threshold",
    "reaches": "the cell's mean reaches the threshold",
    "success_rate": "n_success / seeds (with levels or shade = success_rate)",
}
STAGES_CSV = {
    "run_id, point, seed, lr, status": "the run",
    "panel, series": 'its group_by and color_by labels ("all" without)',
    "<config fields>": "the run's effective config",
    "<label> [level], [step], [time]": "a crossing: its level, and the interpolated step and time (step · lr)",
    "plateau <label>: first, last, length [step], [time]; in_band, between": "a plateau's band and evaluations",
    "escape x": "the escape law's x for the run",
}
RATES_CSV = {
    "run_id, panel, series, seed": "the run",
    "rate, from_step, to_step, n, slope, r2": "a rate's least-squares slope over the evaluations in [from, to]",
    "predicted, ratio, within": "the predicted slope, slope / predicted, and whether it is within tolerance",
    "trend, moves, against, worst, first, last": "a trend: moves between evaluations, those against its direction, "
    "the largest, and the first and last values",
}
SUCCESS_MAP_CSV = {
    "group, x, value": "the panel, the x of the point, the searched value probed; sorted by them",
    "seeds, successes, rate": "seeds that probed it, those succeeding, and their ratio",
}
RELATIONS_CSV = {
    "relation": "the relation's label ([[report.relation]])",
    "group": "its group_by values (empty without group_by)",
    "x": "the x value (the relation's x expression)",
    "rows, missing, values": "runs (searches, for a capacity) at x, those without a value, and those with one",
    "median, q25, q75, min, max": "y over the rows (a row without a value ranked as its `missing` says: ±inf)",
}
RELATION_FITS_CSV = {
    "relation, fit, group": "the relation, its law (linear, power, none) and the group",
    "a, b, a_se, b_se, b_lo, b_hi, r2, n, n_x": "the fit over the finite medians: intercept, slope, their standard "
    "errors, b's 95 % interval, R², medians and x values",
    "spearman, interior_minimum": "Spearman ρ over every row; whether the smallest median lies inside the x range",
    "level, level_lo, level_hi": "expect_level: the mean of y over the rows and its 95 % t-interval",
    "<check>_verdict, <check>_reason": "each stated check (slope, r2, rank, monotone, minimum, level): PASS, FAIL "
    "or INCONCLUSIVE and why (empty: not asked for)",
}
AGREEMENT_CSV = {
    "agreement": "the agreement's label ([[report.agreement]])",
    "seed, lr": "the pair's seed and learning rate (the pair shares every config field but the compared one)",
    "<field>, reference": "the compared field's value in the run, and the reference value it is paired with",
    "metric, value, reference_value": "the final metric and its value in each run of the pair",
    "abs_diff, rel_diff": "|value − reference_value| and that over the larger magnitude",
}
FINAL_EVAL_CSV = {
    "run_id, point, seed, lr, <config fields>": "the run whose final parameters were evaluated, its effective "
    "config (a test-time field's trained value as trained_<field>)",
    "<test-time fields>": "the evaluated point of the [final_eval] axes",
    "<metrics>, untrained_<metric>": "every metric there, and the untrained model's (parameters at step 0)",
}
FINAL_EVAL_READOFF_CSV = {
    "readoff": "the read-off's label ([report.final_eval] readoff)",
    "run_id, <config fields>, <test-time fields>": "the curve: a run and the values of the other test-time axes",
    "x_star, untrained_x_star": "the read-off x* of the trained run, and of the untrained model's curve",
}
RUNS_CSV = {
    "<as runs>": "the columns of runs above, the config spread into the effective config's fields, max_metric and "
    "final_metric named best_<metric> and final_<metric>, final_metrics as final_<name> (and untrained_<name>) "
    "columns, finished_at in ISO 8601 (UTC); runs.parquet holds the same"
}
SEARCHES_CSV = {
    "<as searches>": "the columns of searches above, the config spread into the effective config's fields (a "
    "field that follows the searched variable holding its name); searches.parquet holds the same"
}
REFERENCES_CSV = {
    "run_id, seed, <searched variable>": "a checked run ([report] references)",
    "<check columns>": "the experiment's host reference check of the run's instance (its verdict and numbers)",
    "engine_<metric>": "the engine's final metric of the same name, to compare",
}


def tables() -> dict[str, dict[str, str]]:
    """Table name -> column -> meaning: the store's tables (every column, tests/test_cli_overview.py
    checks them against the store's), then the report's own tables."""
    report = {"capacity.csv": CAPACITY, "success_map.csv": SUCCESS_MAP_CSV, "heatmap.csv": HEATMAP_CSV}
    report |= {"trajectories.csv": TRAJECTORIES_CSV, "stages.csv": STAGES_CSV, "rates.csv": RATES_CSV}
    report |= {"relations.csv": RELATIONS_CSV, "relation_fits.csv": RELATION_FITS_CSV, "agreement.csv": AGREEMENT_CSV}
    report |= {"final_eval.csv": FINAL_EVAL_CSV, "final_eval_readoff.csv": FINAL_EVAL_READOFF_CSV}
    report |= {"references.csv": REFERENCES_CSV, "runs.csv": RUNS_CSV, "searches.csv": SEARCHES_CSV}
    return {"runs": RUNS, "searches": SEARCHES, **OTHER, **report}


def describe() -> str:
    lines = []
    for name, columns in tables().items():
        lines.append(f"{name}:")
        lines += [f"  {column}: {meaning}" for column, meaning in columns.items()]
    return "\n".join(lines)
