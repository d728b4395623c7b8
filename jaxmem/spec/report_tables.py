"""The `[report]` table of a sweep spec and its sub-tables: frozen dataclasses whose annotations are their TOML keys'
kinds, defaults and meanings (jaxmem.spec.tables; docs/spec.md lists them), read by pydantic when the spec is parsed
(jaxmem.spec.sweep.parse), before anything compiles. Then every name an expression or a key uses is checked against
what the report will bind when it evaluates it (Context), and defaults that follow from other keys are filled in.

Example, Fig 5 of Nichani et al. (2024) with an α sweep:

    [report.trajectory]
    metrics = ["loss", "relation_loss", "subject_loss"]
    group_by = ["model"]
    references = [{y = "log(32)", label = "ln |A|"}, {y = "log(D)", label = "ln D"}]
    stages = [{from = 0, to = 1800, label = "Stage 1: Init"},
              {from = 1800, to = 5000, label = "Stage 2: Hallucination"},
              {from = 5000, to = 8192, label = "Stage 3: Convergence"}]
    crossings = [{metric = "relation_loss", below = "log(4)/2", label = "relation learned"},
                 {metric = "subject_loss", below = "log(8)/2", label = "subject learned"}]
    plateau = {metric = "loss", near = "log(D)", tol = 0.1, label = "hallucination"}

    [report.trajectory.escape]
    x = "log(1/init_scale)"
    x_label = "ln(1/α)"
    predicted = {"relation learned" = "1/(lr*0.07655)", "subject learned" = "1/(lr*0.02923)"}

Rules: jaxmem.report.trajectory.stages (crossings, plateaus) and jaxmem.report.trajectory.escape.
"""

from __future__ import annotations

import dataclasses
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import BeforeValidator, Field
from pydantic.json_schema import SkipJsonSchema

from jaxmem.spec.expr import ExpressionError, evaluate
from jaxmem.spec.report_agreement import Agreement, check_agreement
from jaxmem.spec.report_relations import Relation, check_relation, fill
from jaxmem.spec.tables import CONFIG, METRIC, Bounds, Expression, Flag, Formula, Names, NonNegative, Number, Pair
from jaxmem.spec.tables import Positive, Text, Words, hint, is_number, key, many, names_of, one_or_many, plain
from jaxmem.spec.tables import NOT_A_KEY, in_spec_order, unknown_names, validate

DEFAULT_THRESHOLD = 0.99
DEFAULT_TOLERANCE = 0.1
LINE_POINTS = 100

# What a name must be, in messages.
CONFIG_FIELD = "a config field"
RUN = "a config field, lr or seed"
SEARCHED = "the searched variable"
CAPACITY_X = "a config field, params or bits"
AT_LAST_EVALUATION = "a config field, lr, seed, step, time or a recorded metric"
OF_EXPERIMENT = "a metric of the experiment"


@dataclasses.dataclass(frozen=True)
class Context:
    """What the rest of the spec tells the report tables. Name sets left None are not checked (a report
    read back from stored results, or a spec whose experiment is unknown)."""

    config: frozenset[str] | None = None  # the config fields of a run (searched variable and helpers included)
    metrics: frozenset[str] | None = None  # the metrics a run records
    variable: str | None = None  # the searched variable: the one name of fit and guide
    early_stop: float | None = None  # [train] early_stop: the heatmap's default threshold
    goal: str = "largest"  # [search] goal

    @property
    def run(self) -> frozenset[str] | None:
        """The names of a run's expressions: its config fields, lr and seed."""
        return None if self.config is None else self.config | {"lr", "seed"}

    @property
    def searched_sweep(self) -> bool | None:
        """Whether the sweep searches (None: not known, the config unchecked)."""
        return None if self.config is None else self.variable is not None

    @property
    def searched(self) -> frozenset[str] | None:
        return None if self.variable is None else frozenset({self.variable})

    @property
    def evaluation(self) -> frozenset[str] | None:
        """The names of a rate's prediction: a run's, step, time and its metrics at the last evaluation."""
        return None if self.run is None or self.metrics is None else self.run | self.metrics | {"step", "time"}

    @property
    def capacity_x(self) -> frozenset[str] | None:
        """The columns of the searches that can be the capacity plot's x."""
        return None if self.config is None else self.config | {"params", "bits"}


class Checks:
    """The name checks of one table at `path`: each `names(key, found, allowed, what)` adds a problem per name
    of `found` that `allowed` (None: unchecked) lacks."""

    def __init__(self, path: str, problems: list[str], removed: frozenset[str] = frozenset()):
        self.path, self.problems, self.removed = path, problems, removed

    def names(self, key: str, found, allowed: frozenset[str] | None, what: str) -> None:
        found = [found] if isinstance(found, str) else [n for n in found or () if n]
        self.problems += unknown_names(f"{self.path}.{key}", found, allowed, what)

    def at(self, key: str | int) -> Checks:
        path = f"{self.path}[{key}]" if isinstance(key, int) else f"{self.path}.{key}"
        return Checks(path, self.problems, self.removed)

    def each(self, key: str, tables) -> list[tuple[Checks, object]]:
        """The tables of a list at `key`, each with the checks at its place in the spec (the bad ones, left out
        when the spec was read, keep their places)."""
        at, index, found = self.at(key), 0, []
        for table in tables:
            while f"{at.path}[{index}]" in self.removed:
                index += 1
            found.append((at.at(index), table))
            index += 1
        return found

    def add(self, message: str) -> None:
        self.problems.append(f"{self.path}{message}")


# -- [report.trajectory] -------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Reference:
    """A horizontal line on trajectory.png."""

    __pydantic_config__ = CONFIG
    y: Annotated[Expression, key("its level: an expression of the config fields constant within a panel, and lr")]
    label: Annotated[Text, key("legend (default: y)")] = ""
    color: Annotated[Text, key("matplotlib colour")] = "0.3"
    style: Annotated[Text, key("matplotlib line style")] = "--"


@dataclasses.dataclass(frozen=True)
class Stage:
    """A shaded x range of trajectory.png, in x units."""

    __pydantic_config__ = CONFIG
    start: Annotated[Number, key("where it starts", alias="from")]
    end: Annotated[Number, key("where it ends (> from)", alias="to")]
    label: Annotated[Text, key("its name")] = ""
    color: Annotated[Text | None, key("matplotlib colour")] = None


@dataclasses.dataclass(frozen=True)
class CrossingTable:
    """The first evaluation at which a metric falls below (or rises above) a level, interpolated between steps."""

    __pydantic_config__ = CONFIG
    metric: Annotated[Text, key("the metric")]
    below: Annotated[Expression | None, key("the level it falls to: an expression of the run's config, lr, seed")] = (
        None
    )
    above: Annotated[Expression | None, key("or the level it rises to")] = None
    label: Annotated[Text | None, key("its name (default: 'metric ≤ level')")] = None


@dataclasses.dataclass(frozen=True)
class Crossing:
    metric: str
    level: str | float
    direction: str  # "below" or "above"
    label: str


@dataclasses.dataclass(frozen=True)
class Plateau:
    """The evaluations with |metric − near| ≤ tol: the first, the last, and how many in between."""

    __pydantic_config__ = CONFIG
    metric: Annotated[Text, key("the metric")]
    near: Annotated[Expression, key("the plateau's level: an expression of the config, lr, seed")]
    tol: Annotated[NonNegative, key("its half width")]
    label: Annotated[Text, key("its name (default: 'metric ≈ near')")] = ""


@dataclasses.dataclass(frozen=True)
class Rate:
    """An asymptotic rate: per run, the least-squares slope of a metric over its last evaluations."""

    __pydantic_config__ = CONFIG
    metric: Annotated[Text, key("the metric")]
    scale: Annotated[
        Literal["log", "loglog", "exp"], key("metric vs ln(step), ln(metric) vs ln(step), or ln(metric) vs step")
    ] = "log"
    decades: Annotated[Positive, key("over the last this many decades of evaluations")] = 1.0
    predicted: Annotated[
        Expression | None, key("the predicted slope: an expression of the config, lr, seed, step, time and metrics")
    ] = None
    tolerance: Annotated[Positive, key("the fitted slope agrees when |fitted / predicted − 1| ≤ this")] = (
        DEFAULT_TOLERANCE
    )
    label: Annotated[Text, key("its name (default: the slope in words)")] = ""
    window: Annotated[Pair | None, key("instead: the evaluations whose metric / its first value lies in (lo, hi]")] = (
        None
    )


@dataclasses.dataclass(frozen=True)
class Trend:
    """A monotone trend: per run, the evaluations that move against the direction by more than tol × |value|."""

    __pydantic_config__ = CONFIG
    metric: Annotated[Text, key("the metric")]
    direction: Annotated[Literal["increasing", "decreasing"], key("the expected direction")] = "increasing"
    tol: Annotated[NonNegative, key("relative slack")] = 1e-6
    label: Annotated[Text, key("its name (default: the metric)")] = ""


@dataclasses.dataclass(frozen=True)
class Escape:
    """The escape-time law: per crossing and group, a line of the crossing against an expression of the config."""

    __pydantic_config__ = CONFIG
    x: Annotated[Formula, key("the law's x: an expression of the run's config, lr, seed")]
    x_label: Annotated[Text, key("its axis name (default: x)")] = ""
    y: Annotated[Literal["step", "time"] | None, key("the crossing in steps or time (default: the trajectory's x)")] = (
        None
    )
    group_by: Annotated[Names | None, key("one law per combination (default: the trajectory's group_by)")] = None
    tolerance: Annotated[Positive, key("fitted / predicted agrees within this")] = DEFAULT_TOLERANCE
    predicted: Annotated[
        dict[str, Expression], key("crossing label = the predicted slope, an expression of a group's config")
    ] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class TrajectorySpec:
    """What trajectories.csv, trajectory.png and the Trajectories section of a sweep with record_trajectory show."""

    __pydantic_config__ = CONFIG
    metrics: Annotated[Names | None, key("metrics drawn (default: loss where recorded, else every metric)")] = None
    x: Annotated[Literal["step", "time"], key("'time' = step · lr")] = "step"
    x_scale: Annotated[Literal["linear", "log"], key("the x axis")] = "linear"
    y_scale: Annotated[Literal["linear", "log"], key("the y axis")] = "linear"
    x_label: Annotated[Text | None, key("x axis name")] = None
    y_label: Annotated[Text | None, key("y axis name")] = None
    title: Annotated[Text | None, key("the plot's title")] = None
    group_by: Annotated[Names, key("config fields: one panel per distinct combination")] = ()
    color_by: Annotated[Names | None, key("config fields told apart by colour (default: those that vary)")] = None
    seeds: Annotated[Literal["lines", "band"], key("every run a line, or the mean and min–max band")] = "lines"
    references: Annotated[many(Reference), key("horizontal lines")] = ()
    stages: Annotated[many(Stage), key("shaded x ranges")] = ()
    crossings: Annotated[many(CrossingTable), key("levels each run crosses: the step at which it does")] = ()
    plateaus: Annotated[one_or_many(Plateau), key("plateaus: a table or a list of tables", alias="plateau")] = ()
    escape: Annotated[Escape | None, key("the escape-time law of the crossings")] = None
    rates: Annotated[many(Rate), key("asymptotic rates")] = ()
    trends: Annotated[many(Trend), key("monotone trends")] = ()
    layout: Annotated[Literal["group", "metric"], key("one panel per group, or per metric (own y axes)")] = "group"
    log_y: Annotated[Names, key("layout 'metric': metrics drawn on a log y axis")] = ()


def check_trajectory(spec: TrajectorySpec, context: Context, c: Checks) -> TrajectorySpec:
    c.names("group_by", spec.group_by, context.run, RUN)
    c.names("color_by", spec.color_by, context.run, RUN)
    c.names("metrics", spec.metrics, context.metrics, METRIC)
    c.names("log_y", spec.log_y, context.metrics, METRIC)
    for at, r in c.each("references", spec.references):
        at.names("y", names_of(r.y), context.run, RUN)
    for at, p in c.each("plateau", spec.plateaus):
        at.names("metric", p.metric, context.metrics, METRIC)
        at.names("near", names_of(p.near), context.run, RUN)
    for at, t in c.each("trends", spec.trends):
        at.names("metric", t.metric, context.metrics, METRIC)
    crossings = _kept(_crossing, spec.crossings, context, c, "crossings")
    labels = [x.label for x in crossings]
    if len(set(labels)) != len(labels):
        c.add(f".crossings: labels must be distinct, got {labels}")
    stages = tuple(s for at, s in c.each("stages", spec.stages) if _stage_ok(s, at))
    escape = spec.escape and _escape(spec, labels, context, c.at("escape"))
    return dataclasses.replace(
        spec,
        references=tuple(fill(r, label=str(r.y)) for r in spec.references),
        stages=tuple(fill(s, color=None) for s in stages),
        crossings=crossings,
        plateaus=tuple(fill(p, label=f"{p.metric} ≈ {p.near}") for p in spec.plateaus),
        escape=escape,
        rates=_kept(_rate, spec.rates, context, c, "rates"),
        trends=tuple(fill(t, label=t.metric) for t in spec.trends),
    )


def _kept(read, tables, context: Context, c: Checks, key: str) -> tuple:
    """Every table of the list at `key` read by `read`, the bad ones (None) left out."""
    return tuple(x for x in (read(t, context, at) for at, t in c.each(key, tables)) if x is not None)


def _stage_ok(stage: Stage, c: Checks) -> bool:
    if not stage.end > stage.start:
        c.add(f": to ({stage.end:g}) must be larger than from ({stage.start:g})")
    return stage.end > stage.start


def _crossing(t: CrossingTable, context: Context, c: Checks) -> Crossing | None:
    c.names("metric", t.metric, context.metrics, METRIC)
    sides = [side for side in ("below", "above") if getattr(t, side) is not None]
    if len(sides) != 1:
        return c.add(": needs exactly one of below, above")
    level = getattr(t, sides[0])
    c.names(sides[0], names_of(level), context.run, RUN)
    label = t.label or f"{t.metric} {'≤' if sides[0] == 'below' else '≥'} {level}"
    return Crossing(t.metric, level, sides[0], label)


def _rate(rate: Rate, context: Context, c: Checks) -> Rate:
    c.names("metric", rate.metric, context.metrics, METRIC)
    c.names("predicted", names_of(rate.predicted), context.evaluation, AT_LAST_EVALUATION)
    if rate.window is not None and rate.window[0] <= 0:
        c.add(f".window: lo must be > 0 (a ratio to the first value), got {list(rate.window)}")
    slope = {"log": f"d {rate.metric} / d ln step", "loglog": f"d ln {rate.metric} / d ln step"}
    return fill(rate, label=slope.get(rate.scale, f"d ln {rate.metric} / d step"))


def _escape(spec: TrajectorySpec, labels: list[str], context: Context, c: Checks) -> Escape:
    escape = spec.escape
    c.names("x", names_of(escape.x), context.run, RUN)
    c.names("group_by", escape.group_by, context.run, RUN)
    if not labels:
        c.add(": needs report.trajectory.crossings to fit")
    predicted = {k: v for k, v in escape.predicted.items() if k in labels}
    c.problems += [
        f"{c.path}.predicted.{k}: unknown key{hint(k, labels)}" for k in escape.predicted if labels and k not in labels
    ]
    for label, value in predicted.items():
        c.at("predicted").names(label, names_of(value), context.run, RUN)
    group_by = spec.group_by if escape.group_by is None else escape.group_by
    return dataclasses.replace(
        fill(escape, x_label=escape.x, y=spec.x), group_by=group_by, predicted=predicted if labels else {}
    )


# -- [report.heatmap] ------------------------------------------------------------------------------------------
def _levels(value) -> tuple[float, ...]:
    ok = isinstance(value, list) and value and all(is_number(v) and 0 < v <= 1 for v in value)
    if not (ok and len(set(value)) == len(value)):
        raise ValueError()
    return tuple(sorted(float(v) for v in value))


Levels = plain(_levels, list[float], "a list of distinct numbers in (0, 1]")
Coordinate = Annotated[Pair | Expression, Words("a number, an expression or a range [lo, hi]")]


@dataclasses.dataclass(frozen=True)
class LineTable:
    """An overlay line: one of x, y a range [lo, hi], the other a number or an expression in that variable."""

    __pydantic_config__ = CONFIG
    x: Annotated[Coordinate | None, key("a range [lo, hi], or an expression of y")] = None
    y: Annotated[Coordinate | None, key("a range [lo, hi], or an expression of x")] = None
    label: Annotated[Text | None, key("legend (default: the expression)")] = None
    color: Annotated[Text, key("matplotlib colour")] = "red"
    style: Annotated[Text, key("matplotlib line style")] = "-"


@dataclasses.dataclass(frozen=True)
class Line:
    """An overlay line: its points in plot units and its legend label."""

    x: tuple[float, ...]
    y: tuple[float, ...]
    label: str
    color: str = "red"
    style: str = "-"


@dataclasses.dataclass(frozen=True)
class HeatmapSpec:
    """heatmap.png and its table: per (x, y) cell the best learning rate's metric, the mean over seeds."""

    __pydantic_config__ = CONFIG
    x: Annotated[Formula, key("an expression of the config fields, e.g. 'd*d_h*H'")]
    y: Annotated[Formula, key("likewise, e.g. 'd*m'")]
    x_label: Annotated[Text, key("axis name (default: x)")] = ""
    y_label: Annotated[Text, key("axis name (default: y)")] = ""
    metric: Annotated[Text, key("the runs.csv column shown, e.g. 'final_exact_accuracy'")] = "max_metric"
    better: Annotated[Literal["max", "min"], key("how the best learning rate is chosen and the threshold read")] = "max"
    threshold: Annotated[Number, key("success (default: the success rule's threshold, else 0.99)")] = DEFAULT_THRESHOLD
    vmin: Annotated[Number | None, key("colour range (default: the data's)")] = None
    vmax: Annotated[Number | None, key("colour range (default: the data's)")] = None
    annotate: Annotated[Flag | None, key("write each cell's value (default: up to 20 x 20 cells)")] = None
    lines: Annotated[many(LineTable), key("overlay lines")] = ()
    levels: Annotated[Levels, key("a phase diagram: per x the smallest y whose success rate reaches each level")] = ()
    shade: Annotated[Literal["metric", "success_rate"], key("what colours the cells")] = "metric"

    def reaches(self, values) -> np.ndarray:
        """Whether each value reaches the threshold (NaN never does)."""
        v = np.asarray(values, dtype=float)
        with np.errstate(invalid="ignore"):
            return np.where(np.isnan(v), False, v >= self.threshold if self.better == "max" else v <= self.threshold)


def check_heatmap(spec: HeatmapSpec, given: dict, context: Context, c: Checks) -> HeatmapSpec:
    c.names("x", names_of(spec.x), context.config, CONFIG_FIELD)
    c.names("y", names_of(spec.y), context.config, CONFIG_FIELD)
    threshold = context.early_stop if context.early_stop is not None else DEFAULT_THRESHOLD
    spec = fill(spec, x_label=spec.x, y_label=spec.y)
    lines = _kept(_line, spec.lines, context, c, "lines")
    return dataclasses.replace(spec, lines=lines, threshold=spec.threshold if "threshold" in given else threshold)


def _line(t: LineTable, context: Context, c: Checks) -> Line | None:
    """One `lines` entry as plot points: the range axis sampled evenly, the other evaluated along it."""
    ranges = [axis for axis in ("x", "y") if isinstance(getattr(t, axis), tuple)]
    if len(ranges) != 1 or t.x is None or t.y is None:
        return c.add(": needs x and y, exactly one of x, y a range [lo, hi]")
    free = ranges[0]
    other = "y" if free == "x" else "x"
    span, level = getattr(t, free), getattr(t, other)
    c.names(other, names_of(level), frozenset({free}), f"the line's variable {free}")
    if names_of(level) - {free}:
        return None
    along = np.linspace(*span, LINE_POINTS)
    try:
        across = np.array([float(evaluate(level, {free: float(v)})) for v in along])
    except (ExpressionError, OverflowError, TypeError) as err:  # TypeError: a complex value
        return c.add(f".{other}: {err}")
    xs, ys = (along, across) if free == "x" else (across, along)
    return Line(tuple(xs.tolist()), tuple(ys.tolist()), t.label or f"{other} = {level}", t.color, t.style)


# -- [report] --------------------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Guide:
    """The authors' law on the capacity plot."""

    __pydantic_config__ = CONFIG
    expr: Annotated[Formula, key("x as an expression in the searched variable, e.g. '0.7*N*log(N)'")]
    label: Annotated[Text, key("legend (default: expr)")] = ""


def _or_expression(schema: dict) -> None:
    schema["anyOf"] = [{"type": "string"}, *schema.pop("anyOf", [])]


def _expression_table(value):
    return {"expr": value} if isinstance(value, str) else value


@dataclasses.dataclass(frozen=True)
class LinearFit:
    """y = a + b·x by least squares over the grid points of a search sweep."""

    __pydantic_config__ = CONFIG
    x: Annotated[Formula, key("an expression of a point's config (params and bits too)")]
    y: Annotated[
        Formula | None, key("an expression of the searched variable and the config (default: the variable)")
    ] = None
    x_label: Annotated[Text, key("axis name (default: x)")] = ""
    y_label: Annotated[Text | None, key("axis name (default: y)")] = None
    expect_slope: Annotated[Bounds | None, key("[lo, hi]: b's 95 % interval inside PASSes ([0, inf]: b > 0)")] = None
    min_r2: Annotated[Number | None, key("and R² at least this, against y = a + b·x^p with a free p too")] = None
    group_by: Annotated[Names, key("one fit per combination (default: one over every point)")] = ()


@dataclasses.dataclass(frozen=True)
class Ratio:
    """A per-point column of the capacity table: an expression of the searched variable and the config."""

    __pydantic_config__ = CONFIG
    expr: Annotated[Formula, key("e.g. 'n / n_cnt': its median and min–max over the answered searches")]
    label: Annotated[Text, key("column name (default: expr)")] = ""
    expect: Annotated[Pair | None, key("[lo, hi] every median should lie in")] = None


@dataclasses.dataclass(frozen=True)
class SuccessMap:
    """The probes of a search sweep on (x, searched variable), one panel per group (success_map.png)."""

    __pydantic_config__ = CONFIG
    x: Annotated[Formula | None, key("an expression of the config (default: the [report] x)")] = None
    x_label: Annotated[Text | None, key("axis name")] = None
    group_by: Annotated[Names | None, key("one panel per combination (default: the [report] group_by)")] = None
    y_scale: Annotated[Literal["log", "linear"], key("the searched variable's axis")] = "log"


@dataclasses.dataclass(frozen=True)
class ReadoffTable:
    """Per run, the smallest test-time x from which a metric stays at most (at least) a level at every larger x."""

    __pydantic_config__ = CONFIG
    metric: Annotated[Text, key("the metric")]
    at_most: Annotated[Number | None, key("the level it stays at most (give one of at_most, at_least)")] = None
    at_least: Annotated[Number | None, key("or at least")] = None
    against: Annotated[Text | None, key("a config field or another test-time axis: medians per value, and a slope")] = (
        None
    )
    label: Annotated[Text | None, key("its name")] = None
    expect_slope: Annotated[Pair | None, key("[lo, hi] for the slope of ln(median) against ln(against)")] = None


@dataclasses.dataclass(frozen=True)
class Readoff:
    """The smallest test-time x from which `metric` stays at most / at least `level`, against a field."""

    metric: str
    at_most: bool
    level: float
    against: str | None  # a config field or another test-time axis; None: one value per run
    label: str
    expect_slope: tuple[float, float] | None = None


@dataclasses.dataclass(frozen=True)
class FinalEvalSpec:
    """What final_eval.png and the test-time section show (sweeps with test-time axes, [final_eval])."""

    __pydantic_config__ = CONFIG
    x: Annotated[Text | None, key("the test-time axis on x (default: the first)")] = None
    metrics: Annotated[Names, key("the metrics drawn (default: every one)")] = ()
    readoffs: Annotated[one_or_many(ReadoffTable), key("read-offs: a table or a list", alias="readoff")] = ()


def check_final_eval(spec: FinalEvalSpec, context: Context, c: Checks) -> FinalEvalSpec:
    c.names("x", spec.x, context.config, CONFIG_FIELD)
    c.names("metrics", spec.metrics, context.metrics, OF_EXPERIMENT)
    return dataclasses.replace(spec, readoffs=_kept(_readoff, spec.readoffs, context, c, "readoff"))


def _readoff(t: ReadoffTable, context: Context, c: Checks) -> Readoff | None:
    c.names("metric", t.metric, context.metrics, OF_EXPERIMENT)
    c.names("against", t.against, context.config, CONFIG_FIELD)
    sides = [k for k in ("at_most", "at_least") if getattr(t, k) is not None]
    if len(sides) != 1:
        return c.add(f": needs exactly one of at_most, at_least, got {sides or 'neither'}")
    level = getattr(t, sides[0])
    label = t.label or f"smallest x with {t.metric} {'≤' if sides[0] == 'at_most' else '≥'} {level:g} from there on"
    return Readoff(t.metric, sides[0] == "at_most", level, t.against, label, t.expect_slope)


@dataclasses.dataclass(frozen=True)
class ReportSpec:
    """report.md, its tables and plots: the capacity plot's axes and laws, and the verdicts checked."""

    __pydantic_config__ = CONFIG
    title: Annotated[Text | None, key("the report's title")] = None
    x: Annotated[Text, key("the capacity plot's x: a config field, 'params' or 'bits'")] = "params"
    x_label: Annotated[Text | None, key("its axis name (default: x)")] = None
    fit: Annotated[Formula | None, key("an expression of the searched variable fitted as a power law of x")] = None
    guide: Annotated[
        Guide | None,
        BeforeValidator(_expression_table),
        Field(json_schema_extra=_or_expression),
        key("the authors' law: x as an expression of the searched variable, or {expr, label}"),
    ] = None
    group_by: Annotated[Names, key("config fields: one capacity curve per distinct combination")] = ()
    expect_slope: Annotated[Pair | None, key("[lo, hi]: the fitted slope's 95 % interval inside PASSes")] = None
    collapse: Annotated[Flag, key("how well the groups collapse onto the common law")] = False
    references: Annotated[Flag, key("sampled instances re-solved on the host")] = False
    fit_linear: Annotated[one_or_many(LinearFit), key("searches: lines y = a + b·x over the grid points")] = ()
    ratios: Annotated[one_or_many(Ratio), key("searches: columns of the capacity table", alias="ratio")] = ()
    success_map: Annotated[SuccessMap | None, key("searches: every probe on (x, searched variable)")] = None
    heatmap: Annotated[HeatmapSpec | None, key("grid sweeps: a metric over two expressions of the config")] = None
    trajectory: Annotated[TrajectorySpec, key("sweeps with record_trajectory: curves and stages")] = dataclasses.field(
        default_factory=TrajectorySpec
    )
    final_eval: Annotated[FinalEvalSpec, key("sweeps with test-time axes")] = dataclasses.field(
        default_factory=FinalEvalSpec
    )
    relations: Annotated[one_or_many(Relation), key("a per-run quantity against the config", alias="relation")] = ()
    agreements: Annotated[one_or_many(Agreement), key("runs that differ in one field agree", alias="agreement")] = ()
    search_answer: Annotated[
        Literal["bracket", "stable"], key("a non-monotone search's answer: its bracket's, or the rule's ('stable')")
    ] = "bracket"
    search_goal: Annotated[SkipJsonSchema[str], NOT_A_KEY] = "largest"  # [search] goal: the capacity section's words


SEARCHED_ONLY = {"fit_linear": "fit_linear", "ratio": "ratios", "success_map": "success_map"}
SEARCHED_ONLY |= {"search_answer": "search_answer"}


def read_report(value: Any, problems: list[str], context: Context = Context()) -> ReportSpec:
    """The `[report]` table and its sub-tables (pass {} when there is none)."""
    spec, found, removed = validate(ReportSpec, value, "report")
    checks = Checks("report", found, frozenset(removed))
    spec = check_report(spec or ReportSpec(), value if isinstance(value, dict) else {}, context, checks)
    problems += in_spec_order(checks.problems, ReportTables)
    return spec


@dataclasses.dataclass(frozen=True)
class ReportTables:
    """Where [report]'s problems are, to order them."""

    __pydantic_config__ = CONFIG
    report: ReportSpec


def check_report(spec: ReportSpec, given: dict, context: Context, c: Checks) -> ReportSpec:
    """The names every key and expression uses, checked against `context`; the defaults that follow from it."""
    if context.searched_sweep is False:
        c.problems += [f"report.{k}: needs a [search]" for k in SEARCHED_ONLY if k in given]
    c.names("x", spec.x, context.capacity_x, CAPACITY_X)
    c.names("fit", names_of(spec.fit), context.searched, SEARCHED)
    c.names("group_by", spec.group_by, context.config, CONFIG_FIELD)
    if spec.guide is not None:
        c.at("guide").names("expr", names_of(spec.guide.expr), context.searched, SEARCHED)
    for at, f in c.each("fit_linear", spec.fit_linear):
        at.names("x", names_of(f.x), context.capacity_x, CAPACITY_X)
        at.names("y", names_of(f.y), context.capacity_x, CAPACITY_X)
        at.names("group_by", f.group_by, context.config, CONFIG_FIELD)
    for at, r in c.each("ratio", spec.ratios):
        at.names("expr", names_of(r.expr), context.capacity_x, CAPACITY_X)
    if spec.success_map is not None:
        c.at("success_map").names("x", names_of(spec.success_map.x), context.config, CONFIG_FIELD)
        c.at("success_map").names("group_by", spec.success_map.group_by, context.config, CONFIG_FIELD)
    heatmap = spec.heatmap and check_heatmap(spec.heatmap, given.get("heatmap", {}), context, c.at("heatmap"))
    return dataclasses.replace(
        spec,
        guide=spec.guide and fill(spec.guide, label=spec.guide.expr),
        fit_linear=tuple(fill(f, x_label=f.x, y_label=f.y) for f in spec.fit_linear),
        ratios=tuple(fill(r, label=r.expr) for r in spec.ratios),
        heatmap=heatmap,
        trajectory=check_trajectory(spec.trajectory, context, c.at("trajectory")),
        final_eval=check_final_eval(spec.final_eval, context, c.at("final_eval")),
        relations=_kept(check_relation, spec.relations, context, c, "relation"),
        agreements=_kept(check_agreement, spec.agreements, context, c, "agreement"),
        search_goal=context.goal,
    )
