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
from typing import TYPE_CHECKING, Annotated, Literal

from jaxmem.spec.tables import CONFIG, Bounds, Formula, Names, Number, Text, key, names_of, plain

if TYPE_CHECKING:
    from jaxmem.spec.report_tables import Checks, Context

RUN_QUANTITIES = frozenset(
    {"max_metric", "final_metric", "final_loss", "steps_run", "steps_to_threshold", "wall_time_s"}
)
SEARCH_QUANTITY = "capacity"
DEFAULT_MIN_RANK = 0.8
RUN = "a config field, lr or seed"


def _kept_values(value) -> tuple[tuple[str, tuple], ...]:
    """`where`: {field: value or [values]} as ((field, values), ...)."""
    if not isinstance(value, dict) or not value:
        raise ValueError()
    return tuple((str(k), tuple(v) if isinstance(v, list) else (v,)) for k, v in value.items())


Where = plain(_kept_values, dict[str, object], "a table of config fields and the values kept")


@dataclasses.dataclass(frozen=True)
class Relation:
    """A per-run quantity (or a search's answer) against an expression of the config: medians per x, a fit,
    Spearman ρ, monotone and U-shape checks."""

    __pydantic_config__ = CONFIG
    x: Annotated[Formula, key("an expression of the config, lr, seed and final_<metric>")]
    y: Annotated[Formula, key("an expression of a run's columns, or of 'capacity' (a search's answer)")]
    expect_slope: Annotated[Bounds | None, key("[lo, hi]: b's 95 % interval inside PASSes ([0, inf]: b > 0)")] = None
    min_rank: Annotated[Number, key("and |ρ| at least this", json_schema_extra={"minimum": 0, "maximum": 1})] = (
        DEFAULT_MIN_RANK
    )
    group_by: Annotated[Names, key("one line, fit and rank test per combination")] = ()
    where: Annotated[Where, key("only the rows with these config values (a value or a list of values)")] = ()
    fit: Annotated[Literal["linear", "power", "none"], key("y = a + b·x, ln y = a + b·ln x, or none")] = "linear"
    label: Annotated[Text, key("its name (default: 'y_label against x_label')")] = ""
    x_label: Annotated[Text, key("axis name (default: x)")] = ""
    y_label: Annotated[Text, key("axis name (default: y)")] = ""
    min_r2: Annotated[Number | None, key("and R² at least this, the law told apart from a free exponent")] = None
    rank: Annotated[Literal["increasing", "decreasing"] | None, key("the sign of Spearman ρ(x, y) over every run")] = (
        None
    )
    monotone: Annotated[
        Literal["non-increasing", "non-decreasing"] | None, key("the per-x medians move so beyond the seed spread")
    ] = None
    minimum: Annotated[Literal["interior"] | None, key("the smallest per-x median lies inside the x range")] = None
    missing: Annotated[
        Literal["drop", "high", "low"], key("a run without a value ranks above, below, or is left out")
    ] = "drop"

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


def check_relation(relation: Relation, context: Context, c: Checks) -> Relation:
    """The names of one `[[report.relation]]` table, and its defaults."""
    run, metrics = context.run, context.metrics
    c.names("x", names_of(relation.x), x_names(run, metrics), "a config field, lr, seed or final_<metric>")
    y_allowed = y_names(run, metrics, bool(context.searched_sweep))
    c.names("y", names_of(relation.y), y_allowed, "a config field, lr, seed, final_<metric> or a run quantity")
    if SEARCH_QUANTITY in names_of(relation.y) and names_of(relation.y) & (RUN_QUANTITIES | {"lr"}):
        c.add(f".y: a search's capacity cannot be mixed with a run's quantities, got {relation.y!r}")
    if not 0 <= relation.min_rank <= 1:
        c.add(f".min_rank: must lie in [0, 1], got {relation.min_rank}")
    c.names("group_by", relation.group_by, run, RUN)
    c.names("where", [name for name, _ in relation.where], run, RUN)
    for key_name in ("expect_slope", "min_r2"):
        if relation.fit == "none" and getattr(relation, key_name) is not None:
            c.add(f'.{key_name}: needs a fit, got fit = "none"')
    relation = fill(relation, x_label=relation.x, y_label=relation.y)
    return fill(relation, label=f"{relation.y_label} against {relation.x_label}")


def fill(table, **defaults):
    """`table` with its empty keys set to `defaults`."""
    return dataclasses.replace(table, **{k: v for k, v in defaults.items() if getattr(table, k) in (None, "")})
