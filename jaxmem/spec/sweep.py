"""Sweep specs: TOML files describing a whole grid, parsed and validated before anything compiles.

A spec's tables are typed (jaxmem.spec.document.SweepTables; every key in docs/spec.md, `jaxmem schema` their
JSON Schema): jaxmem.spec.tables.read reads them (pydantic checks each value), naming every bad value by its dotted
path (an unknown key with the closest valid one). Then the checks that need the experiment run: field names, kinds
and values, expressions, search bounds, step budgets, maxima. See sweeps/ for complete examples.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
import math
import tomllib
from pathlib import Path

from jaxmem.spec import expr
from jaxmem.spec.document import MAX_VALUES, SECTIONS, SweepTables, short
from jaxmem.spec.report_tables import Context, ReportSpec, read_report
from jaxmem.spec.sections import EngineSpec, SearchSpec, SuccessRule, SuccessTable, TrainSpec
from jaxmem.spec.tables import MAX_INT, hint, names_of, one_of, read, suggest, unknown_names
from jaxmem.experiments.interface import Experiment
from jaxmem.experiments.registry import SHIPPED, UnknownExperiment, searching
from jaxmem.experiments.registry import get as get_experiment
from jaxmem.experiments.interface import REQUIRED

__all__ = ["EngineSpec", "SearchSpec", "SuccessRule", "TrainSpec", "SpecError", "SweepSpec", "load", "parse"]
ROUNDING = {"floor": math.floor, "ceil": math.ceil, "round": round}


class SpecError(ValueError):
    """A sweep spec is malformed; the message lists every problem with its field path."""

    def __init__(self, source: str, problems: list[str]):
        self.problems = problems
        super().__init__(f"invalid sweep spec {source}:\n" + "\n".join(f"  - {p}" for p in problems))


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
    problems += _unknown_sections(raw) + _other_presets(raw, preset_name)
    bad: set[str] = set()
    tables = read(SweepTables, {k: v for k, v in merged.items() if k in SECTIONS - {"report"}}, "", problems, bad)
    exp = _experiment(merged, "experiment" in bad, problems)
    train = None if "train" in bad else tables.train
    train_bad = {b.removeprefix("train.") for b in bad if b.startswith("train.")}
    step_budget = train.steps if train and isinstance(train.steps, str) else None
    if step_budget is not None:  # train.steps becomes the largest budget, below
        train, train_bad = dataclasses.replace(train, steps=TrainSpec.steps), train_bad | {"steps"}
    search = _search(tables.search, exp, problems)
    known = None if unknown_variable(search, exp) else exp  # a mistyped variable: one complaint, not one per use
    report = read_report(merged.get("report", {}), problems, _report_context(merged, known, train, search))
    success = _success(merged, tables.success, exp, train, search, problems)
    if train:
        _check_train(train, train_bad, step_budget, exp, success, problems)
    if "engine" not in bad:
        _check_engine(tables.engine, exp, search, problems)
    points, axes, skipped = ([], (), [])
    if known is not None and not {b.split(".")[0] for b in bad} & {"fixed", "grid", "derived"}:
        points, axes, skipped = _points(tables, exp, search, problems)
    final_eval = _final_eval(tables.final_eval, exp, search, problems) if exp is not None else ()
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
        description=tables.description,
        points=tuple(points),
        axes=axes,
        seeds=tables.seeds,
        train=train,
        search=search,
        engine=tables.engine,
        report=report,
        success=success,
        skipped=tuple(skipped),
        resolved=merged,
        step_budget=step_budget,
        final_eval=final_eval,
    )


def _table(merged: dict, name: str) -> dict:
    value = merged.get(name, {})
    return value if isinstance(value, dict) else {}


def stored_report_spec(resolved: dict, source: str = "<stored spec>") -> ReportSpec:
    """The report tables of a resolved spec (as stored with the results), read without the rest of
    the spec, which was checked when the sweep ran: names in expressions are not checked. SpecError
    when they are invalid."""
    problems: list[str] = []
    train = read(TrainSpec, _table(resolved, "train"), "train", [], set())
    search = _table(resolved, "search")
    context = Context(early_stop=train and train.early_stop, goal=search.get("goal", "largest"))
    report = read_report(resolved.get("report", {}), problems, context)
    if problems:
        raise SpecError(source, problems)
    return report


def _unknown_sections(raw: dict) -> list[str]:
    """Unknown top-level names of the spec and of each of its presets."""
    problems = _unknown("", raw, SECTIONS | {"presets"})
    presets = raw.get("presets", {})
    for name, table in presets.items() if isinstance(presets, dict) else ():
        if isinstance(table, dict):
            problems += _unknown(f"presets.{name}.", table, SECTIONS)
        else:
            problems.append(f"presets.{name}: must be a table, got {table!r}")
    return problems


def _other_presets(raw: dict, chosen: str) -> list[str]:
    """The kinds and limits of every other preset's spec (as the JSON Schema checks every preset as you type): a
    problem per bad value that the chosen preset's spec lacks, named by its preset. Names are not checked."""
    presets = raw.get("presets", {})
    others = [n for n, t in presets.items() if n != chosen and isinstance(t, dict)] if isinstance(presets, dict) else []
    own = set(_typed(_apply_preset(raw, chosen, [])[0]))
    return [f"presets.{name}: {p}" for name in others for p in _typed(_apply_preset(raw, name, [])[0]) if p not in own]


def _typed(merged: dict) -> list[str]:
    """A problem per value of a merged spec of the wrong kind or out of its limits."""
    problems: list[str] = []
    read(SweepTables, {k: v for k, v in merged.items() if k in SECTIONS}, "", problems, set(), Context())
    return problems


def _unknown(prefix: str, table: dict, allowed: frozenset[str]) -> list[str]:
    return [f"{prefix}{k}: unknown section or key{hint(k, allowed)}" for k in table if k not in allowed | {"presets"}]


def config_names(merged: dict, exp: Experiment, search) -> set[str]:
    """The names a run's config holds: the experiment's fields, the fixed, grid and derived names
    (helper axes included) and the searched variable."""
    tables = [merged.get(k) for k in ("fixed", "grid", "derived")]
    return set(exp.fields).union(*(t for t in tables if isinstance(t, dict)), {search.variable} if search else ())


def _report_context(merged: dict, exp: Experiment | None, train, search) -> Context:
    """What the report tables may name: a run's config fields (the experiment's, the helper axes and
    the searched variable) and recorded metrics; and their defaults from [train] and [search]."""
    defaults = dict(early_stop=train.early_stop if train else None, goal=search.goal if search else "largest")
    if exp is None:
        return Context(**defaults)
    gradient_flow = train is not None and train.integrator == "gradient_flow"
    metrics = exp.metrics + (("solver_steps",) if gradient_flow else ())  # the ODE solver's, jaxmem.engine.program
    return Context(
        config=frozenset(config_names(merged, exp, search)),
        metrics=frozenset(metrics),
        variable=search.variable if search else None,
        **defaults,
    )


def _success(merged: dict, table: SuccessTable | None, exp, train, search, problems) -> SuccessRule | None:
    """The `[success]` table; without one the rule the legacy keys imply: train.metric at least
    search.threshold (with a search) or train.early_stop (None when neither)."""
    if "success" not in merged:
        threshold = search.threshold if search else train.early_stop if train else None
        return None if train is None or threshold is None else SuccessRule(train.metric, "at_least", threshold)
    if "threshold" in _table(merged, "search"):
        problems.append("success: given together with search.threshold; state the threshold once, in [success]")
    if table is None:
        return None
    metric = table.metric if table.metric is not None else train.metric if train else None
    if exp is not None and metric is not None:
        problems += unknown_names("success.metric", [metric], frozenset(exp.metrics), f"a metric of {exp.name}")
    given = _table(merged, "success")
    side = one_of({k: k in given for k in ("at_least", "at_most")}, "success", problems)
    if side is None:
        return None
    threshold = getattr(table, side)
    return None if metric is None or threshold is None else SuccessRule(metric, side, threshold, table.counts)


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


def _experiment(merged, bad: bool, problems) -> Experiment | None:
    name = merged.get("experiment")
    if name is None:
        problems.append('experiment: missing (e.g. experiment = "assoc_memory", or "my_module:EXPERIMENT")')
    if name is None or bad:
        return None
    try:
        return get_experiment(name)
    except UnknownExperiment as err:
        suggestion = "" if ":" in name else suggest(name, SHIPPED)
        problems.append(f"experiment: {err}{suggestion}")
        return None


def _check_train(train: TrainSpec, bad: set, step_budget, exp: Experiment | None, success, problems) -> None:
    """[train]'s values against each other, the experiment and the success rule."""
    if "steps" not in bad and train.steps > 0 and exp is not None and not exp.trainable:
        problems.append(f"train.steps: {exp.name} is a construction that is never trained (no loss); use steps = 0")
    linear = train.eval_schedule == "linear"
    if linear and not bad & {"steps", "eval_every", "eval_schedule"} and train.steps % train.eval_every:
        problems.append(f"train.steps: {train.steps} is not a multiple of train.eval_every = {train.eval_every}")
    if "metric" not in bad and exp is not None and train.metric not in exp.metrics:
        problems.append(
            f"train.metric: {train.metric!r} is not a metric of {exp.name}; one of {', '.join(exp.metrics)}"
        )
    if "give_up" not in bad and train.give_up and success is None:
        problems.append("train.give_up: needs a success rule to give up on ([success], or a search's threshold)")
    if not bad & {"give_up", "give_up_pace"} and train.give_up_pace != 1 and not train.give_up:
        problems.append("train.give_up_pace: has no effect without train.give_up (the window it extrapolates)")
    if train.eval_schedule != "log":
        return
    if "eval_points" not in bad and train.eval_points < 2:
        problems.append(f"train.eval_points: a log schedule needs at least 2 points, got {train.eval_points}")
    if step_budget is not None:
        problems.append("train.steps: a log eval_schedule needs a fixed number of steps, not an expression")
    if train.give_up:
        problems.append("train.give_up: not available with a log eval_schedule (its evaluations are unevenly spaced)")


def _check_engine(engine: EngineSpec, exp: Experiment | None, search: SearchSpec | None, problems) -> None:
    """The sizes padded to their maximum: integer fields of the experiment, not the searched one."""
    if exp is not None:
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


def _search(search: SearchSpec | None, exp: Experiment | None, problems) -> SearchSpec | None:
    """[search]'s values against each other and the experiment."""
    if search is None:
        return None
    if unknown_variable(search, exp):
        ints = [n for n, f in exp.kinds.items() if f.type is int]  # derived sizes too
        problems.append(
            f"search.variable: {search.variable!r} is not an integer field of {exp.name}"
            f"{suggest(search.variable, ints)} (integer fields: {', '.join(ints)})"
        )
    if search.law_axis and search.mode != "verified":
        problems.append("search.law_axis: law-seeded brackets need mode = 'verified' (paper mode follows the authors)")
    if not isinstance(search.lo, str) and search.lo < 1:
        problems.append(f"search.lo: must be >= 1, got {search.lo}")
    if not isinstance(search.lo, str) and not isinstance(search.hi, str) and search.hi < search.lo:
        problems.append(f"search.hi: must be >= search.lo, got [{search.lo}, {search.hi}]")
    return search


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


def _final_eval(table, exp: Experiment, search: SearchSpec | None, problems) -> tuple[tuple[str, tuple], ...]:
    """The test-time axes: traced or size fields of the experiment, each a non-empty list of valid values."""
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


def unknown_variable(search: SearchSpec | None, exp: Experiment | None) -> bool:
    """Whether the search names a variable that is no integer field of the experiment."""
    if search is None or exp is None:
        return False
    field = exp.fields.get(search.variable)
    return field is None or field.type is not int


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
    if kind == "log_range":
        num = value.get("num")
        if not (isinstance(args, list) and len(args) == 2 and min(args) > 0 and isinstance(num, int)):
            raise ValueError(f"{path}.log_range: expected [lo>0, hi>0] with num = a count, got {args}, num={num}")
        if not 1 <= num <= MAX_VALUES:
            raise ValueError(f"{path}.num: must be in [1, {MAX_VALUES}], got {num}")
        lo, hi = math.log(args[0]), math.log(args[1])
        raw = [math.exp(lo + (hi - lo) * i / max(num - 1, 1)) for i in range(num)]
    else:
        if kind == "range" and not (isinstance(args, list) and len(args) in (2, 3) and (args + [1])[2] > 0):
            raise ValueError(
                f"{path}.range: expected [start, stop] or [start, stop, step>0] (stop inclusive), got {args}"
            )
        if kind == "exponents" and not (isinstance(args, list) and len(args) == 3 and args[2] > 0):
            raise ValueError(f"{path}.exponents: expected [first, last, step>0], got {args}")
        if kind == "exponents" and max(abs(args[0]), abs(args[1])) > expr.MAX_EXPONENT:
            raise ValueError(f"{path}.exponents: must lie within ±{expr.MAX_EXPONENT}, got {args}")
        start, stop, step = (args + [1])[:3]
        count = int(math.floor((stop - start) / step + 1e-9)) + 1
        if count > MAX_VALUES:
            raise ValueError(f"{path}.{kind}: gives {short(count)} values, more than {MAX_VALUES}")
        raw = [start + i * step for i in range(max(count, 0))]
        try:
            raw = [value.get("base", 2) ** e for e in raw] if kind == "exponents" else raw
        except OverflowError:
            raise ValueError(f"{path}.exponents: {value.get('base', 2)} ** {stop} overflows") from None
    values = [ROUNDING[rounding](v) for v in raw] if rounding else raw
    if not values:
        raise ValueError(f"{path}: produces no values")
    return list(dict.fromkeys(values))


def _points(tables: SweepTables, exp: Experiment, search: SearchSpec | None, problems):
    """Expand fixed × grid, apply derived expressions, validate each point against the experiment."""
    fixed, grid, derived = tables.fixed, tables.grid, tables.derived
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
    helpers = sorted(set().union(*(names_of(e) for e in derived.values())))
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


def _label(point: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in point.items())
