"""A jaxmem Experiment from a framework's module, a data sampler, a per-example loss and metrics: the part
of `from_flax` and `from_equinox` that knows no framework.

Every size field is padded like a shipped family's (jaxmem.experiments.adapters.pipeline) once the module
passes, at the probe config, the padded = unpadded check (jaxmem.experiments.adapters.padding_check) and
the layout's rules (jaxmem.experiments.adapters.layout). A size it fails in runs as `static` instead, one
program per value, with an UnpaddableWarning that names the size and what differed.
"""

from __future__ import annotations

import dataclasses
import warnings
from typing import Any, Callable, Mapping

from jaxmem.experiments.adapters import padding_check
from jaxmem.experiments.adapters.pipeline import Binding, Pipeline, Unpaddable
from jaxmem.experiments.interface import REQUIRED, SIZE, STATIC, TRACED, Experiment, Field
from jaxmem.experiments.user_errors import ExperimentError

PROBE_SIZE = 3  # a size's probe value unless `probe` gives one


class UnpaddableWarning(UserWarning):
    """A size of a module-built experiment runs as static: padding it would change the runs."""


def call_on_x(model, batch, dyn):
    """The default `forward`: the module applied to the batch's "x"."""
    return model(batch["x"])


def module_experiment(
    binding: Binding,
    sample: Callable,
    loss: Callable,
    metrics: Mapping[str, Callable] | None,
    fields: Mapping[str, Field],
    *,
    name: str,
    doc: str = "",
    logits: bool = False,
    probe: Mapping[str, Any] | None = None,
    **options,
) -> Experiment:
    """The Experiment of a module-built pipeline (see `from_flax` for the arguments); `options` are the
    Experiment's optional parts (optimizer, resolve, derived, check, costs, ...)."""
    metrics = dict(metrics or {})
    if "loss" in metrics:
        raise ExperimentError(f"experiment {name}: 'loss' is the adapter's own metric (the mean loss); rename yours")
    declared = Experiment(name, doc, fields, _unset, _unset, ("loss", *metrics), **options)
    config = probe_config(declared, probe)
    reasons: dict[str, str] = {}
    while True:
        exp, pipeline = _assembled(declared, binding, (sample, loss, metrics), logits, config, probe, tuple(reasons))
        statics = {n: config[n] for n, f in exp.kinds.items() if f.kind == STATIC}
        try:
            pipeline.learned(statics)
            found = padding_check.mismatches(exp, statics, _sizes(exp, config), _traced(exp, config))
        except Unpaddable as err:
            found = err.reasons
        if not found:
            break
        reasons.update(found)
    for size, why in reasons.items():
        message = (
            f"experiment {name}: {size} cannot be padded exactly ({why}); it runs as static, one program per value"
        )
        warnings.warn(UnpaddableWarning(message), stacklevel=3)
    return exp


def _unset(*args):
    raise AssertionError("replaced by the adapter's pipeline")


def probe_config(exp: Experiment, probe: Mapping[str, Any] | None) -> dict:
    """The effective config the adapter checks padding at: every size PROBE_SIZE, the fields' defaults, and
    what `probe` gives."""
    given = {n: PROBE_SIZE for n, f in exp.fields.items() if f.kind == SIZE} | dict(probe or {})
    missing = [n for n, f in exp.fields.items() if f.default is REQUIRED and n not in given]
    if missing:
        raise ExperimentError(
            f"experiment {exp.name}: give `probe` values for {', '.join(missing)} (a small config at which the "
            "adapter checks that padding changes nothing)"
        )
    bad = [p for n, f in exp.fields.items() if n in given and (p := f.check(n, given[n]))]
    config = exp.effective(given)
    bad += exp.check(config) + [
        f"{n} = {config[n]} (a probe size is at least 1)" for n in _sizes(exp, config) if config[n] < 1
    ]
    if bad:
        raise ExperimentError(f"experiment {exp.name}: the probe config is impossible: {'; '.join(bad)}")
    return config


def _sizes(exp: Experiment, config: Mapping) -> dict[str, int]:
    return {n: config[n] for n, f in exp.kinds.items() if f.kind == SIZE}


def _traced(exp: Experiment, config: Mapping) -> dict:
    return {n: f.traced_value(config[n]) for n, f in exp.kinds.items() if f.kind == TRACED}


def _as_static(declared: Mapping[str, Field], names: tuple[str, ...]) -> dict[str, Field]:
    return {n: dataclasses.replace(f, kind=STATIC, ladder=None) if n in names else f for n, f in declared.items()}


def _assembled(declared, binding, functions, logits, config, probe, static_sizes):
    """The Experiment with the sizes `static_sizes` run static, and its pipeline of the user's `functions`
    (sample, loss, metrics)."""
    fields, derived = _as_static(declared.fields, static_sizes), _as_static(declared.derived, static_sizes)
    exp = dataclasses.replace(declared, fields=fields, derived=derived)
    pipeline = Pipeline(
        declared.name,
        binding,
        *functions,
        logits,
        sizes=tuple(_sizes(exp, config)),
        static_sizes=static_sizes,
        probe={**_traced(exp, config), **{n: config[n] for n in declared.kinds if declared.kinds[n].kind == SIZE}},
        probe_given=tuple(probe or {}),
    )
    return dataclasses.replace(exp, init=pipeline.init, loss=pipeline.loss, evaluate=pipeline.evaluate), pipeline
