"""A sweep's training settings as the engine's programs read them, and the success rule applied to a
finished run."""

from __future__ import annotations

import math

from jaxmem.engine.executor import Finished
from jaxmem.engine.program import Settings, log_schedule
from jaxmem.experiments.registry import get as get_experiment
from jaxmem.spec.sweep import SweepSpec

HISTORY = 128  # evaluations a segment records per slot when trajectories are on


def settings_of(spec: SweepSpec) -> Settings:
    """The program's training settings: the success rule's metric and direction (a run without one
    never stops early and never succeeds), its threshold for steps_to_threshold and giving up,
    `train.early_stop` on the metric `stop_metric` names, `train.give_up`."""
    train, rule = spec.train, spec.success
    higher = rule is None or rule.direction == "at_least"
    never = math.inf if higher else -math.inf
    metric = rule.metric if rule else train.metric
    return Settings(
        steps=train.steps,
        eval_every=train.eval_every,
        metric=metric,
        hit_threshold=rule.threshold if rule else never,
        stop_threshold=train.early_stop if train.early_stop is not None else never,
        stop_metric=stop_metric(spec, metric),
        history=HISTORY if spec.engine.record_trajectory else 0,
        integrator=train.integrator,
        rtol=train.rtol,
        atol=train.atol,
        higher_is_better=higher,
        give_up=train.give_up,
        give_up_pace=train.give_up_pace,
        eval_steps=log_schedule(train.steps, train.eval_points) if train.eval_schedule == "log" else (),
        final_eval=final_eval_values(spec),
        matmul_precision=spec.engine.matmul_precision,
    )


def stop_metric(spec: SweepSpec, judged: str) -> str:
    """The metric `train.early_stop` reads: `train.metric` where the spec gives one, else the judged
    metric. A [success] metric other than train.metric thus judges runs on data that did not stop them
    (e.g. stop on a validation error, succeed on the final test error)."""
    return spec.train.metric if "metric" in spec.resolved.get("train", {}) else judged


def final_eval_values(spec: SweepSpec) -> tuple[tuple[str, tuple], ...]:
    """The test-time axes with the values the program reads (a choice's index, a bool as 0/1)."""
    fields = get_experiment(spec.experiment).fields
    return tuple((name, tuple(fields[name].traced_value(v) for v in values)) for name, values in spec.final_eval)


def succeeded(rule, settings: Settings, f: Finished) -> bool:
    """Whether a finished run meets the success rule: its best or its final evaluation reaches the
    threshold in the rule's direction."""
    if rule is None:
        return False
    value = f.best if rule.counts == "best" else f.final.get(rule.metric, math.nan)
    return bool(settings.toward(value) >= settings.toward(rule.threshold))
