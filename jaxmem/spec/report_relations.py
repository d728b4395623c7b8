"""`[[report.relation]]`: a per-run quantity against an expression of the config, for any sweep.

    [[report.relation]]
    x = "1/alpha"                 # an expression of the config (and lr, seed, final_<metric>)
    y = "steps_to_threshold"      # an expression of a run's columns (below)
    fit = "linear"                # "linear" y = a + b·x (default), "power" ln y = a + b·ln x, "none"
    group_by = ["H"]              # one line, fit and rank test per combination (default: one)
    where = { model = "gt" }      # only the rows with these config values (a value or a list of values)
    expect_slope = [0.5, 2]       # b's 95 % interval lies inside [lo, hi] (inf / -inf for an open end:
                                  # [0, inf] for "increasing"); FAIL wholly outside, else INCONCLUSIVE
    expect_level = [0.9, inf]     # the mean of y over the group's rows: its 95 % t-interval over them (3 or
                                  # more finite values) inside [lo, hi] PASSes, wholly outside FAILs, else
                                  # INCONCLUSIVE: a level the claim states (e.g. attention mass ≥ 0.9)
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
(empty when the threshold was never reached), `wall_time_s`, and `rate_<metric>` / `rate_<metric>_r2`: the
run's fitted slope and its R² of the first `[report.trajectory] rates` entry on that metric (empty without
one); in a search sweep `capacity` instead (one row per search: its answer, missing when censored), with the
config and seed of its point.
x's names: the config fields, lr, seed and the final metrics, so a measured property of the drawn
problem can be the axis (e.g. a graph's ‖A*‖∞). Over searches, a metric in x is the median over the
search's runs (meant for a property of the problem, the same at every probe).

Every verdict is PASS, FAIL or INCONCLUSIVE (jaxmem.report.relations, jaxmem.report.verdicts): a check
needs 3 or more x values with a median, and INCONCLUSIVE says the data cannot decide it.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Literal

from jaxmem.spec.tables import BadValue, Bounds, Formula, Names, Number, Text, fill, is_number, key, names_of, plain

if TYPE_CHECKING:
    from jaxmem.spec.report_tables import Context

RUN_QUANTITIES = frozenset(
    {"max_metric", "final_metric", "final_loss", "steps_run", "steps_to_threshold", "wall_time_s"}
)
SEARCH_QUANTITY = "capacity"
RUN = ("run", "a config field, lr or seed")  # (the names a key may use: jaxmem.spec.report_tables.Context's)
FINALS = ("finals", "a config field, lr, seed or final_<metric>")
QUANTITIES = ("quantities", "a config field, lr, seed, final_<metric>, rate_<metric> or a run quantity")


def _kept_values(value) -> tuple[tuple[str, tuple], ...]:
    """`where`: {field: value or [values]} as ((field, values), ...)."""
    if not isinstance(value, dict) or not value:
        raise ValueError()
    return tuple((str(k), tuple(v) if isinstance(v, list) else (v,)) for k, v in value.items())


def _fraction(value) -> float:
    if not is_number(value):
        raise ValueError()
    if not 0 <= value <= 1:
        raise BadValue(f"must lie in [0, 1], got {float(value)}")
    return float(value)


Where = plain(_kept_values, dict[str, object], "a table of config fields and the values kept")
Fraction = plain(_fraction, float, "a finite number")
Medians = Literal["non-increasing", "non-decreasing"]


@dataclasses.dataclass(frozen=True)
class Relation:
    """A per-run quantity (or a search's answer) against an expression of the config: medians per x, a fit,
    Spearman ρ, monotone and U-shape checks."""

    x: Formula = key("an expression of the config, lr, seed and final_<metric>", uses=FINALS)
    y: Formula = key("an expression of a run's columns, or of 'capacity' (a search's answer)", uses=QUANTITIES)
    expect_slope: Bounds | None = key("[lo, hi]: b's 95 % interval inside PASSes ([0, inf]: b > 0)", None)
    expect_level: Bounds | None = key("[lo, hi]: the 95 % interval of y's mean over the rows inside PASSes", None)
    min_rank: Fraction = key("and |ρ| at least this", 0.8, json_schema_extra={"minimum": 0, "maximum": 1})
    group_by: Names = key("one line, fit and rank test per combination", (), names=RUN)
    where: Where = key("only the rows with these config values (a value or a list of values)", (), names=RUN)
    fit: Literal["linear", "power", "none"] = key("y = a + b·x, ln y = a + b·ln x, or none", "linear")
    label: Text = key("its name (default: 'y_label against x_label')", "")
    x_label: Text = key("axis name (default: x)", "")
    y_label: Text = key("axis name (default: y)", "")
    min_r2: Number | None = key("and R² at least this, the law told apart from a free exponent", None)
    rank: Literal["increasing", "decreasing"] | None = key("the sign of Spearman ρ(x, y) over every run", None)
    monotone: Medians | None = key("the per-x medians move so beyond the seed spread", None)
    minimum: Literal["interior"] | None = key("the smallest per-x median lies inside the x range", None)
    missing: Literal["drop", "high", "low"] = key("a run without a value ranks above, below, or is left out", "drop")

    @property
    def over_searches(self) -> bool:
        """Whether y is a search's answer (one row per search) rather than a run's quantity."""
        return SEARCH_QUANTITY in names_of(self.y)

    def checked(self, given: dict, context: Context, path: str, problems: list[str]) -> Relation:
        if self.over_searches and names_of(self.y) & (RUN_QUANTITIES | {"lr"}):
            problems.append(f"{path}.y: a search's capacity cannot be mixed with a run's quantities, got {self.y!r}")
        for name in ("expect_slope", "min_r2"):
            if self.fit == "none" and getattr(self, name) is not None:
                problems.append(f'{path}.{name}: needs a fit, got fit = "none"')
        relation = fill(self, x_label=self.x, y_label=self.y)
        return fill(relation, label=f"{relation.y_label} against {relation.x_label}")
