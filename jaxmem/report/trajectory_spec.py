"""The `[report.trajectory]` table of a sweep spec: what the trajectory report draws and measures.

A sweep run with `[engine] record_trajectory = true` stores every run's metrics at every evaluation
(table `trajectories`). Its report then holds trajectories.csv, trajectory.png and a "Trajectories"
section, with or without this table; the table chooses what they show and adds stage detection
(crossings, plateaus) and the escape-time law. Every key is optional.

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
                an expression (jaxmem.expr: log, sqrt, ...) over the config fields constant within the
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
                against ln(step) (scale "log") or of ln(metric) against ln(step) ("loglog": the power
                law exponent) over the last `decades` decades of evaluations; `predicted` is an
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

Rules (jaxmem.report.stages, jaxmem.report.escape):

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
"""

from __future__ import annotations

import dataclasses

from jaxmem.spec.expr import names_in

KEYS = {
    "metrics",
    "x",
    "x_scale",
    "y_scale",
    "x_label",
    "y_label",
    "title",
    "group_by",
    "color_by",
    "seeds",
    "references",
    "stages",
    "crossings",
    "plateau",
    "escape",
    "layout",
    "log_y",
    "rates",
    "trends",
}
ESCAPE_KEYS = {"x", "x_label", "y", "group_by", "tolerance", "predicted"}
DEFAULT_TOLERANCE = 0.1


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
    scale: str  # "log": metric vs ln(step); "loglog": ln(metric) vs ln(step)
    decades: float
    predicted: str | float | None
    tolerance: float
    label: str


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

    def names(self) -> set[str]:
        """Every config name an expression of this spec refers to (rates may also name metrics)."""
        expressions = [r.y for r in self.references] + [c.level for c in self.crossings]
        expressions += [p.near for p in self.plateaus]
        if self.escape is not None:
            expressions += [self.escape.x, *self.escape.predicted.values()]
        return set().union(*(names_in(e) for e in expressions if isinstance(e, str)))


def trajectory_spec(report_spec: dict) -> TrajectorySpec:
    """The parsed `[report.trajectory]` table (defaults when there is none); ValueError on a bad one."""
    table = report_spec.get("trajectory", {})
    if not isinstance(table, dict):
        raise ValueError("report.trajectory must be a table")
    unknown = set(table) - KEYS
    if unknown:
        raise ValueError(f"report.trajectory: unknown keys {sorted(unknown)} (known: {sorted(KEYS)})")
    x = _choice(table, "x", ("step", "time"))
    crossings = tuple(_crossing(i, c) for i, c in enumerate(_list(table, "crossings")))
    labels = [c.label for c in crossings]
    if len(set(labels)) != len(labels):
        raise ValueError(f"report.trajectory.crossings: labels must be distinct, got {labels}")
    plateau = table.get("plateau", [])
    plateaus = tuple(_plateau(i, p) for i, p in enumerate(plateau if isinstance(plateau, list) else [plateau]))
    metrics = table.get("metrics")
    if isinstance(metrics, str):
        metrics = [metrics]
    spec = TrajectorySpec(
        metrics=tuple(str(m) for m in metrics) if metrics is not None else None,
        x=x,
        x_scale=_choice(table, "x_scale", ("linear", "log")),
        y_scale=_choice(table, "y_scale", ("linear", "log")),
        x_label=table.get("x_label"),
        y_label=table.get("y_label"),
        title=table.get("title"),
        group_by=_fields(table, "group_by") or (),
        color_by=_fields(table, "color_by"),
        seeds=_choice(table, "seeds", ("lines", "band")),
        references=tuple(_reference(i, r) for i, r in enumerate(_list(table, "references"))),
        stages=tuple(_stage(i, s) for i, s in enumerate(_list(table, "stages"))),
        crossings=crossings,
        plateaus=plateaus,
        escape=_escape(table.get("escape"), x, _fields(table, "group_by") or (), labels),
        layout=_choice(table, "layout", ("group", "metric")),
        log_y=_fields(table, "log_y") or (),
        rates=tuple(_rate(i, r) for i, r in enumerate(_list(table, "rates"))),
        trends=tuple(_trend(i, t) for i, t in enumerate(_list(table, "trends"))),
    )
    spec.names()  # parse every expression now, before any data is read
    return spec


def _list(table: dict, key: str) -> list:
    value = table.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        raise ValueError(f"report.trajectory.{key} must be a list of tables")
    return value


def _choice(table: dict, key: str, options: tuple[str, ...], where: str = "report.trajectory") -> str:
    value = table.get(key, options[0])
    if value not in options:
        raise ValueError(f"{where}.{key} must be one of {list(options)}, got {value!r}")
    return value


def _fields(table: dict, key: str) -> tuple[str, ...] | None:
    value = table.get(key)
    if value is None:
        return None
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"report.trajectory.{key} must be a list of config field names")
    return tuple(value)


def _expression(where: str, value) -> str | float:
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise ValueError(f"{where} must be a number or an expression string, got {value!r}")
    return value


def _reference(i: int, table: dict) -> Reference:
    where = f"report.trajectory.references[{i}]"
    if "y" not in table:
        raise ValueError(f"{where}: needs y")
    y = _expression(f"{where}.y", table["y"])
    return Reference(
        y=y, label=str(table.get("label", y)), color=str(table.get("color", "0.3")), style=str(table.get("style", "--"))
    )


def _stage(i: int, table: dict) -> Stage:
    where = f"report.trajectory.stages[{i}]"
    if "from" not in table or "to" not in table:
        raise ValueError(f"{where}: needs from and to")
    start, end = float(table["from"]), float(table["to"])
    if not end > start:
        raise ValueError(f"{where}: to ({end}) must be larger than from ({start})")
    color = table.get("color")
    return Stage(start=start, end=end, label=str(table.get("label", "")), color=str(color) if color else None)


def _crossing(i: int, table: dict) -> Crossing:
    where = f"report.trajectory.crossings[{i}]"
    sides = [k for k in ("below", "above") if k in table]
    if "metric" not in table or len(sides) != 1:
        raise ValueError(f"{where}: needs a metric and exactly one of below, above")
    level = _expression(f"{where}.{sides[0]}", table[sides[0]])
    sign = "≤" if sides[0] == "below" else "≥"
    label = str(table.get("label", f"{table['metric']} {sign} {level}"))
    return Crossing(metric=str(table["metric"]), level=level, direction=sides[0], label=label)


def _plateau(i: int, table) -> Plateau:
    where = f"report.trajectory.plateau[{i}]"
    if not isinstance(table, dict) or not {"metric", "near", "tol"} <= set(table):
        raise ValueError(f"{where}: needs metric, near and tol")
    tol = float(table["tol"])
    if not tol >= 0:
        raise ValueError(f"{where}.tol must be >= 0, got {tol}")
    near = _expression(f"{where}.near", table["near"])
    label = str(table.get("label", f"{table['metric']} ≈ {near}"))
    return Plateau(metric=str(table["metric"]), near=near, tol=tol, label=label)


def _rate(i: int, table: dict) -> Rate:
    where = f"report.trajectory.rates[{i}]"
    unknown = set(table) - {"metric", "scale", "decades", "predicted", "tolerance", "label"}
    if unknown or "metric" not in table:
        raise ValueError(f"{where}: needs a metric; unknown keys {sorted(unknown)}")
    decades, tolerance = float(table.get("decades", 1.0)), float(table.get("tolerance", DEFAULT_TOLERANCE))
    if not (decades > 0 and tolerance > 0):
        raise ValueError(f"{where}: decades and tolerance must be > 0, got {decades}, {tolerance}")
    predicted = table.get("predicted")
    if predicted is not None:
        predicted = _expression(f"{where}.predicted", predicted)
    if isinstance(predicted, str):
        names_in(predicted)  # parsed now, before any data is read
    scale = _choice(table, "scale", ("log", "loglog"), where)
    label = f"d {table['metric']} / d ln step" if scale == "log" else f"d ln {table['metric']} / d ln step"
    return Rate(
        metric=str(table["metric"]),
        scale=scale,
        decades=decades,
        predicted=predicted,
        tolerance=tolerance,
        label=str(table.get("label", label)),
    )


def _trend(i: int, table: dict) -> Trend:
    where = f"report.trajectory.trends[{i}]"
    unknown = set(table) - {"metric", "direction", "tol", "label"}
    if unknown or "metric" not in table:
        raise ValueError(f"{where}: needs a metric; unknown keys {sorted(unknown)}")
    tol = float(table.get("tol", 1e-6))
    if not tol >= 0:
        raise ValueError(f"{where}.tol must be >= 0, got {tol}")
    direction = _choice(table, "direction", ("increasing", "decreasing"), where)
    return Trend(
        metric=str(table["metric"]), direction=direction, tol=tol, label=str(table.get("label", table["metric"]))
    )


def _escape(table, x: str, group_by: tuple[str, ...], labels: list[str]) -> Escape | None:
    if table is None:
        return None
    where = "report.trajectory.escape"
    if not isinstance(table, dict) or "x" not in table:
        raise ValueError(f"{where}: must be a table with an x expression")
    unknown = set(table) - ESCAPE_KEYS
    if unknown:
        raise ValueError(f"{where}: unknown keys {sorted(unknown)} (known: {sorted(ESCAPE_KEYS)})")
    if not labels:
        raise ValueError(f"{where}: needs report.trajectory.crossings to fit")
    predicted = table.get("predicted", {})
    if not isinstance(predicted, dict):
        raise ValueError(f"{where}.predicted must be a table: crossing label = expression")
    missing = [k for k in predicted if k not in labels]
    if missing:
        raise ValueError(f"{where}.predicted: {missing} are not crossing labels (labels: {labels})")
    tolerance = float(table.get("tolerance", DEFAULT_TOLERANCE))
    if not tolerance > 0:
        raise ValueError(f"{where}.tolerance must be > 0, got {tolerance}")
    y = _choice(table, "y", (x, "time" if x == "step" else "step"), where)
    return Escape(
        x=str(table["x"]),
        x_label=str(table.get("x_label", table["x"])),
        y=y,
        group_by=_fields(table, "group_by") if "group_by" in table else group_by,
        tolerance=tolerance,
        predicted={str(k): _expression(f"{where}.predicted.{k}", v) for k, v in predicted.items()},
    )
