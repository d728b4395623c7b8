"""The experiment interface: a few pure functions on ONE run, plus declared fields.

An experiment knows nothing about vmap, jit, devices, files or the engine (DESIGN.md; the optax idea).
It writes:

- `fields`: its configuration, each field with a *kind* that tells the engine what to do with it:
    size    an integer the engine pads to its bucket's size: the padded value is static (in `shape`),
            the true value is traced (in `dyn`); functions mask what lies past the true size.
    static  a value baked into the program (one program per value): in `shape`.
    traced  a number the program reads at run time (one program for all values): in `dyn`. A string
            choice is traced as its index in `choices`, a bool as 0/1.
    host    read on the host only (by `resolve`, `check` or the costs), never by the program.
- `init(key, shape, dyn) -> (params, problem)`: trainable parameters and the fixed problem data.
- `evaluate(params, problem, shape, dyn) -> {metric: scalar}`.
- `loss(params, problem, shape, dyn, key) -> scalar`: what training minimises; `key` is this step's own
  key, for tasks that draw a fresh batch in the step. None for a construction that is never trained.

and optionally:

- `resolve(config) -> config`: the effective config (defaults that depend on other fields, sizes a
  scaling derives from one number); the entries it adds are declared in `derived`, with their kinds.
- `optimizer(dyn) -> optax transformation` (default: Adam at `dyn["lr"]`), `check(config) -> problems`.
- `costs`: parameters, information bits and FLOPs per step of a (resolved) config, for reports and
  planning. `reference`: float64 host-side checks and figures of one run's problem (`HostRun`).
- `same_problem_across`: fields that leave the problem `init` draws unchanged (same key for runs that
  differ only in them); `precondition`: 0/1 metrics a run's problem must pass (>= 0.5) at
  initialisation to be trained.

The engine hands a run everything it needs from the engine through these arguments: `key` (its own,
from seed and problem), `shape`, `dyn` (with `dyn["lr"]`), and, on the host, a `HostRun`.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable, Mapping

import jax
import optax

REQUIRED = object()

SIZE, STATIC, TRACED, HOST = "size", "static", "traced", "host"
KINDS = (SIZE, STATIC, TRACED, HOST)

Config = Mapping[str, Any]
Shape = Mapping[str, Any]
Dyn = Mapping[str, jax.Array]


@dataclasses.dataclass(frozen=True)
class Field:
    """One configuration field: its type, kind (see the module doc), default and validation rule.
    `ladder` (sizes only): the field whose padding ladder this size climbs, a name or a function of
    the complete config; by default its own. A size derived from the searched variable names it, so
    it gets the searched variable's finer ladder."""

    type: type
    doc: str
    kind: str = HOST
    default: Any = REQUIRED
    choices: tuple = ()
    minimum: float | None = None
    ladder: str | Callable[[Config], str] | None = None
    maximum: float | None = None  # the largest value the experiment supports (e.g. its draws' limits)

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"field kind must be one of {KINDS}, got {self.kind!r}")
        if self.kind == SIZE and self.type is not int:
            raise ValueError("a size field is an int")

    def check(self, name: str, value: Any) -> str | None:
        """Return an error message for a bad value, or None."""
        if self.type is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if self.type is int and isinstance(value, float) and value.is_integer():
            value = int(value)
        if not isinstance(value, self.type) or (self.type is not bool and isinstance(value, bool)):
            return f"{name} must be of type {self.type.__name__}, got {value!r}"
        if self.choices and value not in self.choices:
            return f"{name} must be one of {list(self.choices)}, got {value!r}"
        if self.minimum is not None and value < self.minimum:
            return f"{name} must be >= {self.minimum}, got {value!r}"
        if self.maximum is not None and value > self.maximum:
            return f"{name} must be <= {self.maximum}, got {value!r} (the largest the experiment supports)"
        return None

    def ladder_of(self, name: str, config: Config) -> str:
        """The field whose padding ladder this size climbs in `config`."""
        if self.ladder is None:
            return name
        return self.ladder if isinstance(self.ladder, str) else self.ladder(config)

    def traced_value(self, value):
        """The number the program sees for `value`: a choice's index, a bool as 0/1, else the value."""
        if self.choices and self.type is str:
            return self.choices.index(value)
        return float(value) if self.type is float else int(value)


def size(doc: str, default: Any = REQUIRED, minimum: int | None = 1, ladder=None, maximum: int | None = None) -> Field:
    """A padded size (see the module doc). Its padded value is at most twice its value (every padding
    ladder holds the powers of two), which `maximum` must allow for."""
    return Field(int, doc, SIZE, default, (), minimum, ladder, maximum)


def static(type_: type, doc: str, default: Any = REQUIRED, choices: tuple = (), minimum=None) -> Field:
    """A value baked into the program: runs differing in it never share a program."""
    return Field(type_, doc, STATIC, default, choices, minimum)


def traced(type_: type, doc: str, default: Any = REQUIRED, choices: tuple = (), minimum=None) -> Field:
    """A number read at run time: runs differing in it share a program."""
    return Field(type_, doc, TRACED, default, choices, minimum)


def host(type_: type, doc: str, default: Any = REQUIRED, choices: tuple = (), minimum=None) -> Field:
    """A field the program never reads (it enters through `resolve` or the costs)."""
    return Field(type_, doc, HOST, default, choices, minimum)


@dataclasses.dataclass(frozen=True)
class Costs:
    """What a (resolved) config costs: parameters as the paper counts them, bits of information
    stored (for bits per parameter), FLOPs of one training step and bytes of its largest temporaries
    per run (for planning: e.g. the logits of a softmax over many classes, which a `loss_block`
    shrinks; see jaxmem/plan/loss_blocks.py). Each optional."""

    params: Callable[[Config], float] | None = None
    bits: Callable[[Config], float] | None = None
    flops_per_step: Callable[[Config], float] | None = None
    temp_bytes: Callable[[Config], float] | None = None


@dataclasses.dataclass(frozen=True)
class HostRun:
    """One run's problem as the host-side add-ons see it: the resolved config, the run's key, and the
    unpadded static shape and traced values that `init` would get for it."""

    config: Config
    key: jax.Array
    shape: Shape
    dyn: Mapping[str, Any]


@dataclasses.dataclass(frozen=True)
class Reference:
    """Float64 host-side add-ons on one run's problem (`[report] references = true`).
    check(run) -> dict: an independent re-solve; keys that are also metrics are set against the
        engine's values in the report.
    figure(path, run) -> path: a picture of the problem."""

    check: Callable[[HostRun], dict]
    figure: Callable[[Any, HostRun], Any] | None = None


def default_optimizer(dyn: Dyn) -> optax.GradientTransformation:
    """Adam with optax's defaults at the run's learning rate."""
    return optax.adam(dyn["lr"])


def no_problems(config: Config) -> list[str]:
    return []


def unchanged(config: Config) -> dict:
    return dict(config)


@dataclasses.dataclass(frozen=True)
class Experiment:
    """A family of runs: declared fields and pure functions on one run (see the module doc)."""

    name: str
    doc: str
    fields: Mapping[str, Field]
    init: Callable[[jax.Array, Shape, Dyn], tuple[Any, Any]]
    evaluate: Callable[[Any, Any, Shape, Dyn], dict]
    metrics: tuple[str, ...] = ("loss", "accuracy")
    loss: Callable[[Any, Any, Shape, Dyn, jax.Array], jax.Array] | None = None
    optimizer: Callable[[Dyn], optax.GradientTransformation] = default_optimizer
    resolve: Callable[[Config], dict] = unchanged
    derived: Mapping[str, Field] = dataclasses.field(default_factory=dict)
    check: Callable[[Config], list[str]] = no_problems
    costs: Costs = Costs()
    reference: Reference | None = None
    same_problem_across: tuple[str, ...] = ()
    precondition: tuple[str, ...] = ()

    def __post_init__(self):
        clash = set(self.fields) & set(self.derived)
        if clash:
            raise ValueError(f"{self.name}: derived entries shadow fields: {sorted(clash)}")

    @property
    def trainable(self) -> bool:
        return self.loss is not None

    @property
    def kinds(self) -> dict[str, Field]:
        """Every entry of a resolved config with its declaration: fields and derived entries."""
        return {**self.fields, **self.derived}

    def failed_checks(self, metrics: Mapping[str, float]) -> list[str]:
        """The precondition checks that initialisation-time `metrics` fail (< 0.5; see `precondition`)."""
        return [c for c in self.precondition if metrics.get(c, 1.0) < 0.5]

    def complete(self, config: Config) -> dict:
        """The config with defaults filled in (fields must already be validated)."""
        full = {name: f.default for name, f in self.fields.items() if f.default is not REQUIRED}
        full.update(config)
        return full

    def effective(self, config: Config) -> dict:
        """The complete config as the program and the costs see it (`resolve` applied)."""
        return self.resolve(self.complete(config))

    def cost(self, which: str, config: Config) -> float:
        """params, bits, flops_per_step or temp_bytes of a resolved config; NaN when the experiment gives none."""
        function = getattr(self.costs, which)
        return float(function(config)) if function is not None else math.nan


def bits(count: float, alphabet: float) -> float:
    """Information needed to store `count` independent symbols of an `alphabet`-sized set."""
    return count * math.log2(alphabet) if count > 0 and alphabet > 1 else 0.0
