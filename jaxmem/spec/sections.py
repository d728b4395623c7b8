"""The `[train]`, `[search]`, `[engine]` and `[success]` tables of a sweep spec: frozen dataclasses whose annotations
are their TOML keys' kinds and whose fields their defaults, limits and meanings (jaxmem.spec.tables); the checks that
need the experiment or other tables are jaxmem.spec.sweep's."""

from __future__ import annotations

import dataclasses
from typing import Annotated, Literal

from pydantic import BeforeValidator, Field, Strict

from jaxmem.spec.tables import MAX_INT, Expression, Flag, Formula, Integer, Number, Text, Words, key, one_or_many
from jaxmem.spec.tables import plain

INT32 = MAX_INT + 1


def _any_number(value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError()
    return float(value)


Steps = Annotated[
    Annotated[int, Strict(), Field(ge=0, lt=INT32)] | Formula, Words("an integer or an expression string")
]
Rate = Annotated[float, BeforeValidator(_any_number), Field(gt=0, allow_inf_nan=False)]
EarlyStop = plain(
    lambda v: None if v is False else _any_number(v), float | Literal[False], "a number (or false for none)"
)
Rates = Annotated[
    one_or_many(Rate, (int, float)), Words("a number or a non-empty list of numbers", "positive and finite")
]


@dataclasses.dataclass(frozen=True)
class TrainSpec:
    """How each run trains and is evaluated."""

    steps: Steps = key("steps per run, or an expression of the run's config: its own budget (e.g. '4 * n')", 1000)
    eval_every: Integer = key("evaluate every this many steps (linear schedule)", 100, ge=1, lt=INT32)
    eval_schedule: Literal["linear", "log"] = key("'log': step 0 and eval_points log-spaced steps", "linear")
    eval_points: Integer = key("evaluations of a log schedule", 60)
    precision: Literal["float32", "float64"] = key("'float64': the whole sweep in JAX's x64 mode", "float32")
    metric: Text = key("the metric early stopping reads (and the success rule's, by default)", "accuracy")
    early_stop: EarlyStop = key("stop a run once train.metric reaches this in the success direction", None)
    learning_rates: Rates = key("a rate, or a list: the best over them, trained in parallel", (1e-3,), min_length=1)
    integrator: Literal["optax", "gradient_flow"] = key("'gradient_flow': θ̇ = −∇L solved adaptively", "optax")
    rtol: Number = key("gradient_flow: the ODE solver's relative tolerance", 1e-6, gt=0)
    atol: Number = key("gradient_flow: the ODE solver's absolute tolerance", 1e-8, gt=0)
    give_up: Integer = key("stop a run that cannot reach the threshold at its last K evaluations' pace", 0, ge=0)
    give_up_pace: Number = key("give_up: credit a run with this many times its last K evaluations' gain", 1.0, ge=1)


@dataclasses.dataclass(frozen=True)
class SearchSpec:
    """A search per grid point and seed for the value of an integer field at which runs stop (or start) succeeding."""

    variable: Text = key("the integer field searched")
    lo: Expression = key("the initial lower bound, a number or an expression of the point's config")
    hi: Expression = key("the initial upper bound, likewise")
    threshold: Annotated[Number, Words("", "in (0, 1]")] = key(
        "legacy: train.metric's success threshold ([success] replaces it)", 0.99, gt=0, le=1
    )
    resolution: Number = key("stop when hi/lo <= 1 + resolution (or hi - lo <= 1)", 0.01, ge=0)
    probes: Integer = key("probes per round: a (probes + 1)-ary search", 3, ge=1)
    mode: Literal["verified", "paper"] = key("'paper': the authors' midpoint rules", "verified")
    max_expand: Integer = key("verified: how often a bracket may double or halve past its bounds", 4, ge=0)
    goal: Literal["largest", "smallest"] = key("the largest value that succeeds, or the smallest", "largest")
    law_axis: Text = key("verified: a grid axis along which earlier answers seed the bracket ('' = off)", "")
    law_margin: Number = key("the seeded bracket: the law's prediction ×/÷ (1 + law_margin)", 0.25, gt=0)


@dataclasses.dataclass(frozen=True)
class EngineSpec:
    """How runs are packed into programs: padding, slots, host syncs, what is recorded."""

    pad_ratio: Number = key("sizes are padded up a ladder of about this ratio", 2.0, ge=1)
    search_pad_ratio: Number = key("the searched variable's finer ladder", 1.41, ge=1)
    search_pad_floor: Annotated[Number, Words("", "in [0, 1]")] = key(
        "a searched value is padded to at least this × its bracket's upper bound", 0.5, ge=0, le=1
    )
    max_slots: Integer = key("runs per program; 0 = chosen from the work per step", 0, ge=0)
    segment_seconds: Number = key("host syncs (and checkpoints) about this often", 2.0, gt=0)
    speculation: Integer = key(
        "rounds a search probes ahead of its current one without a round barrier (0: the round barrier; "
        "the planner's choice on an accelerator)",
        0,
        ge=0,
    )
    segment_steps: Integer = key(
        "with speculation: program steps per segment, a multiple of train.eval_every (0: the planner's choice)",
        0,
        ge=0,
    )
    record_trajectory: Flag = key("store every run's metrics at every evaluation", False)
    trajectory_per_decade: Integer = key(
        "with record_trajectory: keep k log-spaced evaluations per decade; 0 = all", 0, ge=0
    )
    pad_to_max: Annotated[tuple[Text, ...], Words("a list of names")] = key(
        "sizes padded to their largest value in the sweep", ()
    )
    matmul_precision: Literal["highest", "tf32", "bf16"] = key(
        "f32 matmuls in full, or faster tf32 / bf16 passes where the device has them (emulated on a CPU: "
        "operands rounded to 10 / 7 mantissa bits, f32 accumulation)",
        "highest",
    )


@dataclasses.dataclass(frozen=True)
class SuccessTable:
    """When a run succeeds: its best (or final) evaluation of metric at least or at most a threshold."""

    metric: Text | None = key("the judged metric (default: train.metric)", None)
    at_least: Number | None = key("succeeds at or above this (give one of at_least, at_most)", None)
    at_most: Number | None = key("succeeds at or below this", None)
    counts: Literal["best", "final"] = key("which evaluation decides", "best")


@dataclasses.dataclass(frozen=True)
class SuccessRule:
    """A run succeeds when its best (or final) evaluation of `metric` is at least / at most `threshold`."""

    metric: str
    direction: str  # "at_least" or "at_most"
    threshold: float
    counts: str = "best"  # which evaluation decides: "best" or "final"
