"""The `[report]` table of a sweep spec and its sub-tables `[report.heatmap]` and `[report.trajectory]`:
typed, frozen, and checked when the spec is parsed (jaxmem.spec.sweep.parse), before anything compiles.
Every key is checked (an unknown one is named with its dotted path and the closest valid key), and so
is every expression: it must parse, and use only the names the report will bind when it evaluates it.

[report] (every key optional):

    title       the report's title
    x           the capacity plot's x: a config field, "params" (default) or "bits"
    x_label     its axis name (default: x)
    fit         an expression in the searched variable, fitted as a power law of x (default: the variable)
    guide       the authors' law on the capacity plot, x as an expression in the searched variable:
                "0.7*N*log(N)" or {expr = "0.7*N*log(N)", label = "md = 0.35·N ln N"}
    group_by    config fields: one capacity curve per distinct combination
    expect_slope  [lo, hi]: the fitted slope's verdict (jaxmem.report.verdicts): PASS when its 95 % interval
                lies inside, FAIL when outside, INCONCLUSIVE across an edge or with fewer than 3 distinct x
    search_answer  searches: "bracket" (default) the answer each search's bracket found; "stable" for a
                non-monotone search (a probe succeeded beyond one that failed) the rule's own definition,
                read off its probes: with goal "smallest" the smallest probed value from which every larger
                one succeeds (jaxmem.report.capacity.stable); every table, fit and relation uses it
    collapse    true: how well the groups collapse onto the common law
    references  true: sampled instances re-solved on the host (jaxmem.report.checks.references)
    fit_linear  searches: least-squares lines y = a + b·x over the grid points, beside the power law; a table
                or a list of tables {x, y, x_label, y_label, group_by, expect_slope, min_r2}: x an expression
                of a point's config (params and bits too), y one of the searched variable and the config
                (default: the variable), one fit per group_by combination (default: one over every point);
                e.g. {x = "2*m_T*d/k", y = "n", expect_slope = [2, 4], min_r2 = 0.9}; expect_slope may be open
                ([0, inf]: b > 0) and is judged as the one above, R² ≥ min_r2 also against y = a + b·x^p with a
                free exponent p (jaxmem.report.verdicts: INCONCLUSIVE where x cannot tell the line from p = 0, 2)
    ratio       searches: a column of the capacity table, per point the median and min–max over the answered
                searches of an expression of the searched variable and the config; a table or a list of
                tables {expr, label, expect}, e.g. {expr = "n / n_cnt", label = "n*/n_cnt", expect = [2, 4]}
    success_map searches: every probe of every search on (x, searched variable), its success rate over the
                seeds that probed it, the per-seed answers on top (success_map.png, success_map.csv and a
                table); {x, x_label, group_by, y_scale}: x an expression of the config (default: the
                [report] x), one panel per group_by combination (default: [report] group_by), y_scale "log"
                (default) or "linear". Off unless the table is given.
    agreement   any sweep: the largest differences between the final metrics of runs that differ only in one
                config field, per metric, with an rtol verdict; a table or a list of tables, see
                jaxmem.spec.report_agreement
    relation    any sweep: a per-run quantity (or a search's answer) against an expression of the config,
                with medians per x, a linear or power fit, Spearman ρ and a U-shape check; a table or a list
                of tables, see jaxmem.spec.report_relations
    heatmap, trajectory, final_eval   the tables below

[report.final_eval] (sweeps with test-time axes, `[final_eval]`; every key optional):

    x           the test-time axis on the x of final_eval.png and read off (default: the first axis)
    metrics     the metrics drawn (default: every metric of the experiment)
    readoff     read-offs, a table or a list of tables {metric, at_most | at_least, against, label,
                expect_slope}: per run (and per value of the other test-time axes) the smallest x from
                which the metric stays at most (at least) the level at every larger listed x (inf when it
                never does); per value of `against` (a config field or another test-time axis) the median
                and min–max over seeds, and the slope of ln(median) against ln(against) over the finite
                medians, checked against expect_slope [lo, hi] when given (final_eval_readoff.csv)

[report.heatmap] (grid sweeps; all but x and y optional):

    x, y        expressions over config fields (jaxmem.spec.expr), e.g. x = "d*d_h*H", y = "d*m"
    x_label, y_label   axis names in the plot and report.md (default: the expressions)
    metric      the run column shown (default "max_metric", the best value of the train metric;
                any runs.csv column works, e.g. "final_exact_accuracy")
    better      "max" or "min": how the best learning rate is chosen and the threshold read (default: the
                [success] rule's direction when the metric is the judged one, else "max")
    threshold   the value counted as success (default: the [success] rule's threshold, else 0.99)
    vmin, vmax  colour range (default: the data's range)
    annotate    write each cell's value in the plot (default: when the grid has at most 20 x 20 cells)
    lines       overlay lines, a list of tables {x, y, label, color, style}: one of x, y is a range
                [lo, hi] and the other a number or an expression in that variable, e.g.
                {x = [1280, 4700], y = "2300 - x/2"} or {x = 1280, y = [1660, 4300]}
    levels      a phase diagram: success-rate levels in (0, 1], e.g. [0.5, 0.9]; per x the smallest y whose
                success rate over seeds reaches each level (and y interpolated linearly where the rate
                crosses it), as a table, a success-rate matrix and staircases on heatmap.png (default: none)
    shade       what colours heatmap.png: "metric" (default) or "success_rate" (the seeds at threshold over
                the seeds, 0 to 1)

Each cell is one (x, y) value: per (grid point, seed) the best learning rate's metric, then the mean
over seeds (and over grid points that share the cell). `n_success` counts the seeds at threshold and
`success_rate` is n_success / seeds.

[report.trajectory] (sweeps with `[engine] record_trajectory = true`; every key optional):

A sweep run with `[engine] record_trajectory = true` stores every run's metrics at every evaluation
(table `trajectories`). Its report then holds trajectories.csv, trajectory.png and a "Trajectories"
section, with or without this table; the table chooses what they show and adds stage detection
(crossings, plateaus) and the escape-time law.

    metrics     metrics drawn, e.g. ["loss", "relation_loss", "subject_loss"] (default ["loss"] when
                recorded, else every recorded metric)
    x           "step" (default) or "time" = step · lr: for `[train] integrator = "gradient_flow"` one
                step is lr units of ODE time; for SGD it is the usual lr-scaled time
    x_scale     "linear" (default) or "log"; a log axis leaves out evaluations at x ≤ 0
    y_scale     "linear" (default) or "log"
    x_label, y_label, title
    layout      "group" (default): one panel per group_by combination, the metrics in it by line style;
                "metric": one panel per metric (per group too, if any), each with its own y axis
    log_y       with layout "metric": the metrics drawn on a log y axis, e.g. ["loss_gap"]
    group_by    config fields: one panel per distinct combination (default: one panel)
    color_by    config fields told apart by colour inside a panel (default: the config fields, and lr,
                that vary across the sweep and are not in group_by)
    seeds       "lines" (default): every run is a thin line; "band": the mean over the runs of a colour
                at each evaluated step, shaded between their min and max
    references  horizontal lines, [{y = "log(32)", label = "ln |A|", color = "0.3", style = "--"}]; y is
                an expression (jaxmem.spec.expr: log, sqrt, ...) over the config fields constant within the
                panel, and lr
    stages      shaded x ranges in x units, [{from = 0, to = 1800, label = "Stage 1: Init", color}]
    crossings   [{metric = "relation_loss", below = "log(4)/2", label = "relation learned"}, ...] (or
                `above = ...` for a rising metric); the level is an expression over the run's config
                fields, lr and seed
    plateau     {metric = "loss", near = "log(8)", tol = 0.1, label} or a list of such tables
    escape      {x = "log(1/init_scale)", x_label = "ln(1/α)", y = "step" | "time" (default: x above),
                group_by = [...] (default: group_by above), tolerance = 0.1,
                predicted = {"relation learned" = "1/(0.1*0.07655)", ...}}: keys of `predicted` are
                crossing labels, values expressions over the config fields constant within a group

    rates       asymptotic rates, [{metric = "w_norm", scale = "log", decades = 1, predicted = "wmm_norm",
                tolerance = 0.1, label = "d‖W‖/d ln t"}]: per run, the least-squares slope of the metric
                against ln(step) (scale "log"), of ln(metric) against ln(step) ("loglog": the power
                law exponent) or of ln(metric) against step ("exp": ln v of a linear rate metric ∝ v^step)
                over the last `decades` decades of evaluations, or with `window = [lo, hi]` over the
                evaluations whose metric / its first value lies in (lo, hi]; `predicted` is an
                expression over the run's config fields, lr, seed and its metrics at the last evaluation
    trends      monotone trends, [{metric = "cos_mm", direction = "increasing", tol = 1e-6, label}]: per
                run, the evaluations that move against `direction` by more than tol × |value|

Files: trajectories.csv (wide: run_id, step, time, status, point, seed, lr, the config fields, one
column per metric), trajectory.png, and with crossings or a plateau stages.csv (one row per run: every
crossing's level, step and time; every plateau's first, last and length in steps and time), with an
escape law escape.png. Runs still in flight have status "running" (their config from the sweep's plan).

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

Rules (jaxmem.report.trajectory.stages, jaxmem.report.trajectory.escape):

- Crossing: the first evaluation at which the metric is ≤ the level (≥ for `above`); its step is
  interpolated linearly between that evaluation and the one before it (whose value was on the other
  side), so it lies in (previous step, step]. A run whose first evaluation is already past the level
  crosses there. NaN evaluations (diverged runs) are skipped; a run that never crosses gives NaN
  ("not yet" while it still runs). Time = step · lr.
- Plateau: the first and the last evaluated step with |metric − near| ≤ tol, their distance (the
  length), and how many of the evaluations between them are in the band (a contiguous plateau has
  all of them).
- Escape-time law: per crossing and group, a least-squares line of the crossing (in `escape.y`
  units) against the `escape.x` expression of each run's config, over the runs that crossed; the
  slope's standard error is from the residuals (n ≥ 3). The ratio fitted / predicted is within
  tolerance when |ratio − 1| ≤ `tolerance`.

The tables are read with jaxmem.spec.tables.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np

from jaxmem.spec.expr import ExpressionError, evaluate
from jaxmem.spec.report_agreement import AGREEMENT_KEYS, Agreement, read_agreement
from jaxmem.spec.report_relations import RELATION_KEYS, Relation, read_relation
from jaxmem.spec.tables import (
    METRIC,
    Table,
    bounds,
    choice,
    expect,
    expression,
    field_names,
    flag,
    formula,
    is_number,
    names_of,
    non_negative,
    number,
    pair,
    positive,
    text,
)

DEFAULT_THRESHOLD = 0.99
DEFAULT_TOLERANCE = 0.1
LINE_POINTS = 100

REPORT_KEYS = ("title", "x", "x_label", "fit", "guide", "group_by", "expect_slope", "collapse", "references")
REPORT_KEYS += ("fit_linear", "ratio", "success_map", "heatmap", "trajectory", "final_eval", "relation", "agreement")
REPORT_KEYS += ("search_answer",)
FINAL_EVAL_KEYS = ("x", "metrics", "readoff")
READOFF_KEYS = ("metric", "at_most", "at_least", "against", "label", "expect_slope")
GUIDE_KEYS = ("expr", "label")
LINEAR_KEYS = ("x", "y", "x_label", "y_label", "group_by", "expect_slope", "min_r2")
RATIO_KEYS = ("expr", "label", "expect")
SUCCESS_MAP_KEYS = ("x", "x_label", "group_by", "y_scale")
HEATMAP_KEYS = ("x", "y", "x_label", "y_label", "metric", "better", "threshold", "vmin", "vmax", "annotate", "lines")
HEATMAP_KEYS += ("levels", "shade")
LINE_KEYS = ("x", "y", "label", "color", "style")
TRAJECTORY_KEYS = ("metrics", "x", "x_scale", "y_scale", "x_label", "y_label", "title", "layout", "log_y")
TRAJECTORY_KEYS += ("group_by", "color_by", "seeds", "references", "stages", "crossings", "plateau", "escape")
TRAJECTORY_KEYS += ("rates", "trends")
REFERENCE_KEYS = ("y", "label", "color", "style")
STAGE_KEYS = ("from", "to", "label", "color")
CROSSING_KEYS = ("metric", "below", "above", "label")
PLATEAU_KEYS = ("metric", "near", "tol", "label")
ESCAPE_KEYS = ("x", "x_label", "y", "group_by", "tolerance", "predicted")
RATE_KEYS = ("metric", "scale", "decades", "window", "predicted", "tolerance", "label")
TREND_KEYS = ("metric", "direction", "tol", "label")

# What a name must be, in messages.
CONFIG = "a config field"
RUN = "a config field, lr or seed"
SEARCHED = "the searched variable"
CAPACITY_X = "a config field, params or bits"
AT_LAST_EVALUATION = "a config field, lr, seed, step, time or a recorded metric"


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


def _all(read: Callable, tables: list[Table], context: Context) -> tuple:
    """Every table read by `read`, the bad ones (None) left out."""
    return tuple(item for item in (read(t, context) for t in tables) if item is not None)


# -- [report.trajectory] -------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Reference:
    y: str | float
    label: str
    color: str = "0.3"
    style: str = "--"


@dataclasses.dataclass(frozen=True)
class Stage:
    start: float
    end: float
    label: str
    color: str | None = None


@dataclasses.dataclass(frozen=True)
class Crossing:
    metric: str
    level: str | float
    direction: str  # "below" or "above"
    label: str


@dataclasses.dataclass(frozen=True)
class Plateau:
    metric: str
    near: str | float
    tol: float
    label: str


@dataclasses.dataclass(frozen=True)
class Rate:
    metric: str
    scale: str  # "log": metric vs ln(step); "loglog": ln(metric) vs ln(step); "exp": ln(metric) vs step
    decades: float
    predicted: str | float | None
    tolerance: float
    label: str
    window: tuple[float, float] | None = None  # the evaluations with metric / its first value in (lo, hi]


@dataclasses.dataclass(frozen=True)
class Trend:
    metric: str
    direction: str  # "increasing" or "decreasing"
    tol: float
    label: str


@dataclasses.dataclass(frozen=True)
class Escape:
    x: str
    x_label: str
    y: str  # "step" or "time"
    group_by: tuple[str, ...]
    tolerance: float
    predicted: dict  # crossing label -> expression


@dataclasses.dataclass(frozen=True)
class TrajectorySpec:
    metrics: tuple[str, ...] | None = None
    x: str = "step"
    x_scale: str = "linear"
    y_scale: str = "linear"
    x_label: str | None = None
    y_label: str | None = None
    title: str | None = None
    group_by: tuple[str, ...] = ()
    color_by: tuple[str, ...] | None = None
    seeds: str = "lines"
    references: tuple[Reference, ...] = ()
    stages: tuple[Stage, ...] = ()
    crossings: tuple[Crossing, ...] = ()
    plateaus: tuple[Plateau, ...] = ()
    escape: Escape | None = None
    rates: tuple[Rate, ...] = ()
    trends: tuple[Trend, ...] = ()
    layout: str = "group"
    log_y: tuple[str, ...] = ()


def read_trajectory(value, problems: list[str], context: Context) -> TrajectorySpec:
    """The `[report.trajectory]` table (pass {} when there is none)."""
    t = Table("report.trajectory", value, TRAJECTORY_KEYS, problems)
    x = t.get("x", choice("step", "time"), "step")
    group_by, color_by = t.get("group_by", field_names, ()), t.get("color_by", field_names)
    metrics, log_y = t.get("metrics", field_names), t.get("log_y", field_names, ())
    t.check("group_by", group_by, context.run, RUN)
    t.check("color_by", color_by or (), context.run, RUN)
    t.check("metrics", metrics or (), context.metrics, METRIC)
    t.check("log_y", log_y, context.metrics, METRIC)
    crossings = _all(_crossing, t.tables("crossings", CROSSING_KEYS), context)
    labels = [c.label for c in crossings]
    if len(set(labels)) != len(labels):
        problems.append(f"report.trajectory.crossings: labels must be distinct, got {labels}")
    return TrajectorySpec(
        metrics=metrics,
        x=x,
        x_scale=t.get("x_scale", choice("linear", "log"), "linear"),
        y_scale=t.get("y_scale", choice("linear", "log"), "linear"),
        x_label=t.get("x_label", text),
        y_label=t.get("y_label", text),
        title=t.get("title", text),
        group_by=group_by,
        color_by=color_by,
        seeds=t.get("seeds", choice("lines", "band"), "lines"),
        references=_all(_reference, t.tables("references", REFERENCE_KEYS), context),
        stages=_all(_stage, t.tables("stages", STAGE_KEYS), context),
        crossings=crossings,
        plateaus=_all(_plateau, t.tables("plateau", PLATEAU_KEYS, single=True), context),
        escape=_escape(t, x, group_by, labels, context) if "escape" in t.data else None,
        rates=_all(_rate, t.tables("rates", RATE_KEYS), context),
        trends=_all(_trend, t.tables("trends", TREND_KEYS), context),
        layout=t.get("layout", choice("group", "metric"), "group"),
        log_y=log_y,
    )


def _reference(t: Table, context: Context) -> Reference | None:
    y = t.need("y", expression)
    t.check("y", names_of(y), context.run, RUN)
    label, color, style = t.get("label", text), t.get("color", text, "0.3"), t.get("style", text, "--")
    return None if y is None else Reference(y=y, label=label or str(y), color=color, style=style)


def _stage(t: Table, context: Context) -> Stage | None:
    start, end = t.need("from", number), t.need("to", number)
    label, color = t.get("label", text, ""), t.get("color", text)
    if start is None or end is None:
        return None
    if not end > start:
        t.problems.append(f"{t.path}: to ({end:g}) must be larger than from ({start:g})")
        return None
    return Stage(start=start, end=end, label=label, color=color or None)


def _crossing(t: Table, context: Context) -> Crossing | None:
    metric, label = t.metric(context.metrics), t.get("label", text)
    sides = [k for k in ("below", "above") if k in t.data]
    if len(sides) != 1:
        t.problems.append(f"{t.path}: needs exactly one of below, above")
        return None
    side = sides[0]
    level = t.get(side, expression)
    t.check(side, names_of(level), context.run, RUN)
    if metric is None or level is None:
        return None
    sign = "≤" if side == "below" else "≥"
    return Crossing(metric=metric, level=level, direction=side, label=label or f"{metric} {sign} {level}")


def _plateau(t: Table, context: Context) -> Plateau | None:
    metric, near, tol = t.metric(context.metrics), t.need("near", expression), t.need("tol", non_negative)
    t.check("near", names_of(near), context.run, RUN)
    label = t.get("label", text)
    if None in (metric, near, tol):
        return None
    return Plateau(metric=metric, near=near, tol=tol, label=label or f"{metric} ≈ {near}")


def _rate(t: Table, context: Context) -> Rate | None:
    metric, scale = t.metric(context.metrics), t.get("scale", choice("log", "loglog", "exp"), "log")
    predicted = t.get("predicted", expression)
    t.check("predicted", names_of(predicted), context.evaluation, AT_LAST_EVALUATION)
    decades, tolerance = t.get("decades", positive, 1.0), t.get("tolerance", positive, DEFAULT_TOLERANCE)
    window = _bounds(t, "window")
    if window is not None and window[0] <= 0:
        t.problems.append(f"{t.path}.window: lo must be > 0 (a ratio to the first value), got {list(window)}")
    label = t.get("label", text)
    if metric is None:
        return None
    slope = {"log": f"d {metric} / d ln step", "loglog": f"d ln {metric} / d ln step"}.get(
        scale, f"d ln {metric} / d step"
    )
    return Rate(metric, scale, decades, predicted, tolerance, label or slope, window)


def _trend(t: Table, context: Context) -> Trend | None:
    metric = t.metric(context.metrics)
    direction = t.get("direction", choice("increasing", "decreasing"), "increasing")
    tol, label = t.get("tol", non_negative, 1e-6), t.get("label", text)
    return None if metric is None else Trend(metric, direction, tol, label or metric)


def _escape(parent: Table, x: str, group_by: tuple[str, ...], labels: list[str], context: Context) -> Escape | None:
    t = Table(f"{parent.path}.escape", parent.data["escape"], ESCAPE_KEYS, parent.problems)
    fitted_x = t.need("x", formula)
    t.check("x", names_of(fitted_x), context.run, RUN)
    escape_group_by = t.get("group_by", field_names, group_by)
    t.check("group_by", escape_group_by, context.run, RUN)
    if not labels:
        t.problems.append(f"{t.path}: needs report.trajectory.crossings to fit")
    p = Table(f"{t.path}.predicted", t.data.get("predicted", {}) if labels else {}, labels, t.problems)
    predicted = {label: p.get(label, expression) for label in labels if label in p.data}
    for label, value in predicted.items():
        p.check(label, names_of(value), context.run, RUN)
    y = t.get("y", choice(x, "time" if x == "step" else "step"), x)
    tolerance, x_label = t.get("tolerance", positive, DEFAULT_TOLERANCE), t.get("x_label", text)
    if fitted_x is None or None in predicted.values():
        return None
    return Escape(fitted_x, x_label or fitted_x, y, escape_group_by, tolerance, predicted)


# -- [report.heatmap] ----------------------------------------------------------------------------------
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
    x: str
    y: str
    x_label: str
    y_label: str
    metric: str = "max_metric"
    better: str = "max"
    threshold: float = DEFAULT_THRESHOLD
    vmin: float | None = None
    vmax: float | None = None
    annotate: bool | None = None
    lines: tuple[Line, ...] = ()
    levels: tuple[float, ...] = ()
    shade: str = "metric"

    def reaches(self, values) -> np.ndarray:
        """Whether each value reaches the threshold (NaN never does)."""
        v = np.asarray(values, dtype=float)
        with np.errstate(invalid="ignore"):
            return np.where(np.isnan(v), False, v >= self.threshold if self.better == "max" else v <= self.threshold)


def read_heatmap(value, problems: list[str], context: Context) -> HeatmapSpec | None:
    """The `[report.heatmap]` table; None when it is bad."""
    t = Table("report.heatmap", value, HEATMAP_KEYS, problems)
    x, y = t.need("x", formula), t.need("y", formula)
    t.check("x", names_of(x), context.config, CONFIG)
    t.check("y", names_of(y), context.config, CONFIG)
    default_threshold = context.early_stop if context.early_stop is not None else DEFAULT_THRESHOLD
    options = dict(
        x_label=t.get("x_label", text, x),
        y_label=t.get("y_label", text, y),
        metric=t.get("metric", text, "max_metric"),
        better=t.get("better", choice("max", "min"), "max"),
        threshold=t.get("threshold", number, default_threshold),
        vmin=t.get("vmin", number),
        vmax=t.get("vmax", number),
        annotate=t.get("annotate", flag),
        lines=_all(_line, t.tables("lines", LINE_KEYS), context),
        levels=t.get("levels", rate_levels, ()),
        shade=t.get("shade", choice("metric", "success_rate"), "metric"),
    )
    return None if x is None or y is None else HeatmapSpec(x=x, y=y, **options)


def rate_levels(value) -> tuple[float, ...]:
    """Distinct success-rate levels in (0, 1], ascending."""
    ok = isinstance(value, list) and value and all(is_number(v) and 0 < v <= 1 for v in value)
    expect(ok and len(set(value)) == len(value), "a list of distinct numbers in (0, 1]", value)
    return tuple(sorted(float(v) for v in value))


def _line(t: Table, context: Context) -> Line | None:
    """One `lines` entry as plot points: the range axis sampled evenly, the other evaluated along it."""
    label, color, style = t.get("label", text), t.get("color", text, "red"), t.get("style", text, "-")
    ranges = [axis for axis in ("x", "y") if isinstance(t.data.get(axis), list)]
    if len(ranges) != 1 or not {"x", "y"} <= set(t.data):
        t.problems.append(f"{t.path}: needs x and y, exactly one of x, y a range [lo, hi]")
        return None
    free = ranges[0]
    other = "y" if free == "x" else "x"
    span, level = t.get(free, pair), t.get(other, expression)
    t.check(other, names_of(level), frozenset({free}), f"the line's variable {free}")
    if span is None or level is None or names_of(level) - {free}:
        return None
    along = np.linspace(*span, LINE_POINTS)
    try:
        across = np.array([float(evaluate(level, {free: float(v)})) for v in along])
    except (ExpressionError, OverflowError, TypeError) as err:  # TypeError: a complex value
        t.problems.append(f"{t.path}.{other}: {err}")
        return None
    xs, ys = (along, across) if free == "x" else (across, along)
    return Line(tuple(xs.tolist()), tuple(ys.tolist()), label or f"{other} = {level}", color, style)


# -- [report] ------------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Guide:
    expr: str  # x as an expression in the searched variable
    label: str


@dataclasses.dataclass(frozen=True)
class LinearFit:
    """y = a + b·x by least squares over the grid points of a search sweep."""

    x: str  # an expression of a point's config
    y: str | None  # an expression of the searched variable and the config; None: the variable
    x_label: str
    y_label: str | None
    expect_slope: tuple[float, float] | None = None
    min_r2: float | None = None
    group_by: tuple[str, ...] = ()  # one fit per combination; () pools every point


@dataclasses.dataclass(frozen=True)
class Ratio:
    """A per-point column of the capacity table: an expression of the searched variable and the config."""

    expr: str
    label: str
    expect: tuple[float, float] | None = None


@dataclasses.dataclass(frozen=True)
class SuccessMap:
    """The probes of a search sweep on (x, searched variable), one panel per group."""

    x: str | None  # an expression of the config; None: the [report] x
    x_label: str | None
    group_by: tuple[str, ...] | None  # None: the [report] group_by
    y_scale: str = "log"


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
    x: str | None = None  # None: the first test-time axis
    metrics: tuple[str, ...] = ()  # (): every metric
    readoffs: tuple[Readoff, ...] = ()


@dataclasses.dataclass(frozen=True)
class ReportSpec:
    title: str | None = None
    x: str = "params"
    x_label: str | None = None
    fit: str | None = None
    guide: Guide | None = None
    group_by: tuple[str, ...] = ()
    expect_slope: tuple[float, float] | None = None
    collapse: bool = False
    references: bool = False
    fit_linear: tuple[LinearFit, ...] = ()
    ratios: tuple[Ratio, ...] = ()
    success_map: SuccessMap | None = None
    heatmap: HeatmapSpec | None = None
    trajectory: TrajectorySpec = dataclasses.field(default_factory=TrajectorySpec)
    final_eval: FinalEvalSpec = dataclasses.field(default_factory=FinalEvalSpec)
    relations: tuple[Relation, ...] = ()
    agreements: tuple[Agreement, ...] = ()
    search_answer: str = "bracket"  # "stable": a non-monotone search by the rule's definition
    search_goal: str = "largest"  # not a key: [search] goal, for the capacity section's wording


def read_report(value, problems: list[str], context: Context = Context()) -> ReportSpec:
    """The `[report]` table and its sub-tables (pass {} when there is none)."""
    t = Table("report", value, REPORT_KEYS, problems)
    if context.searched_sweep is False:
        searched_only = ("fit_linear", "ratio", "success_map", "search_answer")
        t.problems += [f"report.{k}: needs a [search]" for k in searched_only if k in t.data]
    x, fit, group_by = t.get("x", text, "params"), t.get("fit", formula), t.get("group_by", field_names, ())
    t.check("x", [x], context.capacity_x, CAPACITY_X)
    t.check("fit", names_of(fit), context.searched, SEARCHED)
    t.check("group_by", group_by, context.config, CONFIG)
    expect_slope = t.get("expect_slope", pair)
    if expect_slope is not None and expect_slope[0] > expect_slope[1]:
        problems.append(f"report.expect_slope: lo must not exceed hi, got {list(expect_slope)}")
    return ReportSpec(
        title=t.get("title", text),
        x=x,
        x_label=t.get("x_label", text),
        fit=fit,
        guide=_guide(t, context) if "guide" in t.data else None,
        group_by=group_by,
        expect_slope=expect_slope,
        collapse=t.get("collapse", flag, False),
        references=t.get("references", flag, False),
        fit_linear=_all(_linear_fit, t.tables("fit_linear", LINEAR_KEYS, single=True), context),
        ratios=_all(_ratio, t.tables("ratio", RATIO_KEYS, single=True), context),
        success_map=_success_map(t, context) if "success_map" in t.data else None,
        heatmap=read_heatmap(t.data["heatmap"], problems, context) if "heatmap" in t.data else None,
        trajectory=read_trajectory(t.data.get("trajectory", {}), problems, context),
        final_eval=read_final_eval(t.data.get("final_eval", {}), problems, context),
        relations=_relations(t, context),
        agreements=_agreements(t, context),
        search_answer=t.get("search_answer", choice("bracket", "stable"), "bracket"),
        search_goal=context.goal,
    )


def _relations(parent: Table, context: Context) -> tuple[Relation, ...]:
    """`[[report.relation]]` (jaxmem.spec.report_relations)."""
    searched = bool(context.searched_sweep)
    tables = parent.tables("relation", RELATION_KEYS, single=True)
    return tuple(r for r in (read_relation(t, context.run, context.metrics, searched) for t in tables) if r is not None)


def _agreements(parent: Table, context: Context) -> tuple[Agreement, ...]:
    """`[[report.agreement]]` (jaxmem.spec.report_agreement)."""
    tables = parent.tables("agreement", AGREEMENT_KEYS, single=True)
    return tuple(a for a in (read_agreement(t, context.config, context.metrics) for t in tables) if a is not None)


def read_final_eval(value, problems: list[str], context: Context) -> FinalEvalSpec:
    """The `[report.final_eval]` table (pass {} when there is none)."""
    t = Table("report.final_eval", value, FINAL_EVAL_KEYS, problems)
    x, metrics = t.get("x", text), t.get("metrics", field_names, ())
    t.check("x", [x] if x else [], context.config, CONFIG)
    t.check("metrics", metrics, context.metrics, "a metric of the experiment")
    readoffs = _all(_readoff, t.tables("readoff", READOFF_KEYS, single=True), context)
    return FinalEvalSpec(x, metrics, readoffs)


def _readoff(t: Table, context: Context) -> Readoff | None:
    metric, against = t.need("metric", text), t.get("against", text)
    t.check("metric", [metric] if metric else [], context.metrics, "a metric of the experiment")
    t.check("against", [against] if against else [], context.config, CONFIG)
    sides = [k for k in ("at_most", "at_least") if k in t.data]
    if len(sides) != 1:
        t.problems.append(f"{t.path}: needs exactly one of at_most, at_least, got {sides or 'neither'}")
        return None
    level = t.get(sides[0], number)
    if metric is None or level is None:
        return None
    word = "≤" if sides[0] == "at_most" else "≥"
    label = t.get("label", text, f"smallest x with {metric} {word} {level:g} from there on")
    return Readoff(metric, sides[0] == "at_most", level, against, label, _bounds(t, "expect_slope"))


def _guide(parent: Table, context: Context) -> Guide | None:
    """`guide = "expr"` or `guide = {expr, label}`."""
    value = parent.data["guide"]
    t = Table("report.guide", {"expr": value} if isinstance(value, str) else value, GUIDE_KEYS, parent.problems)
    expr, label = t.need("expr", formula), t.get("label", text)
    t.check("expr", names_of(expr), context.searched, SEARCHED)
    return None if expr is None else Guide(expr, label or expr)


def _bounds(t: Table, key: str, kind: Callable = pair) -> tuple[float, float] | None:
    """An optional [lo, hi] with lo <= hi (`kind` bounds: either end may be open)."""
    value = t.get(key, kind)
    if value is not None and value[0] > value[1]:
        t.problems.append(f"{t.path}.{key}: lo must not exceed hi, got {list(value)}")
    return value


def _linear_fit(t: Table, context: Context) -> LinearFit | None:
    x, y = t.need("x", formula), t.get("y", formula)
    t.check("x", names_of(x), context.capacity_x, CAPACITY_X)
    t.check("y", names_of(y), context.capacity_x, CAPACITY_X)
    x_label, y_label = t.get("x_label", text, x), t.get("y_label", text, y)
    expect_slope, min_r2 = _bounds(t, "expect_slope", bounds), t.get("min_r2", number)
    group_by = t.get("group_by", field_names, ())
    t.check("group_by", group_by, context.config, CONFIG)
    return None if x is None else LinearFit(x, y, x_label, y_label, expect_slope, min_r2, group_by)


def _ratio(t: Table, context: Context) -> Ratio | None:
    expr, label = t.need("expr", formula), t.get("label", text)
    t.check("expr", names_of(expr), context.capacity_x, CAPACITY_X)
    expect_range = _bounds(t, "expect")
    return None if expr is None else Ratio(expr, label or expr, expect_range)


def _success_map(parent: Table, context: Context) -> SuccessMap | None:
    t = Table(f"{parent.path}.success_map", parent.data["success_map"], SUCCESS_MAP_KEYS, parent.problems)
    x, group_by = t.get("x", formula), t.get("group_by", field_names)
    t.check("x", names_of(x), context.config, CONFIG)
    t.check("group_by", group_by or (), context.config, CONFIG)
    y_scale = t.get("y_scale", choice("log", "linear"), "log")
    return SuccessMap(x, t.get("x_label", text), group_by, y_scale)
