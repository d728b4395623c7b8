"""The `[train]`, `[search]`, `[engine]` and `[success]` tables of a sweep spec: frozen dataclasses whose annotations
are their TOML keys' kinds, limits and meanings (jaxmem.spec.tables), read by pydantic; the checks that need the
experiment or other tables are jaxmem.spec.sweep's."""

from __future__ import annotations

import dataclasses
from typing import Annotated, Literal

from pydantic import BeforeValidator, Field, Strict

from jaxmem.spec.tables import CONFIG, MAX_INT, Expression, Flag, Formula, Integer, Number, Text, Words, WrongKind, key
from jaxmem.spec.tables import one_or_many, plain

INT32 = MAX_INT + 1


def _any_number(value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise WrongKind()
    return float(value)


def _number_or_false(value) -> float | None:
    return None if value is False else _any_number(value)


Steps = Annotated[
    Annotated[int, Strict(), Field(ge=0, lt=INT32)] | Formula, Words("an integer or an expression string")
]
Rate = Annotated[float, BeforeValidator(_any_number), Field(gt=0, allow_inf_nan=False)]
EarlyStop = plain(_number_or_false, float | Literal[False], "a number (or false for none)")


@dataclasses.dataclass(frozen=True)
class TrainSpec:
    """How each run trains and is evaluated."""

    __pydantic_config__ = CONFIG
    steps: Annotated[
        Steps, key("steps per run, or an expression of the run's config: its own budget (e.g. '4 * n')")
    ] = 1000
    eval_every: Annotated[Integer, key("evaluate every this many steps (linear schedule)", ge=1, lt=INT32)] = 100
    eval_schedule: Annotated[Literal["linear", "log"], key("'log': step 0 and eval_points log-spaced steps")] = "linear"
    eval_points: Annotated[Integer, key("evaluations of a log schedule")] = 60
    precision: Annotated[Literal["float32", "float64"], key("'float64': the whole sweep in JAX's x64 mode")] = "float32"
    metric: Annotated[Text, key("the metric early stopping reads (and the success rule's, by default)")] = "accuracy"
    early_stop: Annotated[EarlyStop, key("stop a run once train.metric reaches this in the success direction")] = None
    learning_rates: Annotated[
        one_or_many(Rate, (int, float)),
        key("a rate, or a list: the best over them, trained in parallel", min_length=1),
        Words("a number or a non-empty list of numbers", "positive and finite"),
    ] = (1e-3,)
    integrator: Annotated[Literal["optax", "gradient_flow"], key("'gradient_flow': θ̇ = −∇L solved adaptively")] = (
        "optax"
    )
    rtol: Annotated[Number, key("gradient_flow: the ODE solver's relative tolerance", gt=0)] = 1e-6
    atol: Annotated[Number, key("gradient_flow: the ODE solver's absolute tolerance", gt=0)] = 1e-8
    give_up: Annotated[
        Integer, key("stop a run that cannot reach the threshold at its last K evaluations' pace", ge=0)
    ] = 0


@dataclasses.dataclass(frozen=True)
class SearchSpec:
    """A search per grid point and seed for the value of an integer field at which runs stop (or start) succeeding."""

    __pydantic_config__ = CONFIG
    variable: Annotated[Text, key("the integer field searched")]
    lo: Annotated[Expression, key("the initial lower bound, a number or an expression of the point's config")]
    hi: Annotated[Expression, key("the initial upper bound, likewise")]
    threshold: Annotated[
        Number,
        key("legacy: train.metric's success threshold ([success] replaces it)", gt=0, le=1),
        Words("", "in (0, 1]"),
    ] = 0.99
    resolution: Annotated[Number, key("stop when hi/lo <= 1 + resolution (or hi - lo <= 1)", ge=0)] = 0.01
    probes: Annotated[Integer, key("probes per round: a (probes + 1)-ary search", ge=1)] = 3
    mode: Annotated[Literal["verified", "paper"], key("'paper': the authors' midpoint rules")] = "verified"
    max_expand: Annotated[Integer, key("verified: how often a bracket may double or halve past its bounds", ge=0)] = 4
    goal: Annotated[Literal["largest", "smallest"], key("the largest value that succeeds, or the smallest")] = "largest"
    law_axis: Annotated[Text, key("verified: a grid axis along which earlier answers seed the bracket ('' = off)")] = ""
    law_margin: Annotated[Number, key("the seeded bracket: the law's prediction ×/÷ (1 + law_margin)", gt=0)] = 0.25


@dataclasses.dataclass(frozen=True)
class EngineSpec:
    """How runs are packed into programs: padding, slots, host syncs, what is recorded."""

    __pydantic_config__ = CONFIG
    pad_ratio: Annotated[Number, key("sizes are padded up a ladder of about this ratio", ge=1)] = 2.0
    search_pad_ratio: Annotated[Number, key("the searched variable's finer ladder", ge=1)] = 1.41
    search_pad_floor: Annotated[
        Number,
        key("a searched value is padded to at least this × its bracket's upper bound", ge=0, le=1),
        Words("", "in [0, 1]"),
    ] = 0.5
    max_slots: Annotated[Integer, key("runs per program; 0 = chosen from the work per step", ge=0)] = 0
    segment_seconds: Annotated[Number, key("host syncs (and checkpoints) about this often", gt=0)] = 2.0
    record_trajectory: Annotated[Flag, key("store every run's metrics at every evaluation")] = False
    trajectory_per_decade: Annotated[
        Integer, key("with record_trajectory: keep k log-spaced evaluations per decade; 0 = all", ge=0)
    ] = 0
    pad_to_max: Annotated[
        tuple[Text, ...], Words("a list of names"), key("sizes padded to their largest value in the sweep")
    ] = ()
    matmul_precision: Annotated[
        Literal["highest", "tf32", "bf16"],
        key("f32 matmuls in full, or faster tf32 / bf16 passes where the device has them"),
    ] = "highest"


@dataclasses.dataclass(frozen=True)
class SuccessTable:
    """When a run succeeds: its best (or final) evaluation of metric at least or at most a threshold."""

    __pydantic_config__ = CONFIG
    metric: Annotated[Text | None, key("the judged metric (default: train.metric)")] = None
    at_least: Annotated[Number | None, key("succeeds at or above this (give one of at_least, at_most)")] = None
    at_most: Annotated[Number | None, key("succeeds at or below this")] = None
    counts: Annotated[Literal["best", "final"], key("which evaluation decides")] = "best"


@dataclasses.dataclass(frozen=True)
class SuccessRule:
    """A run succeeds when its best (or final) evaluation of `metric` is at least / at most `threshold`."""

    metric: str
    direction: str  # "at_least" or "at_most"
    threshold: float
    counts: str = "best"  # which evaluation decides: "best" or "final"
