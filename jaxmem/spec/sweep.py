"""Sweep specs: TOML files describing a whole grid, parsed and validated before anything compiles.

Layout (every section but `experiment` optional; see sweeps/ for complete examples):

    extends = "base.toml"                   # optional: deep-merge this file over another spec file
    experiment = "assoc_memory"
    description = "..."
    seeds = [0, 1, 2]                       # or a count: seeds = 3
    [fixed]    model = "mlp"                # fields held constant
    [grid]     d = [8, 16]                  # axes: list | {range=[a,b,step]} | {log_range=[a,b], num=k}
                                            #       | {exponents=[a,b,step], base=2}; round = "floor"|"round"|"ceil"
    [derived]  m = "m_over_d * d"           # expressions over grid/fixed names
    [train]    steps (a number, or an expression of the run's config: its own step budget, e.g. "4 * n_omega"),
               eval_every, eval_schedule ("linear": every eval_every steps | "log": eval_points log-spaced
               steps), precision ("float32" | "float64": the whole sweep in x64), metric, early_stop,
               learning_rates (a list = best over them, in parallel),
               integrator ("optax" | "gradient_flow"), rtol, atol, give_up; early_stop: stop a run once its best
               value reaches this level in the success direction (at_least: best >= x; at_most: best <= x),
               its value of train.metric where [train] names one (e.g. a validation error, with a [success]
               metric on another set: runs judged on data that did not stop them), else of the success metric;
               give_up = K: stop a run once its best value, improving at the pace of its last K
               evaluations, could not reach the success threshold within its remaining steps (0 = off)
    [success]  metric = "test_loss", exactly one of at_least = x | at_most = x (any finite number),
               counts = "best" (default: the best evaluation decides) | "final" (the last one);
               metric defaults to train.metric. Without [success]: train.metric at least search.threshold
               with a [search], else at least train.early_stop if set, else no success rule
    [search]   variable, lo, hi (expressions), threshold (legacy, in (0, 1]: use [success]), resolution,
               probes, mode ("verified"|"paper"), goal ("largest" value that succeeds: a capacity |
               "smallest": an onset threshold)
    [engine]   pad_ratio, search_pad_ratio, search_pad_floor, pad_to_max, max_slots, segment_seconds, matmul_precision,
               record_trajectory, trajectory_per_decade
    [final_eval] l_ts = [4, 8, 16]         # test-time axes: each finished run's final parameters evaluated at
                                            # every point of their product (traced or size fields), no retraining
    [report]   title, x, fit, guide, group_by, expect_slope, collapse, references, [report.heatmap],
               [report.trajectory]: typed and checked like the rest (keys in jaxmem.spec.report_tables)
    [presets.quick] / [presets.paper]       # same layout, deep-merged over the base

Every problem is reported with the dotted path of the field that causes it, an unknown key with the
closest valid one.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
import math
import tomllib
from pathlib import Path
from typing import Any

from jaxmem.spec import expr, report_tables, tables
from jaxmem.spec.report_tables import ReportSpec
from jaxmem.spec.tables import Table, choice, suggest, text, unknown_keys
from jaxmem.experiments.interface import Experiment
from jaxmem.experiments.registry import SHIPPED, UnknownExperiment, searching
from jaxmem.experiments.registry import get as get_experiment
from jaxmem.experiments.interface import REQUIRED

TOP_LEVEL = {
    "experiment",
    "description",
    "seeds",
    "fixed",
    "grid",
    "derived",
    "train",
    "search",
    "engine",
    "report",
    "success",
    "presets",
    "final_eval",
}
SUCCESS_KEYS = ("metric", "at_least", "at_most", "counts")
INTEGRATORS = ("optax", "gradient_flow")
ROUNDING = {"floor": math.floor, "ceil": math.ceil, "round": round}
MAX_INT = 2**31 - 1  # sizes, step counts and seeds reach the device as int32
MAX_VALUES = 10**6  # the most values an axis, the seeds or the grid may have: more is a typo, not a sweep


class SpecError(ValueError):
    """A sweep spec is malformed; the message lists every problem with its field path."""

    def __init__(self, source: str, problems: list[str]):
        self.problems = problems
        super().__init__(f"invalid sweep spec {source}:\n" + "\n".join(f"  - {p}" for p in problems))


EVAL_SCHEDULES = ("linear", "log")
PRECISIONS = ("float32", "float64")
MATMUL_PRECISIONS = ("highest", "tf32", "bf16")  # engine.matmul_precision: f32 matmuls in full f32 or faster


@dataclasses.dataclass(frozen=True)
class TrainSpec:
    steps: int = 1000  # the largest step budget; a spec may give an expression (SweepSpec.step_budget)
    eval_every: int = 100
    eval_schedule: str = "linear"  # "log": evaluate at step 0 and at eval_points log-spaced steps up to `steps`
    eval_points: int = 60
    precision: str = "float32"  # "float64": the sweep runs with JAX's x64 mode on
    metric: str = "accuracy"
    early_stop: float | None = None  # stop a run once its train.metric (if given, else the success metric) reaches
    # this in the success direction
    learning_rates: tuple[float, ...] = (1e-3,)
    integrator: str = "optax"  # "gradient_flow": θ̇ = −∇L solved adaptively; a step = lr units of time
    rtol: float = 1e-6  # gradient_flow: the ODE solver's relative and absolute tolerances
    atol: float = 1e-8
    give_up: int = 0  # evaluations: stop a run that cannot reach the success threshold at its recent pace; 0 = off


@dataclasses.dataclass(frozen=True)
class SearchSpec:
    variable: str
    lo: str | int
    hi: str | int
    threshold: float = 0.99  # legacy: the success threshold of train.metric; [success] replaces it
    resolution: float = 0.01  # stop when hi/lo <= 1 + resolution (or hi - lo <= 1)
    probes: int = 3  # K probes per round: a (K+1)-ary search
    mode: str = "verified"  # "paper": midpoint, lower bound assumed feasible (authors' rules)
    max_expand: int = 4  # verified mode: how often a bracket may double/halve past its bounds
    goal: str = "largest"  # "largest" value that succeeds (a capacity) or "smallest" (an onset threshold)
    law_axis: str = ""  # verified mode: a grid axis along which the answers of a seed's smaller values
    # (a power law fitted to >= 2 of them) seed the next search's bracket; "" = off
    law_margin: float = 0.25  # the seeded bracket: [prediction / (1 + margin), prediction * (1 + margin)]


@dataclasses.dataclass(frozen=True)
class EngineSpec:
    pad_ratio: float = 2.0  # sizes are padded up a ladder of steps 2^(1/k) ≈ this ratio
    search_pad_ratio: float = 1.41  # the searched variable's finer ladder (2^(1/2)): its waste dominates
    search_pad_floor: float = 0.5  # a searched value is padded to at least this × the initial upper bound
    max_slots: int = 0  # runs per program; 0 = chosen from the work per step
    segment_seconds: float = 2.0  # host syncs (and checkpoints) about this often
    record_trajectory: bool = False  # store every run's metrics at every evaluation (trajectories table)
    trajectory_per_decade: int = 0  # with record_trajectory: keep k log-spaced evaluations per decade; 0 = all
    pad_to_max: tuple[str, ...] = ()  # sizes (fields or derived) padded to their largest value in the sweep
    matmul_precision: str = "highest"  # f32 matmuls and convolutions: "highest", or faster "tf32" / "bf16" passes
    # where the accelerator has them (a CPU computes f32 whatever it says); part of the fingerprint unless highest


@dataclasses.dataclass(frozen=True)
class SuccessRule:
    """A run succeeds when its best (or final) evaluation of `metric` is at least / at most `threshold`."""

    metric: str
    direction: str  # "at_least" or "at_most"
    threshold: float
    counts: str = "best"  # which evaluation decides: "best" or "final"


@dataclasses.dataclass(frozen=True)
class SweepSpec:
    name: str
    preset: str
    experiment: str
    description: str
    points: tuple[dict, ...]  # complete experiment configs (search variable excluded), axes included
    axes: tuple[str, ...]  # names that vary across points
    seeds: tuple[int, ...]
    train: TrainSpec
    search: SearchSpec | None
    engine: EngineSpec
    report: ReportSpec
    success: SuccessRule | None  # None: no run is judged (a grid without early_stop)
    skipped: tuple[str, ...]  # impossible points, with the reason
    resolved: dict  # the merged spec (base + preset) as data
    step_budget: str | None = None  # train.steps as an expression of a run's config (train.steps: its maximum)
    final_eval: tuple[tuple[str, tuple], ...] = ()  # test-time axes: (field, values) in spec order

    @property
    def fingerprint(self) -> str:
        """Hash of everything that determines results (padding included: it changes float rounding);
        an output folder belongs to one fingerprint."""
        payload = {k: v for k, v in self.resolved.items() if k not in ("description", "report", "engine")}
        engine = {
            k: getattr(self.engine, k) for k in ("pad_ratio", "search_pad_ratio", "search_pad_floor", "pad_to_max")
        }
        if self.engine.matmul_precision != "highest":  # (so every fingerprint of before the setting stays)
            engine["matmul_precision"] = self.engine.matmul_precision
        blob = json.dumps({"spec": payload, "engine": engine}, sort_keys=True, default=str)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]


def load(path: str | Path, preset: str | None = None) -> SweepSpec:
    """Read, merge the preset into, and validate a TOML sweep spec. An experiment it names as
    `module:ATTRIBUTE` is also looked up in the spec's own folder."""
    path = Path(path)
    with searching(path.parent):
        return parse(read_toml(path), name=path.stem, preset=preset, source=str(path))


def read_toml(path: Path, seen: tuple[Path, ...] = ()) -> dict:
    """A spec file as data, with `extends = "other.toml"` (a path relative to the file) resolved: the
    file's tables are deep-merged over the other's, so variants of a sweep restate only what differs.
    `seen`: the files extending this one, the spec given first; errors name it too."""
    source = f"{path} (via extends from {seen[0]})" if seen else str(path)
    if not is_file(path):
        raise SpecError(source, [f"no such file: {path}"])
    try:
        raw = tomllib.loads(path.read_text())
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as err:  # TOML files are UTF-8
        raise SpecError(source, [f"malformed TOML: {err}"]) from None
    except OSError as err:
        raise SpecError(source, [f"cannot read it: {err}"]) from None
    parent = raw.pop("extends", None)
    if parent is None:
        return raw
    if not isinstance(parent, str):
        raise SpecError(source, [f"extends: must be a file name, got {parent!r}"])
    if not is_file(path.parent / parent):
        raise SpecError(source, [f"extends: no such file {parent!r} next to this one"])
    base = (path.parent / parent).resolve()
    if base in seen or base == path.resolve():
        raise SpecError(source, [f"extends: {parent!r} extends itself (cycle through {base})"])
    return _deep_merge(read_toml(base, seen + (path.resolve(),)), raw)


def is_file(path: Path) -> bool:
    """Whether `path` names a file; False, not an error, for names the OS rejects (too long, NUL bytes)."""
    try:
        return path.is_file()
    except (OSError, ValueError):
        return False


def parse(raw: dict, name: str, preset: str | None = None, source: str = "<spec>") -> SweepSpec:
    """Validate a spec given as data; collects every problem before raising SpecError."""
    problems: list[str] = []
    merged, preset_name = _apply_preset(raw, preset, problems)
    if problems:
        raise SpecError(source, problems)
    problems += _unknown_sections(raw)
    exp = _experiment(merged, problems)
    seeds = _seeds(merged.get("seeds", [0]), problems)
    if not isinstance(merged.get("description", ""), str):
        problems.append(f"description: must be a string, got {merged['description']!r}")
    train_table, step_budget = _step_budget(merged.get("train", {}))
    train, bad_train = _section(TrainSpec, "train", train_table, problems)
    search = _search(merged.get("search"), exp, problems)
    engine, bad_engine = _section(EngineSpec, "engine", merged.get("engine", {}), problems)
    known = None if unknown_variable(search, exp) else exp  # a mistyped variable: one complaint, not one per use
    context = _report_context(merged, known, train, search)
    report = report_tables.read_report(merged.get("report", {}), problems, context)
    success = _success(merged, exp, train, search, problems)
    if train:
        _check_train(train, bad_train | ({"steps"} if step_budget is not None else set()), exp, problems)
        if "give_up" not in bad_train and train.give_up and success is None:
            problems.append("train.give_up: needs a success rule to give up on ([success], or a search's threshold)")
        _check_schedule(train, bad_train, step_budget, problems)
    if engine:
        _check_engine(engine, bad_engine, exp, search, problems)
    points, axes, skipped = ([], (), [])
    if known is not None:
        points, axes, skipped = _points(merged, exp, search, problems)
    final_eval = _final_eval(merged.get("final_eval", {}), exp, search, problems) if exp is not None else ()
    if step_budget is not None and exp is not None:
        _check_budget_names(step_budget, merged, exp, search, problems)
    if train and step_budget is not None and points and not problems:  # (its names are known: checked above)
        train = dataclasses.replace(train, steps=_largest_budget(step_budget, points, search, train, problems))
    if problems:
        raise SpecError(source, problems)
    return SweepSpec(
        name=name,
        preset=preset_name,
        experiment=merged["experiment"],
        description=merged.get("description", ""),
        points=tuple(points),
        axes=axes,
        seeds=seeds,
        train=train,
        search=search,
        engine=engine,
        report=report,
        success=success,
        skipped=tuple(skipped),
        resolved=merged,
        step_budget=step_budget,
        final_eval=final_eval,
    )


def stored_report_spec(resolved: dict, source: str = "<stored spec>") -> ReportSpec:
    """The report tables of a resolved spec (as stored with the results), read without the rest of
    the spec, which was checked when the sweep ran: names in expressions are not checked. SpecError
    when they are invalid."""
    problems: list[str] = []
    train, _ = _section(TrainSpec, "train", resolved.get("train", {}), [])
    search = resolved.get("search")
    context = report_tables.Context(
        early_stop=train.early_stop if train else None,
        goal=search.get("goal", "largest") if isinstance(search, dict) else "largest",
    )
    report = report_tables.read_report(resolved.get("report", {}), problems, context)
    if problems:
        raise SpecError(source, problems)
    return report


def _unknown_sections(raw: dict) -> list[str]:
    """Unknown top-level names of the spec and of each of its presets."""
    problems = unknown_keys("", {k: v for k, v in raw.items() if k != "presets"}, TOP_LEVEL, "section or key")
    presets = raw.get("presets", {})
    for name, table in presets.items() if isinstance(presets, dict) else ():
        if isinstance(table, dict):
            problems += unknown_keys(f"presets.{name}", table, TOP_LEVEL - {"presets"}, "section or key")
        else:
            problems.append(f"presets.{name}: must be a table, got {table!r}")
    return problems


def config_names(merged: dict, exp: Experiment, search) -> set[str]:
    """The names a run's config holds: the experiment's fields, the fixed, grid and derived names
    (helper axes included) and the searched variable."""
    tables = [merged.get(k) for k in ("fixed", "grid", "derived")]
    return set(exp.fields).union(*(t for t in tables if isinstance(t, dict)), {search.variable} if search else ())


def _report_context(merged: dict, exp: Experiment | None, train, search) -> report_tables.Context:
    """What the report tables may name: a run's config fields (the experiment's, the helper axes and
    the searched variable) and recorded metrics; and their defaults from [train] and [search]."""
    defaults = dict(early_stop=train.early_stop if train else None, goal=search.goal if search else "largest")
    if exp is None:
        return report_tables.Context(**defaults)
    gradient_flow = train is not None and train.integrator == "gradient_flow"
    metrics = exp.metrics + (("solver_steps",) if gradient_flow else ())  # the ODE solver's, jaxmem.engine.program
    return report_tables.Context(
        config=frozenset(config_names(merged, exp, search)),
        metrics=frozenset(metrics),
        variable=search.variable if search else None,
        **defaults,
    )


def _success(merged: dict, exp: Experiment | None, train, search, problems) -> SuccessRule | None:
    """The `[success]` table; without one the rule the legacy keys imply: train.metric at least
    search.threshold (with a search) or train.early_stop (None when neither)."""
    if "success" not in merged:
        threshold = search.threshold if search else train.early_stop if train else None
        return None if train is None or threshold is None else SuccessRule(train.metric, "at_least", threshold)
    t = Table("success", merged["success"], SUCCESS_KEYS, problems)
    search_table = merged.get("search")
    if isinstance(search_table, dict) and "threshold" in search_table:
        problems.append("success: given together with search.threshold; state the threshold once, in [success]")
    metric = t.get("metric", text, train.metric if train else None)
    if exp is not None and metric is not None:
        t.check("metric", [metric], frozenset(exp.metrics), f"a metric of {exp.name}")
    sides = [k for k in ("at_least", "at_most") if k in t.data]
    if len(sides) != 1:
        problems.append(f"success: needs exactly one of at_least, at_most, got {sides or 'neither'}")
        return None
    threshold = t.get(sides[0], tables.number)
    counts = t.get("counts", choice("best", "final"), "best")
    return None if metric is None or threshold is None else SuccessRule(metric, sides[0], threshold, counts)


def _apply_preset(raw, preset, problems):
    presets = raw.get("presets", {})
    if not isinstance(presets, dict):
        problems.append("presets: must be a table of tables")
        return raw, ""
    if preset is None:
        preset = "quick" if "quick" in presets else ""
    if not preset:
        return {k: v for k, v in raw.items() if k != "presets"}, ""
    if preset not in presets:
        problems.append(f"--preset {preset!r}: unknown preset; this spec has: {', '.join(sorted(presets)) or 'none'}")
        return raw, preset
    if not isinstance(presets[preset], dict):
        problems.append(f"presets.{preset}: must be a table, got {presets[preset]!r}")
        return raw, preset
    base = {k: v for k, v in raw.items() if k != "presets"}
    return _deep_merge(base, presets[preset]), preset


def _deep_merge(base: dict, override: dict) -> dict:
    out = dict(base)
    for key, value in override.items():
        out[key] = _deep_merge(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def _experiment(merged, problems) -> Experiment | None:
    name = merged.get("experiment")
    if name is None:
        problems.append('experiment: missing (e.g. experiment = "assoc_memory", or "my_module:EXPERIMENT")')
        return None
    try:
        return get_experiment(name)
    except UnknownExperiment as err:
        suggestion = "" if isinstance(name, str) and ":" in name else suggest(str(name), SHIPPED)
        problems.append(f"experiment: {err}{suggestion}")
        return None


def _seeds(value, problems) -> tuple[int, ...]:
    count = isinstance(value, int) and not isinstance(value, bool) and value >= 1
    listed = isinstance(value, list) and value and all(isinstance(s, int) and not isinstance(s, bool) for s in value)
    if not (count or listed and min(value) >= 0):
        problems.append(f"seeds: must be a positive count or a non-empty list of non-negative integers, got {value!r}")
        return ()
    if (value if count else len(value)) > MAX_VALUES or listed and max(value) > MAX_INT:
        problems.append(f"seeds: at most {MAX_VALUES} seeds, each below 2**31, got {short(value) if count else value}")
        return ()
    if listed and len(set(value)) != len(value):
        problems.append(f"seeds: duplicates in {value}")
    return tuple(range(value)) if count else tuple(value)


def _section(cls, path: str, table: Any, problems: list[str]):
    """Build a frozen dataclass from a TOML table, type-checking every key. Returns the object (bad
    keys left at their defaults, None if a required key is missing) and the set of bad keys, so the
    value checks that follow can still run on the good ones."""
    if not isinstance(table, dict):
        problems.append(f"{path}: must be a table, got {table!r}")
        return None, set()
    fields = {f.name: f for f in dataclasses.fields(cls)}
    values, bad = {}, set()
    problems += unknown_keys(path, table, fields)
    for key, value in table.items():
        if key not in fields:
            continue
        checked = _coerce(value, fields[key].type)
        if checked is _BAD:
            problems.append(f"{path}.{key}: expected {IN_WORDS[fields[key].type]}, got {value!r}")
            bad.add(key)
        else:
            values[key] = checked
    missing = [n for n, f in fields.items() if f.default is dataclasses.MISSING and n not in table]
    problems += [f"{path}.{n}: missing" for n in missing]
    return (
        None if missing or bad & {n for n, f in fields.items() if f.default is dataclasses.MISSING} else cls(**values)
    ), bad


_BAD = object()
IN_WORDS = {  # a field's annotation as a spec writer reads it
    "int": "an integer",
    "float": "a number",
    "bool": "true or false",
    "str": "a string",
    "float | None": "a number (or false for none)",
    "str | int": "a number or an expression",
    "tuple[str, ...]": "a list of names",
    "tuple[float, ...]": "a number or a non-empty list of numbers",
}


def _coerce(value, annotation: str):
    """Check a TOML value against a dataclass annotation string; return the value or _BAD."""
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if annotation == "int":
        return value if isinstance(value, int) and not isinstance(value, bool) else _BAD
    if annotation == "float":
        return float(value) if number else _BAD
    if annotation == "bool":
        return value if isinstance(value, bool) else _BAD
    if annotation == "str":
        return value if isinstance(value, str) else _BAD
    if annotation == "float | None":
        return float(value) if number else (None if value is False else _BAD)
    if annotation == "str | int":
        return value if isinstance(value, str) or number else _BAD
    if annotation == "tuple[str, ...]":
        ok = isinstance(value, list) and all(isinstance(v, str) for v in value)
        return tuple(value) if ok else _BAD
    if annotation == "tuple[float, ...]":
        values = value if isinstance(value, list) else [value]
        ok = values and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)
        return tuple(float(v) for v in values) if ok else _BAD
    raise TypeError(annotation)


def _check_train(train: TrainSpec, bad: set, exp: Experiment | None, problems):
    if "steps" not in bad and train.steps < 0:
        problems.append(f"train.steps: must be >= 0, got {train.steps}")
    if "steps" not in bad and train.steps > 0 and exp is not None and not exp.trainable:
        problems.append(f"train.steps: {exp.name} is a construction that is never trained (no loss); use steps = 0")
    problems += [
        f"train.{name}: must be below 2**31, got {getattr(train, name)}"
        for name in ("steps", "eval_every")
        if name not in bad and getattr(train, name) > MAX_INT
    ]
    if "give_up" not in bad and train.give_up < 0:
        problems.append(f"train.give_up: must be >= 0 evaluations (0 = off), got {train.give_up}")
    if "eval_every" not in bad and train.eval_every < 1:
        problems.append(f"train.eval_every: must be >= 1, got {train.eval_every}")
    elif not bad & {"steps", "eval_every"} and train.eval_schedule == "linear" and train.steps % train.eval_every:
        problems.append(f"train.steps: {train.steps} is not a multiple of train.eval_every = {train.eval_every}")
    if "learning_rates" not in bad and any(lr <= 0 or not math.isfinite(lr) for lr in train.learning_rates):
        problems.append(f"train.learning_rates: must be positive and finite, got {list(train.learning_rates)}")
    if "integrator" not in bad and train.integrator not in INTEGRATORS:
        problems.append(f"train.integrator: must be one of {list(INTEGRATORS)}, got {train.integrator!r}")
    problems += [
        f"train.{name}: must be > 0, got {getattr(train, name)}"
        for name in ("rtol", "atol")
        if name not in bad and not getattr(train, name) > 0
    ]
    if "metric" not in bad and exp is not None and train.metric not in exp.metrics:
        problems.append(
            f"train.metric: {train.metric!r} is not a metric of {exp.name}; one of {', '.join(exp.metrics)}"
        )


def _step_budget(table) -> tuple[Any, str | None]:
    """The [train] table without an expression given as `steps`, and that expression (or None)."""
    if not isinstance(table, dict) or not isinstance(table.get("steps"), str):
        return table, None
    return {k: v for k, v in table.items() if k != "steps"}, table["steps"]


def run_budget(expression: str, config: dict, eval_every: int) -> int:
    """A run's own step budget: `expression` at its config, rounded up to whole evaluation blocks."""
    value = expr.evaluate(expression, config)
    if isinstance(value, float) and not math.isfinite(value) or not 0 <= value <= MAX_INT:
        raise expr.ExpressionError(f"{expression!r} is {value} at ({_label(config)}), not a step count in [0, 2**31)")
    return math.ceil(value / eval_every) * eval_every


def _largest_budget(expression: str, points, search: SearchSpec | None, train: TrainSpec, problems) -> int:
    """The largest step budget `expression` gives over the points (a searched variable at its upper
    bound); a problem for a point where it is no step count."""
    largest = 0
    for point in points:
        try:
            config = {**point, search.variable: _bound(search.hi, point)} if search else point
            largest = max(largest, run_budget(expression, config, train.eval_every))
        except expr.ExpressionError as err:
            problems.append(f"train.steps: {err}")
            return 0
    return largest


def _check_budget_names(expression: str, merged: dict, exp: Experiment, search, problems) -> None:
    """A step expression names only fields, grid/fixed/derived names and the searched variable."""
    known = config_names(merged, exp, search)
    try:
        unknown = sorted(expr.names_in(expression) - known)
    except expr.ExpressionError as err:
        problems.append(f"train.steps: {err}")
        return
    if unknown:
        problems.append(
            f"train.steps: unknown name {unknown[0]!r} in expression {expression!r} (known: {', '.join(sorted(known))})"
        )


def _check_schedule(train: TrainSpec, bad: set, step_budget: str | None, problems) -> None:
    """The evaluation schedule and precision: known names; a log schedule has >= 2 points, a fixed
    step budget, and no give_up rule (which counts evaluations of equal length)."""
    if "eval_schedule" not in bad and train.eval_schedule not in EVAL_SCHEDULES:
        problems.append(f"train.eval_schedule: must be one of {list(EVAL_SCHEDULES)}, got {train.eval_schedule!r}")
    if "precision" not in bad and train.precision not in PRECISIONS:
        problems.append(f"train.precision: must be one of {list(PRECISIONS)}, got {train.precision!r}")
    if train.eval_schedule != "log":
        return
    if "eval_points" not in bad and train.eval_points < 2:
        problems.append(f"train.eval_points: a log schedule needs at least 2 points, got {train.eval_points}")
    if step_budget is not None:
        problems.append("train.steps: a log eval_schedule needs a fixed number of steps, not an expression")
    if train.give_up:
        problems.append("train.give_up: not available with a log eval_schedule (its evaluations are unevenly spaced)")


def _final_eval(table, exp: Experiment, search: SearchSpec | None, problems) -> tuple[tuple[str, tuple], ...]:
    """The test-time axes: traced or size fields of the experiment, each a non-empty list of valid values."""
    if not isinstance(table, dict):
        problems.append(f"final_eval: must be a table of field = [values], got {table!r}")
        return ()
    axes = []
    for name, values in table.items():
        field = exp.fields.get(name)
        if field is None or field.kind not in ("traced", "size"):
            usable = [n for n, f in exp.fields.items() if f.kind in ("traced", "size")]
            problems.append(
                f"final_eval.{name}: not a traced or size field of {exp.name}{suggest(name, usable)}; "
                f"usable: {', '.join(usable)}"
            )
            continue
        if search is not None and name == search.variable:
            problems.append(f"final_eval.{name}: the searched variable cannot be a test-time axis")
            continue
        try:
            values = axis_values(f"final_eval.{name}", values)
        except ValueError as err:
            problems.append(str(err))
            continue
        errors = dict.fromkeys(e for v in values for e in [_field_error(field, name, v)] if e)
        problems += [f"final_eval.{name}: {e}" for e in errors]
        axes.append((name, tuple(values)))
    return tuple(axes)


def _check_engine(engine: EngineSpec, bad: set, exp: Experiment | None, search: SearchSpec | None, problems):
    checks = [
        ("pad_ratio", engine.pad_ratio >= 1.0, ">= 1"),
        ("search_pad_ratio", engine.search_pad_ratio >= 1.0, ">= 1"),
        ("search_pad_floor", 0 <= engine.search_pad_floor <= 1, "in [0, 1]"),
        ("max_slots", engine.max_slots >= 0, ">= 0"),
        ("segment_seconds", engine.segment_seconds > 0, "> 0"),
        ("trajectory_per_decade", engine.trajectory_per_decade >= 0, ">= 0"),
        ("matmul_precision", engine.matmul_precision in MATMUL_PRECISIONS, f"one of {list(MATMUL_PRECISIONS)}"),
    ]
    problems += [
        f"engine.{name}: must be {rule}, got {getattr(engine, name)}"
        for name, ok, rule in checks
        if name not in bad and not ok
    ]
    if exp is not None and "pad_to_max" not in bad:
        ints = [n for n, f in exp.kinds.items() if f.type is int]  # derived sizes too
        problems += [
            f"engine.pad_to_max: {n!r} is not an integer field of {exp.name}{suggest(n, ints)}"
            for n in engine.pad_to_max
            if n not in ints
        ]
        if search is not None and search.variable in engine.pad_to_max:
            problems.append(
                f"engine.pad_to_max: the searched {search.variable!r} cannot be padded to a maximum "
                "(use engine.search_pad_floor = 1.0)"
            )


def unknown_variable(search: SearchSpec | None, exp: Experiment | None) -> bool:
    """Whether the search names a variable that is no integer field of the experiment."""
    if search is None or exp is None:
        return False
    field = exp.fields.get(search.variable)
    return field is None or field.type is not int


def _search(table, exp: Experiment | None, problems) -> SearchSpec | None:
    if table is None:
        return None
    search, _ = _section(SearchSpec, "search", table, problems)
    if search is None:
        return None
    if unknown_variable(search, exp):
        ints = [n for n, f in exp.kinds.items() if f.type is int]  # derived sizes too
        problems.append(
            f"search.variable: {search.variable!r} is not an integer field of {exp.name}"
            f"{suggest(search.variable, ints)} (integer fields: {', '.join(ints)})"
        )
    if search.goal not in ("largest", "smallest"):
        problems.append(f"search.goal: must be 'largest' or 'smallest', got {search.goal!r}")
    if search.mode not in ("verified", "paper"):
        problems.append(f"search.mode: must be 'verified' or 'paper', got {search.mode!r}")
    if not 0 < search.threshold <= 1:
        problems.append(f"search.threshold: must be in (0, 1], got {search.threshold}")
    if search.resolution < 0:
        problems.append(f"search.resolution: must be >= 0, got {search.resolution}")
    if search.probes < 1:
        problems.append(f"search.probes: must be >= 1, got {search.probes}")
    if search.max_expand < 0:
        problems.append(f"search.max_expand: must be >= 0, got {search.max_expand}")
    if search.law_axis and search.mode != "verified":
        problems.append("search.law_axis: law-seeded brackets need mode = 'verified' (paper mode follows the authors)")
    if not search.law_margin > 0:
        problems.append(f"search.law_margin: must be > 0, got {search.law_margin}")
    if isinstance(search.lo, (int, float)) and search.lo < 1:
        problems.append(f"search.lo: must be >= 1, got {search.lo}")
    if all(isinstance(b, (int, float)) for b in (search.lo, search.hi)) and search.hi < search.lo:
        problems.append(f"search.hi: must be >= search.lo, got [{search.lo}, {search.hi}]")
    return search


def axis_values(path: str, value) -> list:
    """Expand one grid axis (list, range, log_range or exponents) to its values."""
    if isinstance(value, list):
        if not value:
            raise ValueError(f"{path}: empty list")
        if len(value) > MAX_VALUES:
            raise ValueError(f"{path}: {len(value)} values, more than {MAX_VALUES}")
        if len({json.dumps(v, default=str) for v in value}) != len(value):
            raise ValueError(f"{path}: duplicate values in {value}")
        return value
    if not isinstance(value, dict):
        raise ValueError(f"{path}: must be a list or a table like {{range = [8, 64, 8]}}, got {value!r}")
    kinds = [k for k in ("range", "log_range", "exponents") if k in value]
    extra = set(value) - {"range", "log_range", "exponents", "num", "base", "round"}
    if len(kinds) != 1 or extra:
        raise ValueError(
            f"{path}: give exactly one of range / log_range / exponents (plus num, base, round), got {value}"
        )
    rounding = value.get("round")
    if rounding is not None and (not isinstance(rounding, str) or rounding not in ROUNDING):
        raise ValueError(f"{path}.round: must be one of {list(ROUNDING)}, got {rounding!r}")
    kind, args = kinds[0], value[kinds[0]]
    numbers = (args if isinstance(args, list) else [args]) + [value[k] for k in ("num", "base") if k in value]
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in numbers):
        raise ValueError(f"{path}.{kind}: arguments must be finite numbers, got {value}")
    if value.get("base", 2) <= 0:
        raise ValueError(f"{path}.base: must be > 0, got {value['base']}")
    if kind == "range":
        if not (isinstance(args, list) and len(args) in (2, 3)) or (len(args) == 3 and args[2] <= 0):
            raise ValueError(
                f"{path}.range: expected [start, stop] or [start, stop, step>0] (stop inclusive), got {args}"
            )
        start, stop, step = (list(args) + [1])[:3]
        count = int(math.floor((stop - start) / step + 1e-9)) + 1
        if count > MAX_VALUES:
            raise ValueError(f"{path}.range: gives {short(count)} values, more than {MAX_VALUES}")
        raw = [start + i * step for i in range(max(count, 0))]
    elif kind == "log_range":
        num = value.get("num")
        if not (isinstance(args, list) and len(args) == 2 and min(args) > 0 and isinstance(num, int)):
            raise ValueError(f"{path}.log_range: expected [lo>0, hi>0] with num = a count, got {args}, num={num}")
        if not 1 <= num <= MAX_VALUES:
            raise ValueError(f"{path}.num: must be in [1, {MAX_VALUES}], got {num}")
        lo, hi = math.log(args[0]), math.log(args[1])
        raw = [math.exp(lo + (hi - lo) * i / max(num - 1, 1)) for i in range(num)]
    else:
        base = value.get("base", 2)
        if not (isinstance(args, list) and len(args) == 3 and args[2] > 0):
            raise ValueError(f"{path}.exponents: expected [first, last, step>0], got {args}")
        if max(abs(args[0]), abs(args[1])) > expr.MAX_EXPONENT:
            raise ValueError(f"{path}.exponents: must lie within ±{expr.MAX_EXPONENT}, got {args}")
        count = int(math.floor((args[1] - args[0]) / args[2] + 1e-9)) + 1
        if count > MAX_VALUES:
            raise ValueError(f"{path}.exponents: gives {short(count)} values, more than {MAX_VALUES}")
        try:
            raw = [base ** (args[0] + i * args[2]) for i in range(count)]
        except OverflowError:
            raise ValueError(f"{path}.exponents: {base} ** {args[1]} overflows") from None
    values = [ROUNDING[rounding](v) for v in raw] if rounding else raw
    if not values:
        raise ValueError(f"{path}: produces no values")
    return list(dict.fromkeys(values))


def _points(merged, exp: Experiment, search: SearchSpec | None, problems):
    """Expand fixed × grid, apply derived expressions, validate each point against the experiment."""
    fixed, grid, derived = (merged.get(k, {}) for k in ("fixed", "grid", "derived"))
    for key, table in (("fixed", fixed), ("grid", grid), ("derived", derived)):
        if not isinstance(table, dict):
            problems.append(f"{key}: must be a table")
            return [], (), []
    before = len(problems)
    axes = {}
    for name, value in grid.items():
        try:
            axes[name] = axis_values(f"grid.{name}", value)
        except ValueError as err:
            problems.append(str(err))
    if math.prod(len(v) for v in axes.values()) > MAX_VALUES:
        problems.append(f"grid: {' x '.join(str(len(v)) for v in axes.values())} points, more than {MAX_VALUES}")
    clash = (set(fixed) & set(grid)) | (set(derived) & (set(fixed) | set(grid)))
    problems += [f"{n}: given in more than one of fixed / grid / derived" for n in sorted(clash)]
    helpers = set().union(*(_names(f"derived.{n}", e, problems) for n, e in derived.items())) if derived else set()
    known = set(exp.fields)
    for where, table in (("fixed", fixed), ("grid", grid), ("derived", derived)):
        for name in table:
            if name not in known and name not in helpers:
                problems.append(
                    f"{where}.{name}: unknown field of experiment {exp.name!r}{suggest(name, known)}; "
                    f"fields: {', '.join(sorted(known))}"
                )
    if search and search.variable in set(fixed) | set(grid) | set(derived):
        problems.append(f"search.variable: {search.variable!r} is searched, so it must not be in fixed/grid/derived")
    if search and search.law_axis and search.law_axis not in grid:
        problems.append(
            f"search.law_axis: {search.law_axis!r} is not a grid axis{suggest(search.law_axis, grid)}; "
            f"axes: {', '.join(grid) or 'none'}"
        )
    values = [("fixed", n, [v]) for n, v in fixed.items()] + [("grid", n, vs) for n, vs in axes.items()]
    for where, name, options in values:
        field = exp.fields.get(name)
        if field is None and name not in helpers:
            continue  # already reported as an unknown field
        errors = dict.fromkeys(
            e for v in options for e in [_field_error(field, name, v) if field else _number_error(name, v)] if e
        )
        problems += [f"{where}.{name}: {e}" for e in errors]
    if len(problems) > before:
        return [], (), []
    points, skipped = [], []
    for combo in itertools.product(*axes.values()):
        point = {**fixed, **dict(zip(axes, combo))}
        try:
            point.update({n: _derive(n, e, point, exp) for n, e in derived.items()})
        except expr.ExpressionError as err:
            problems.append(f"derived: {err}")
            return [], (), []
        point = _validated_point(point, exp, search, helpers, problems, skipped)
        if point is not None:
            points.append(point)
    if not points and not problems:
        problems.append("grid: every point is impossible, nothing to run:\n      " + "\n      ".join(skipped))
    varying = tuple(n for n in points[0] if len({json.dumps(p[n]) for p in points}) > 1) if points else ()
    return points, varying, skipped


def _number_error(name, value) -> str | None:
    """Helper axes (used only by derived expressions) must be numbers."""
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    return None if ok else f"{name} is used in derived expressions, so it must be a number, got {value!r}"


def _field_error(field, name, value) -> str | None:
    """The experiment's own check of a value, plus the engine's: integer fields are int32 on the device."""
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    too_large = field.type is int and number and abs(value) > MAX_INT
    return f"{name} must be below 2**31, got {short(value)}" if too_large else field.check(name, value)


def _names(path: str, expression, problems: list[str]) -> set[str]:
    """The names an expression at `path` uses; none, and a problem, for one that does not parse."""
    try:
        return expr.names_in(expression) if isinstance(expression, str) else set()
    except expr.ExpressionError as err:
        problems.append(f"{path}: {err}")
        return set()


def _derive(name, expression, point, exp: Experiment):
    value = expr.evaluate(expression, point)
    field = exp.fields.get(name)
    if field is None or field.type is not int or isinstance(value, int):
        return value
    if not math.isfinite(value):
        raise expr.ExpressionError(f"{name} = {expression!r} is {value} at ({_label(point)}), not a finite number")
    return int(math.floor(value + 1e-9))


def _bound(expression, point) -> int:
    """A search bound at a point, truncated to an integer; ExpressionError unless finite and below 2**31."""
    value = expr.evaluate(expression, point)
    if isinstance(value, float) and not math.isfinite(value):
        raise expr.ExpressionError(f"{expression!r} is {value} at ({_label(point)}), not a finite number")
    if abs(value) > MAX_INT:
        raise expr.ExpressionError(f"{expression!r} exceeds 2**31 at ({_label(point)})")
    return int(value)


def _validated_point(point, exp: Experiment, search, helpers, problems, skipped):
    errors = [e for n, v in point.items() if n in exp.fields for e in [_field_error(exp.fields[n], n, v)] if e]
    if errors:  # only derived values can still be bad here: fixed and grid values were checked
        problems += [f"derived: {e} (at {_label(point)})" for e in errors]
        return None
    missing = [
        n
        for n, f in exp.fields.items()
        if f.default is REQUIRED and n not in point and not (search and n == search.variable)
    ]
    if missing:
        problems.append(f"fixed/grid: missing required field(s) {', '.join(missing)} of experiment {exp.name!r}")
        return None
    full = exp.complete(point)
    impossible = []
    if search:
        try:
            lo, hi = (_bound(b, point) for b in (search.lo, search.hi))
        except expr.ExpressionError as err:
            problems.append(f"search.lo/hi: {err}")
            return None
        if lo < 1 or hi < lo:
            impossible.append(f"search bracket [{lo}, {hi}] is empty or below 1")
        ceiling = exp.fields[search.variable].maximum
        if ceiling is not None and hi > ceiling:
            problems.append(
                f"search.hi: {search.variable} = {short(hi)} at ({_label(point)}) is above the largest "
                f"{search.variable} that {exp.name} supports ({ceiling})"
            )
            return None
        full[search.variable] = lo
    impossible += exp.check(full)
    if impossible:
        skipped.append(f"{_label(point)}: {'; '.join(impossible)}")
        return None
    if search:
        del full[search.variable]
    return {**{h: point[h] for h in helpers if h in point}, **full}


def short(number) -> str:
    """A number for a message: a huge integer by its size (str() of one over 4300 digits even fails)."""
    huge = isinstance(number, int) and number.bit_length() > 64
    return f"a {number.bit_length()}-bit integer" if huge else f"{number}"


def _label(point: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in point.items())
