"""`[[report.relation]]`: a per-run quantity against an expression of the config, for any sweep.

    [[report.relation]]
    x = "1/alpha"                 # an expression of the config (and lr, seed, final_<metric>)
    y = "steps_to_threshold"      # an expression of a run's columns (below)
    fit = "linear"                # "linear" y = a + b·x (default), "power" ln y = a + b·ln x, "none"
    group_by = ["H"]              # one line, fit and rank test per combination (default: one)
    where = { model = "gt" }      # only the rows with these config values (a value or a list of values)
    expect_slope = [0.5, 2]       # b's 95 % interval lies inside [lo, hi] (inf / -inf for an open end:
                                  # [0, inf] for "increasing"); FAIL wholly outside, else INCONCLUSIVE
    min_r2 = 0.9                  # and R² at least this, the law told apart from the same law with a
                                  # free exponent (y = a + b·x^p, p = 0 and 2 must fit worse)
    rank = "increasing"           # Spearman ρ(x, y) over every run must have this sign ...
    min_rank = 0.8                # ... and |ρ| at least this (default 0.8)
    monotone = "non-increasing"   # the per-x medians fall along x beyond the seed spread (some larger x
                                  # has its 25–75 % range wholly below a smaller x's) and never rise
                                  # beyond it ("non-decreasing": the mirror image), e.g. N*(0.5) over trials
    minimum = "interior"          # the smallest per-x median lies inside the x range, below some x on
                                  # each side beyond the seed spread (a U-shape)
    missing = "high"              # a run without a value ranks above ("high") or below ("low") every
                                  # value, or is left out ("drop", the default)
    label, x_label, y_label       # names in report.md and relations.png

y's names: the config fields, lr, seed, the run's final metrics (`final_<metric>`), `max_metric`
(the judged metric's best evaluation), `final_metric`, `final_loss`, `steps_run`, `steps_to_threshold`
(empty when the threshold was never reached) and `wall_time_s`; in a search sweep `capacity` instead
(one row per search: its answer, missing when censored), with the config and seed of its point.
x's names: the config fields, lr, seed and the final metrics, so a measured property of the drawn
problem can be the axis (e.g. a graph's ‖A*‖∞). Over searches, a metric in x is the median over the
search's runs (meant for a property of the problem, the same at every probe).

Every verdict is PASS, FAIL or INCONCLUSIVE (jaxmem.report.relations, jaxmem.report.verdicts): a check
needs 3 or more x values with a median, and INCONCLUSIVE says the data cannot decide it.
"""

from __future__ import annotations

import dataclasses

from jaxmem.spec.tables import Table, bounds, choice, expect, field_names, formula, names_of, number, text

RELATION_KEYS = (
    "x",
    "y",
    "fit",
    "group_by",
    "where",
    "expect_slope",
    "min_r2",
    "rank",
    "min_rank",
    "monotone",
    "minimum",
    "missing",
)
RELATION_KEYS += ("label", "x_label", "y_label")
RUN_QUANTITIES = frozenset(
    {"max_metric", "final_metric", "final_loss", "steps_run", "steps_to_threshold", "wall_time_s"}
)
SEARCH_QUANTITY = "capacity"
DEFAULT_MIN_RANK = 0.8


@dataclasses.dataclass(frozen=True)
class Relation:
    x: str
    y: str
    label: str
    x_label: str
    y_label: str
    fit: str = "linear"
    group_by: tuple[str, ...] = ()
    expect_slope: tuple[float, float] | None = None
    min_r2: float | None = None
    rank: str | None = None
    min_rank: float = DEFAULT_MIN_RANK
    monotone: str | None = None
    minimum: str | None = None
    missing: str = "drop"
    where: tuple[tuple[str, tuple], ...] = ()  # (config field, the values kept)

    @property
    def over_searches(self) -> bool:
        """Whether y is a search's answer (one row per search) rather than a run's quantity."""
        return SEARCH_QUANTITY in names_of(self.y)


def x_names(run: frozenset[str] | None, metrics: frozenset[str] | None) -> frozenset[str] | None:
    """The names x may use (None: not checked)."""
    return None if run is None or metrics is None else run | {f"final_{m}" for m in metrics}


def y_names(run: frozenset[str] | None, metrics: frozenset[str] | None, searched: bool) -> frozenset[str] | None:
    """The names y may use (None: not checked)."""
    if run is None or metrics is None:
        return None
    names = run | RUN_QUANTITIES | {f"final_{m}" for m in metrics}
    return names | {SEARCH_QUANTITY} if searched else names


def read_relation(
    t: Table, run: frozenset[str] | None, metrics: frozenset[str] | None, searched: bool
) -> Relation | None:
    """One `[[report.relation]]` table; `run`: a run's config fields, lr and seed (None: unchecked)."""
    x_allowed, y_allowed = x_names(run, metrics), y_names(run, metrics, searched)
    x, y = t.need("x", formula), t.need("y", formula)
    t.check("x", names_of(x), x_allowed, "a config field, lr, seed or final_<metric>")
    t.check("y", names_of(y), y_allowed, "a config field, lr, seed, final_<metric> or a run quantity")
    if y is not None and SEARCH_QUANTITY in names_of(y) and names_of(y) & (RUN_QUANTITIES | {"lr"}):
        t.problems.append(f"{t.path}.y: a search's capacity cannot be mixed with a run's quantities, got {y!r}")
    expect_slope = t.get("expect_slope", bounds)
    if expect_slope is not None and expect_slope[0] > expect_slope[1]:
        t.problems.append(f"{t.path}.expect_slope: lo must not exceed hi, got {list(expect_slope)}")
    min_rank = t.get("min_rank", number, DEFAULT_MIN_RANK)
    if not 0 <= min_rank <= 1:
        t.problems.append(f"{t.path}.min_rank: must lie in [0, 1], got {min_rank}")
    if x is None or y is None:
        return None
    group_by = t.get("group_by", field_names, ())
    t.check("group_by", group_by, run, "a config field, lr or seed")
    where = t.get("where", kept_values, ())
    t.check("where", [name for name, _ in where], run, "a config field, lr or seed")
    fit = t.get("fit", choice("linear", "power", "none"), "linear")
    for key in ("expect_slope", "min_r2"):
        if fit == "none" and key in t.data:
            t.problems.append(f'{t.path}.{key}: needs a fit, got fit = "none"')
    x_label, y_label = t.get("x_label", text, x), t.get("y_label", text, y)
    return Relation(
        x=x,
        y=y,
        label=t.get("label", text, f"{y_label} against {x_label}"),
        x_label=x_label,
        y_label=y_label,
        fit=fit,
        group_by=group_by,
        expect_slope=expect_slope,
        min_r2=t.get("min_r2", number),
        rank=t.get("rank", choice("increasing", "decreasing")),
        min_rank=min_rank,
        monotone=t.get("monotone", choice("non-increasing", "non-decreasing")),
        minimum=t.get("minimum", choice("interior")),
        missing=t.get("missing", choice("drop", "high", "low"), "drop"),
        where=where,
    )


def kept_values(value) -> tuple[tuple[str, tuple], ...]:
    """`where`: {field: value or [values]} as ((field, values), ...)."""
    expect(isinstance(value, dict) and value, "a table of config fields and the values kept", value)
    return tuple((str(k), tuple(v) if isinstance(v, list) else (v,)) for k, v in value.items())
