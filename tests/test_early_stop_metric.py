"""Early stopping on one metric, success judged on another (jaxmem.engine.program.stops, settings_of):
a run stopped, or kept at its best, on its test set is a selection on that set; stopped on a validation
set and judged by its final test value, it is not."""

from __future__ import annotations

import jax.numpy as jnp
import optax
import pytest

from helpers import run_program
from jaxmem.driver.settings import settings_of, succeeded
from jaxmem.engine.executor import Finished
from jaxmem.engine.program import Settings
from jaxmem.experiments.interface import Experiment, traced
from jaxmem.spec.sweep import SuccessRule, parse

STEPS, THRESHOLD = 6, 1e-2
LUCKY_STEP = 2  # the lucky run's test error dips below the threshold at this evaluation only


def evaluate(params, problem, shape, dyn) -> dict:
    """At step t (= params t): a run that never learns has validation and test error 0.5, but its test
    error dips to 0.005 at LUCKY_STEP (a finite test set's noise); a run that learns has both at 1e-3
    from step 3 on."""
    t, learns = jnp.round(params["t"]), dyn["learns"] == 1
    learned = learns & (t >= 3)
    val = jnp.where(learned, 1e-3, 0.5)
    test = jnp.where(learned, 1e-3, jnp.where(~learns & (t == LUCKY_STEP), 5e-3, 0.5))
    return {"val_error": val, "test_error": test}


LUCKY = Experiment(
    name="lucky_dip",
    doc="one step per unit of t; validation and test errors as `evaluate` says",
    fields={"learns": traced(bool, "whether the run learns (else only its test error dips once)")},
    init=lambda key, shape, dyn: ({"t": jnp.zeros(())}, {"unused": jnp.zeros(())}),
    evaluate=evaluate,
    metrics=("val_error", "test_error"),
    loss=lambda params, problem, shape, dyn, key: -params["t"],  # SGD at lr 1: t grows by one a step
    optimizer=lambda dyn: optax.sgd(dyn["lr"]),
)
ON_TEST = Settings(STEPS, 1, "test_error", THRESHOLD, THRESHOLD, higher_is_better=False)  # the old rule
ON_VALIDATION = ON_TEST._replace(stop_metric="val_error")


def verdicts(settings: Settings, counts: str) -> list[tuple[int, bool]]:
    """(steps run, success) of the run that never learns and of the one that does."""
    state = run_program(
        [{"learns": False}, {"learns": True}], None, 2, STEPS, [1.0, 1.0], exp=LUCKY, eval_every=1, settings=settings
    )
    rule = SuccessRule("test_error", "at_most", THRESHOLD, counts)
    out = []
    for i in range(2):
        final = {k: float(v[i]) for k, v in state.last.items()}
        f = Finished(None, settings.toward(float(state.best[i])), final, int(state.step[i]), -1, False, 0.0)
        out.append((int(state.step[i]), succeeded(rule, settings, f)))
    return out


def test_stopping_on_the_test_set_succeeds_by_selection_and_on_a_validation_set_does_not():
    lucky, learner = verdicts(ON_TEST, "best")
    assert lucky == (LUCKY_STEP, True)  # stopped at the dip and judged there: a selection on the test set
    assert learner == (3, True)
    lucky, learner = verdicts(ON_VALIDATION, "final")
    assert lucky == (STEPS, False)  # the dip stops nothing; the final test error (0.5) judges it
    assert learner == (3, True)  # stopped by its validation error; its test error there is 1e-3


ASSOC = {"experiment": "assoc_memory", "fixed": {"model": "mlp", "d": 8, "m": 8, "N": 8}}
MHA = {"experiment": "mha_teacher", "fixed": {"d": 4, "k": 2, "m_T": 1, "m_S": 1, "n": 8}}
ON_LOSS = {"train": {"early_stop": 0.1}, "success": {"metric": "loss", "at_most": 0.1}}
ON_VAL = {"train": {"early_stop": 1e-4, "metric": "val_error"}, "success": {"metric": "test_error", "at_most": 0.01}}


@pytest.mark.parametrize(
    "raw, stop_metric",
    [  # no train.metric: the success metric, as before (not train.metric's default, accuracy)
        ({**ASSOC, **ON_LOSS}, "loss"),
        ({**MHA, **ON_VAL}, "val_error"),
    ],
)
def test_early_stop_reads_train_metric_where_the_spec_names_one(raw, stop_metric):
    settings = settings_of(parse(raw, "t"))
    assert (settings.metric, settings.stop_metric) == (raw["success"]["metric"], stop_metric)
