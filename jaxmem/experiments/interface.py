"""The experiment interface: a handful of pure functions on ONE run.

An experiment knows nothing about vmap, jit, devices or files (DESIGN.md). The engine pads the
run's sizes to its bucket's static `shape`, passes everything that varies inside a bucket as the
traced dict `dyn` (true sizes, learning rate, ...), and vmaps, scans and shards the functions below.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable, Mapping

import jax
import optax

REQUIRED = object()

Config = Mapping[str, Any]
Shape = Mapping[str, Any]
Dyn = Mapping[str, jax.Array]


@dataclasses.dataclass(frozen=True)
class Field:
    """One configuration field of an experiment, with its validation rule."""

    type: type
    doc: str
    default: Any = REQUIRED
    choices: tuple = ()
    minimum: float | None = None

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
        return None


@dataclasses.dataclass(frozen=True)
class Experiment:
    """A family of runs, as pure functions.

    shape(config, pad) -> static padded sizes (bucket key); `pad(n, field)` rounds the size of `field` up
        its padding ladder (the searched variable gets a finer one).
    dynamic(config) -> per-run scalars traced inside the program (true sizes, options as numbers).
    init(key, shape, dyn) -> (params, problem): trainable parameters and the fixed problem data.
    loss(params, problem, shape, dyn, key) -> scalar training loss; `key` is this step's own key, for
        tasks that sample a fresh batch inside the compiled step (full-batch losses ignore it).
    evaluate(params, problem, shape, dyn) -> dict of scalar metrics.
    optimizer(dyn) -> optax transformation; dyn["lr"] is the run's learning rate.
    check(config) -> list of problems that make the config impossible (skipped with a message).
    num_params / info_bits / flops_per_step(config) -> numbers for reports and planning.

    Optional attributes:
    same_problem_across: config fields that leave the problem `init` draws unchanged. Runs differing
        only in them get the same key (same instance, same initialisation: an optimizer comparison),
        and a searched size whose draws are shape-stable gives nested instances along the search.
    host_check: (config, seed, point, variable, value) -> dict, an independent float64 check of one
        run's problem on the host (by well-kept solvers), whose keys that are also metrics are set
        against the engine's values in the report (`[report] references = true`).
    host_figure: (path, config, seed, point, variable, value) -> path, a picture of one run's problem
        drawn on the host, shown with the reference checks.
    precondition: 0/1 metrics evaluated at initialisation; a run whose problem fails one (< 0.5) is
        rejected: never trained, recorded with 0 steps and named by the driver as a bad instance.
    """

    name: str
    doc: str
    fields: Mapping[str, Field]
    shape: Callable[[Config, Callable[[int, str], int]], dict]
    dynamic: Callable[[Config], dict]
    init: Callable[[jax.Array, Shape, Dyn], tuple[Any, Any]]
    loss: Callable[[Any, Any, Shape, Dyn, jax.Array], jax.Array]
    evaluate: Callable[[Any, Any, Shape, Dyn], dict]
    optimizer: Callable[[Dyn], optax.GradientTransformation]
    check: Callable[[Config], list[str]]
    num_params: Callable[[Config], float]
    info_bits: Callable[[Config], float]
    flops_per_step: Callable[[Config], float]
    metrics: tuple[str, ...] = ("loss", "accuracy")
    same_problem_across: tuple[str, ...] = ()
    precondition: tuple[str, ...] = ()
    host_check: Callable[..., dict] | None = None
    host_figure: Callable[..., Any] | None = None

    def failed_checks(self, metrics: Mapping[str, float]) -> list[str]:
        """The precondition checks that initialisation-time `metrics` fail (< 0.5; see `precondition`)."""
        return [c for c in self.precondition if metrics.get(c, 1.0) < 0.5]

    def complete(self, config: Config) -> dict:
        """The config with defaults filled in (fields must already be validated)."""
        full = {name: f.default for name, f in self.fields.items() if f.default is not REQUIRED}
        full.update(config)
        return full


FUNCTIONS = (
    "shape",
    "dynamic",
    "init",
    "loss",
    "evaluate",
    "optimizer",
    "check",
    "num_params",
    "info_bits",
    "flops_per_step",
)


def experiment_from(namespace: Mapping[str, Any], **description) -> Experiment:
    """The Experiment made of a module's functions of the standard names (`namespace` = its globals())
    and its `description` (name, doc, fields, metrics)."""
    return Experiment(**{name: namespace[name] for name in FUNCTIONS}, **description)


def bits(count: float, alphabet: float) -> float:
    """Information needed to store `count` independent symbols of an `alphabet`-sized set."""
    return count * math.log2(alphabet) if count > 0 and alphabet > 1 else 0.0
