"""The `[report]` table of a sweep spec and its sub-tables: frozen dataclasses whose annotations are their TOML keys'
kinds, defaults and meanings (jaxmem.spec.tables; docs/spec.md lists them), read when the spec is parsed
(jaxmem.spec.sweep.parse), before anything compiles: every name an expression or a key uses is checked against what
the report will bind when it evaluates it (Context), and each table's `checked` fills in the defaults that follow
from other keys.

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
from jaxmem.spec.report_agreement import Agreement
from jaxmem.spec.report_relations import RUN, RUN_QUANTITIES, SEARCH_QUANTITY, Relation, Where
from jaxmem.spec.tables import Bounds, Expression, Flag, Formula, Names, NonNegative, Number, Pair, Positive, Text
from jaxmem.spec.tables import Words, fill, hint, is_number, key, names_of, one_of, one_or_many, plain, read
from jaxmem.spec.tables import unknown_names

DEFAULT_THRESHOLD = 0.99
DEFAULT_TOLERANCE = 0.1
LINE_POINTS = 100

# The names a key may be or use: the Context's set of them, and what a name must be, in messages.
CONFIG_FIELD = ("config", "a config field")
METRIC = ("metrics", "a recorded metric")
OF_EXPERIMENT = ("metrics", "a metric of the experiment")
SEARCHED = ("searched", "the searched variable")
CAPACITY_X = ("capacity_x", "a config field, params or bits")
AT_LAST_EVALUATION = ("evaluation", "a config field, lr, seed, step, time or a recorded metric")


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

    @property
    def finals(self) -> frozenset[str] | None:
        """The names of a relation's x: a run's and its final metrics."""
        return None if self.run is None or self.metrics is None else self.run | {f"final_{m}" for m in self.metrics}

    @property
    def quantities(self) -> frozenset[str] | None:
        """The names of a relation's y: x's, a run's quantities, its fitted rates (rate_<metric> and
        rate_<metric>_r2) and, in a search sweep, its answer."""
        if self.finals is None:
            return None
        searched = {SEARCH_QUANTITY} if self.searched_sweep else set()
        rates = {f"rate_{m}{end}" for m in self.metrics for end in ("", "_r2")}
        return self.finals | RUN_QUANTITIES | rates | searched


# -- [report.trajectory] -------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Reference:
    """A horizontal line on trajectory.png."""

    y: Expression = key("its level: an expression of the config fields constant within a panel, and lr", uses=RUN)
    label: Text = key("legend (default: y)", "")
    color: Text = key("matplotlib colour", "0.3")
    style: Text = key("matplotlib line style", "--")

    def checked(self, given: dict, context: Context, path: str, problems: list[str]) -> Reference:
        return fill(self, label=str(self.y))


@dataclasses.dataclass(frozen=True)
class Stage:
    """A shaded x range of trajectory.png, in x units."""

    start: Number = key("where it starts", alias="from")
    end: Number = key("where it ends (> from)", alias="to")
    label: Text = key("its name", "")
    color: Text | None = key("matplotlib colour", None)

    def checked(self, given: dict, context: Context, path: str, problems: list[str]) -> Stage | None:
        if self.end > self.start:
            return fill(self, color=None)
        problems.append(f"{path}: to ({self.end:g}) must be larger than from ({self.start:g})")


@dataclasses.dataclass(frozen=True)
class Crossing:
    metric: str
    level: str | float
    direction: str  # "below" or "above"
    label: str
    after: str | None = None  # the label of a crossing each run must reach first
    judged: bool = False  # whether a verdict states that every run reaches it


@dataclasses.dataclass(frozen=True)
class CrossingTable:
    """The first evaluation at which a metric falls below (or rises above) a level, interpolated between steps."""

    metric: Text = key("the metric", names=METRIC)
    below: Expression | None = key("the level it falls to: an expression of the run's config, lr, seed", None, uses=RUN)
    above: Expression | None = key("or the level it rises to", None, uses=RUN)
    label: Text | None = key("its name (default: 'metric ≤ level')", None)
    after: Text | None = key("the label of another crossing each run must reach first (a stage order)", None)
    reached: Flag = key("state a verdict that every run reaches it (in order, with after)", False)

    def checked(self, given: dict, context: Context, path: str, problems: list[str]) -> Crossing | None:
        side = one_of({s: getattr(self, s) is not None for s in ("below", "above")}, path, problems)
        if side is None:
            return None
        level, sign = getattr(self, side), "≤" if side == "below" else "≥"
        label = self.label or f"{self.metric} {sign} {level}"
        return Crossing(self.metric, level, side, label, self.after, self.reached or self.after is not None)


@dataclasses.dataclass(frozen=True)
class Plateau:
    """The evaluations with |metric − near| ≤ tol: the first, the last, and how many in between."""

    metric: Text = key("the metric", names=METRIC)
    near: Expression = key("the plateau's level: an expression of the config, lr, seed", uses=RUN)
    tol: NonNegative = key("its half width")
    label: Text = key("its name (default: 'metric ≈ near')", "")

    def checked(self, given: dict, context: Context, path: str, problems: list[str]) -> Plateau:
        return fill(self, label=f"{self.metric} ≈ {self.near}")


@dataclasses.dataclass(frozen=True)
class Rate:
    """An asymptotic rate: per run, the least-squares slope of a metric over its last evaluations."""

    metric: Text = key("the metric", names=METRIC)
    scale: Literal["log", "loglog", "exp"] = key(
        "metric vs ln(step), ln(metric) vs ln(step), or ln(metric) vs step", "log"
    )
    decades: Positive = key("over the last this many decades of evaluations", 1.0)
    predicted: Expression | None = key(
        "the predicted slope: an expression of the config, lr, seed, step, time and metrics",
        None,
        uses=AT_LAST_EVALUATION,
    )
    tolerance: Positive = key("the fitted slope agrees when |fitted / predicted − 1| ≤ this", DEFAULT_TOLERANCE)
    label: Text = key("its name (default: the slope in words)", "")
    window: Pair | None = key("instead: the evaluations whose metric / its first value lies in (lo, hi]", None)
    where: Where = key("only the runs with these config values (a value or a list of values)", (), names=RUN)

    def checked(self, given: dict, context: Context, path: str, problems: list[str]) -> Rate:
        if self.window is not None and self.window[0] <= 0:
            problems.append(f"{path}.window: lo must be > 0 (a ratio to the first value), got {list(self.window)}")
        slope = {"log": f"d {self.metric} / d ln step", "loglog": f"d ln {self.metric} / d ln step"}
        return fill(self, label=slope.get(self.scale, f"d ln {self.metric} / d step"))


@dataclasses.dataclass(frozen=True)
class Trend:
    """A monotone trend: per run, the evaluations that move against the direction by more than tol × |value|."""

    metric: Text = key("the metric", names=METRIC)
    direction: Literal["increasing", "decreasing"] = key("the expected direction", "increasing")
    tol: NonNegative = key("relative slack", 1e-6)
    label: Text = key("its name (default: the metric)", "")
    where: Where = key("only the runs with these config values (a value or a list of values)", (), names=RUN)

    def checked(self, given: dict, context: Context, path: str, problems: list[str]) -> Trend:
        return fill(self, label=self.metric)


@dataclasses.dataclass(frozen=True)
class Escape:
    """The escape-time law: per crossing and group, a line of the crossing against an expression of the config."""

    x: Formula = key("the law's x: an expression of the run's config, lr, seed", uses=RUN)
    x_label: Text = key("its axis name (default: x)", "")
    y: Literal["step", "time"] | None = key("the crossing in steps or time (default: the trajectory's x)", None)
    group_by: Names | None = key("one law per combination (default: the trajectory's group_by)", None, names=RUN)
    tolerance: Positive = key("fitted / predicted agrees within this", DEFAULT_TOLERANCE)
    predicted: dict[str, Expression] = key(
        "crossing label = the predicted slope, an expression of a group's config", dict
    )


@dataclasses.dataclass(frozen=True)
class TrajectorySpec:
    """What trajectories.csv, trajectory.png and the Trajectories section of a sweep with record_trajectory show."""

    metrics: Names | None = key("metrics drawn (default: loss where recorded, else every metric)", None, names=METRIC)
    x: Literal["step", "time"] = key("'time' = step · lr", "step")
    x_scale: Literal["linear", "log"] = key("the x axis", "linear")
    y_scale: Literal["linear", "log"] = key("the y axis", "linear")
    x_label: Text | None = key("x axis name", None)
    y_label: Text | None = key("y axis name", None)
    title: Text | None = key("the plot's title", None)
    group_by: Names = key("config fields: one panel per distinct combination", (), names=RUN)
    color_by: Names | None = key("config fields told apart by colour (default: those that vary)", None, names=RUN)
    seeds: Literal["lines", "band"] = key("every run a line, or the mean and min–max band", "lines")
    references: tuple[Reference, ...] = key("horizontal lines", ())
    stages: tuple[Stage, ...] = key("shaded x ranges", ())
    crossings: tuple[CrossingTable, ...] = key("levels each run crosses: the step at which it does", ())
    plateaus: one_or_many(Plateau) = key("plateaus: a table or a list of tables", (), alias="plateau")
    escape: Escape | None = key("the escape-time law of the crossings", None)
    rates: tuple[Rate, ...] = key("asymptotic rates", ())
    trends: tuple[Trend, ...] = key("monotone trends", ())
    layout: Literal["group", "metric"] = key("one panel per group, or per metric (own y axes)", "group")
    log_y: Names = key("layout 'metric': metrics drawn on a log y axis", (), names=METRIC)

    def checked(self, given: dict, context: Context, path: str, problems: list[str]) -> TrajectorySpec:
        """The crossings' labels distinct; the escape law's crossings among them, its defaults the trajectory's."""
        labels = [x.label for x in self.crossings]
        if len(set(labels)) != len(labels):
            problems.append(f"{path}.crossings: labels must be distinct, got {labels}")
        for i, crossing in enumerate(self.crossings):
            if crossing.after is not None and crossing.after not in set(labels) - {crossing.label}:
                problems.append(f"{path}.crossings[{i}].after: no other crossing is labelled {crossing.after!r}")
        if self.escape is None:
            return self
        escape, at = self.escape, f"{path}.escape"
        if not labels:
            problems.append(f"{at}: needs report.trajectory.crossings to fit")
        for label, value in escape.predicted.items():
            if label in labels:
                problems += unknown_names(f"{at}.predicted.{label}", names_of(value), context.run, RUN[1])
            elif labels:
                problems.append(f"{at}.predicted.{label}: unknown key{hint(label, labels)}")
        predicted = {k: v for k, v in escape.predicted.items() if k in labels}
        group_by = self.group_by if escape.group_by is None else escape.group_by
        escape = dataclasses.replace(fill(escape, x_label=escape.x, y=self.x), group_by=group_by, predicted=predicted)
        return dataclasses.replace(self, escape=escape)


# -- [report.heatmap] ------------------------------------------------------------------------------------------
def _levels(value) -> tuple[float, ...]:
    ok = isinstance(value, list) and value and all(is_number(v) and 0 < v <= 1 for v in value)
    if not (ok and len(set(value)) == len(value)):
        raise ValueError()
    return tuple(sorted(float(v) for v in value))


Levels = plain(_levels, list[float], "a list of distinct numbers in (0, 1]")
Coordinate = Annotated[Pair | Expression, Words("a number, an expression or a range [lo, hi]")]


@dataclasses.dataclass(frozen=True)
class Line:
    """An overlay line: its points in plot units and its legend label."""

    x: tuple[float, ...]
    y: tuple[float, ...]
    label: str
    color: str = "red"
    style: str = "-"


@dataclasses.dataclass(frozen=True)
class LineTable:
    """An overlay line: one of x, y a range [lo, hi], the other a number or an expression in that variable."""

    x: Coordinate | None = key("a range [lo, hi], or an expression of y", None)
    y: Coordinate | None = key("a range [lo, hi], or an expression of x", None)
    label: Text | None = key("legend (default: the expression)", None)
    color: Text = key("matplotlib colour", "red")
    style: Text = key("matplotlib line style", "-")

    def checked(self, given: dict, context: Context, path: str, problems: list[str]) -> Line | None:
        """The line as plot points: the range axis sampled evenly, the other evaluated along it."""
        ranges = [axis for axis in ("x", "y") if isinstance(getattr(self, axis), tuple)]
        if len(ranges) != 1 or self.x is None or self.y is None:
            return problems.append(f"{path}: needs x and y, exactly one of x, y a range [lo, hi]")
        free = ranges[0]
        other = "y" if free == "x" else "x"
        span, level = getattr(self, free), getattr(self, other)
        unknown = unknown_names(f"{path}.{other}", names_of(level), frozenset({free}), f"the line's variable {free}")
        if unknown:
            return problems.extend(unknown)
        along = np.linspace(*span, LINE_POINTS)
        try:
            across = np.array([float(evaluate(level, {free: float(v)})) for v in along])
        except (ExpressionError, OverflowError, TypeError) as err:  # TypeError: a complex value
            return problems.append(f"{path}.{other}: {err}")
        xs, ys = (along, across) if free == "x" else (across, along)
        return Line(tuple(xs.tolist()), tuple(ys.tolist()), self.label or f"{other} = {level}", self.color, self.style)


@dataclasses.dataclass(frozen=True)
class HeatmapSpec:
    """heatmap.png and its table: per (x, y) cell the best learning rate's metric, the mean over seeds."""

    x: Formula = key("an expression of the config fields, e.g. 'd*d_h*H'", uses=CONFIG_FIELD)
    y: Formula = key("likewise, e.g. 'd*m'", uses=CONFIG_FIELD)
    x_label: Text = key("axis name (default: x)", "")
    y_label: Text = key("axis name (default: y)", "")
    metric: Text = key("the runs.csv column shown, e.g. 'final_exact_accuracy'", "max_metric")
    better: Literal["max", "min"] = key("how the best learning rate is chosen and the threshold read", "max")
    threshold: Number = key("success (default: the success rule's threshold, else 0.99)", DEFAULT_THRESHOLD)
    vmin: Number | None = key("colour range (default: the data's)", None)
    vmax: Number | None = key("colour range (default: the data's)", None)
    annotate: Flag | None = key("write each cell's value (default: up to 20 x 20 cells)", None)
    lines: tuple[LineTable, ...] = key("overlay lines", ())
    levels: Levels = key("a phase diagram: per x the smallest y whose success rate reaches each level", ())
    shade: Literal["metric", "success_rate"] = key("what colours the cells", "metric")

    def reaches(self, values) -> np.ndarray:
        """Whether each value reaches the threshold (NaN never does)."""
        v = np.asarray(values, dtype=float)
        with np.errstate(invalid="ignore"):
            return np.where(np.isnan(v), False, v >= self.threshold if self.better == "max" else v <= self.threshold)

    def checked(self, given: dict, context: Context, path: str, problems: list[str]) -> HeatmapSpec:
        threshold = context.early_stop if context.early_stop is not None else DEFAULT_THRESHOLD
        spec = fill(self, x_label=self.x, y_label=self.y)
        return spec if "threshold" in given else dataclasses.replace(spec, threshold=threshold)


# -- [report] --------------------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Guide:
    """The authors' law on the capacity plot."""

    expr: Formula = key("x as an expression in the searched variable, e.g. '0.7*N*log(N)'", uses=SEARCHED)
    label: Text = key("legend (default: expr)", "")

    def checked(self, given: dict, context: Context, path: str, problems: list[str]) -> Guide:
        return fill(self, label=self.expr)


def _or_expression(schema: dict) -> None:
    schema["anyOf"] = [{"type": "string"}, *schema.pop("anyOf", [])]


GuideOrExpression = Annotated[
    Guide | None,
    BeforeValidator(lambda value: {"expr": value} if isinstance(value, str) else value),
    Field(json_schema_extra=_or_expression),
]


@dataclasses.dataclass(frozen=True)
class LinearFit:
    """y = a + b·x by least squares over the grid points of a search sweep."""

    x: Formula = key("an expression of a point's config (params and bits too)", uses=CAPACITY_X)
    y: Formula | None = key(
        "an expression of the searched variable and the config (default: the variable)", None, uses=CAPACITY_X
    )
    x_label: Text = key("axis name (default: x)", "")
    y_label: Text | None = key("axis name (default: y)", None)
    expect_slope: Bounds | None = key("[lo, hi]: b's 95 % interval inside PASSes ([0, inf]: b > 0)", None)
    min_r2: Number | None = key("and R² at least this, against y = a + b·x^p with a free p too", None)
    group_by: Names = key("one fit per combination (default: one over every point)", (), names=CONFIG_FIELD)

    def checked(self, given: dict, context: Context, path: str, problems: list[str]) -> LinearFit:
        return fill(self, x_label=self.x, y_label=self.y)


@dataclasses.dataclass(frozen=True)
class Ratio:
    """A per-point column of the capacity table: an expression of the searched variable and the config."""

    expr: Formula = key("e.g. 'n / n_cnt': its median and min–max over the answered searches", uses=CAPACITY_X)
    label: Text = key("column name (default: expr)", "")
    expect: Pair | None = key("[lo, hi] every median should lie in", None)

    def checked(self, given: dict, context: Context, path: str, problems: list[str]) -> Ratio:
        return fill(self, label=self.expr)


@dataclasses.dataclass(frozen=True)
class SuccessMap:
    """The probes of a search sweep on (x, searched variable), one panel per group (success_map.png)."""

    x: Formula | None = key("an expression of the config (default: the [report] x)", None, uses=CONFIG_FIELD)
    x_label: Text | None = key("axis name", None)
    group_by: Names | None = key("one panel per combination (default: the [report] group_by)", None, names=CONFIG_FIELD)
    y_scale: Literal["log", "linear"] = key("the searched variable's axis", "log")


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
class ReadoffTable:
    """Per run, the smallest test-time x from which a metric stays at most (at least) a level at every larger x."""

    metric: Text = key("the metric", names=OF_EXPERIMENT)
    at_most: Number | None = key("the level it stays at most (give one of at_most, at_least)", None)
    at_least: Number | None = key("or at least", None)
    against: Text | None = key(
        "a config field or another test-time axis: medians per value, and a slope", None, names=CONFIG_FIELD
    )
    label: Text | None = key("its name", None)
    expect_slope: Pair | None = key("[lo, hi] for the slope of ln(median) against ln(against)", None)

    def checked(self, given: dict, context: Context, path: str, problems: list[str]) -> Readoff | None:
        side = one_of({s: getattr(self, s) is not None for s in ("at_most", "at_least")}, path, problems)
        if side is None:
            return None
        level, sign = getattr(self, side), "≤" if side == "at_most" else "≥"
        label = self.label or f"smallest x with {self.metric} {sign} {level:g} from there on"
        return Readoff(self.metric, side == "at_most", level, self.against, label, self.expect_slope)


@dataclasses.dataclass(frozen=True)
class Comparison:
    """A claim that one test-time quantity lies below (or above) another, or a number, per setting."""

    metric: str  # an expression of a final_eval row's columns
    other: str | float  # the same, or a number
    below: bool
    at: str  # "largest" or "smallest": the test-time x it is judged at
    where: tuple
    label: str


@dataclasses.dataclass(frozen=True)
class CompareTable:
    """Per setting, at the largest (smallest) test-time x: a quantity below (above) another or a number."""

    metric: Formula = key("an expression of a final_eval row's columns (metrics, untrained_<metric>)")
    below: Expression | None = key("the number or expression it lies below", None)
    above: Expression | None = key("or the one it lies above", None)
    at: Literal["largest", "smallest"] = key("the test-time x it is judged at", "largest")
    where: Where = key("only the rows with these values of the config and test-time axes", (), names=RUN)
    label: Text | None = key("its name (default: 'metric < other')", None)

    def checked(self, given: dict, context: Context, path: str, problems: list[str]) -> Comparison | None:
        side = one_of({s: getattr(self, s) is not None for s in ("below", "above")}, path, problems)
        if side is None:
            return None
        other = getattr(self, side)
        label = self.label or f"{self.metric} {'<' if side == 'below' else '>'} {other}"
        return Comparison(self.metric, other, side == "below", self.at, self.where, label)


@dataclasses.dataclass(frozen=True)
class FinalEvalSpec:
    """What final_eval.png and the test-time section show (sweeps with test-time axes, [final_eval])."""

    x: Text | None = key("the test-time axis on x (default: the first)", None, names=CONFIG_FIELD)
    metrics: Names = key("the metrics drawn (default: every one)", (), names=OF_EXPERIMENT)
    readoffs: one_or_many(ReadoffTable) = key("read-offs: a table or a list", (), alias="readoff")
    lowered: Names = key(
        "metrics training is claimed to lower: compare metric below untrained_<metric> at the largest x",
        (),
        names=OF_EXPERIMENT,
    )
    compares: one_or_many(CompareTable) = key("comparisons: a table or a list", (), alias="compare")

    @property
    def comparisons(self) -> tuple[Comparison, ...]:
        """`lowered` as comparisons (metric below untrained_<metric>), then `compare`."""
        lowered = tuple(
            Comparison(m, f"untrained_{m}", True, "largest", (), f"lowered by training: {m}") for m in self.lowered
        )
        return lowered + tuple(self.compares)


@dataclasses.dataclass(frozen=True)
class ReportSpec:
    """report.md, its tables and plots: the capacity plot's axes and laws, and the verdicts checked."""

    title: Text | None = key("the report's title", None)
    x: Text = key("the capacity plot's x: a config field, 'params' or 'bits'", "params", names=CAPACITY_X)
    x_label: Text | None = key("its axis name (default: x)", None)
    fit: Formula | None = key("an expression of the searched variable fitted as a power law of x", None, uses=SEARCHED)
    guide: GuideOrExpression = key(
        "the authors' law: x as an expression of the searched variable, or {expr, label}", None
    )
    group_by: Names = key("config fields: one capacity curve per distinct combination", (), names=CONFIG_FIELD)
    expect_slope: Pair | None = key("[lo, hi]: the fitted slope's 95 % interval inside PASSes", None)
    collapse: Flag = key("how well the groups collapse onto the common law", False)
    references: Flag = key("sampled instances re-solved on the host", False)
    fit_linear: one_or_many(LinearFit) = key("searches: lines y = a + b·x over the grid points", ())
    ratios: one_or_many(Ratio) = key("searches: columns of the capacity table", (), alias="ratio")
    success_map: SuccessMap | None = key("searches: every probe on (x, searched variable)", None)
    heatmap: HeatmapSpec | None = key("grid sweeps: a metric over two expressions of the config", None)
    trajectory: TrajectorySpec = key("sweeps with record_trajectory: curves and stages", TrajectorySpec)
    final_eval: FinalEvalSpec = key("sweeps with test-time axes", FinalEvalSpec)
    relations: one_or_many(Relation) = key("a per-run quantity against the config", (), alias="relation")
    agreements: one_or_many(Agreement) = key("runs that differ in one field agree", (), alias="agreement")
    search_answer: Literal["bracket", "stable"] = key(
        "a non-monotone search's answer: its bracket's, or the rule's ('stable')", "bracket"
    )
    search_goal: SkipJsonSchema[str] = "largest"  # [search] goal, not a key: the capacity section's words

    def checked(self, given: dict, context: Context, path: str, problems: list[str]) -> ReportSpec:
        if context.searched_sweep is False:
            problems += [f"{path}.{k}: needs a [search]" for k in SEARCHED_ONLY if k in given]
        return dataclasses.replace(self, search_goal=context.goal)


SEARCHED_ONLY = ("fit_linear", "ratio", "success_map", "search_answer")


def read_report(value: Any, problems: list[str], context: Context = Context()) -> ReportSpec:
    """The `[report]` table and its sub-tables (pass {} when there is none), every name checked against `context`
    and the defaults that follow from it filled in."""
    return read(ReportSpec, value, "report", problems, set(), context) or ReportSpec().checked({}, context, "", [])
