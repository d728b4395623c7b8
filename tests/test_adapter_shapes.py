"""A shape mistake in a module-built experiment is refused before anything compiles: a prediction of shape
(N, 1) against labels of shape (N,) (its loss and metric broadcast to N x N), a loss returning an N x N matrix,
a metric sliced to a fixed length, in linen, nnx and equinox alike; an error raised in the user's module shows
the user's own line. Each case fails at construction, while the adapter learns the layout (jax.eval_shape)."""

from __future__ import annotations

import importlib
import re
import sys

import equinox as eqx
import flax.linen as nn
import jax
import jax.numpy as jnp
import pytest
from flax import nnx

from jaxmem.cli.main import main
from jaxmem.experiments import draws, from_equinox, from_flax
from jaxmem.experiments.adapters import padding_check, pipeline
from jaxmem.experiments.interface import size
from jaxmem.experiments.user_errors import ExperimentError

FIELDS = {"d": size("input dimension"), "N": size("examples")}


class LinenRegressor(nn.Module):
    @nn.compact
    def __call__(self, x):
        return nn.Dense(1)(x)


class NnxRegressor(nnx.Module):
    def __init__(self, d: int, rngs: nnx.Rngs):
        self.dense = nnx.Linear(d, 1, rngs=rngs)

    def __call__(self, x):
        return self.dense(x)


class EquinoxRegressor(eqx.Module):
    dense: eqx.nn.Linear

    def __init__(self, d, key):
        self.dense = eqx.nn.Linear(d, 1, key=key)

    def __call__(self, x):
        assert x.ndim == 1
        return self.dense(x)


def sample(key, shape, dyn):
    x = jnp.where(
        draws.block_mask((shape["N"], shape["d"]), dyn["N"], dyn["d"]),
        jax.random.normal(key, (shape["N"], shape["d"])),
        0.0,
    )
    return {"x": x, "y": x.sum(axis=1)}


def linen_forward(model, batch, dyn):
    return model(batch["x"])


def nnx_forward(model, batch, dyn):
    return model(batch["x"])


def equinox_forward(model, batch, dyn):
    return jax.vmap(model)(batch["x"])


def half_squared_error(prediction, batch, dyn):
    return 0.5 * (prediction - batch["y"]) ** 2


def squared_error(prediction, batch, dyn):
    return (prediction - batch["y"]) ** 2


def pairwise_loss(prediction, batch, dyn):
    return 0.5 * (prediction[:, 0][:, None] - batch["y"]) ** 2


def first_two_errors(prediction, batch, dyn):
    return ((prediction[:, 0] - batch["y"]) ** 2)[:2]


def with_prediction(function):
    """`function` of the regressors' prediction of shape (N,): the (N, 1) one's last axis dropped."""

    def per_example(prediction, batch, dyn):
        return function(prediction[:, 0], batch, dyn)

    return per_example


def experiment(framework: str, loss, metric):
    """The tiny regression of `framework`'s module, (N, 1) predictions, with `loss` and the metric 'error'."""
    functions = (sample, loss, {"error": metric}, FIELDS)
    if framework == "linen":
        return from_flax(lambda shape: LinenRegressor(), *functions, name="tiny", forward=linen_forward)
    if framework == "nnx":
        module = lambda shape, rngs: NnxRegressor(shape["d"], rngs)  # noqa: E731
        return from_flax(module, *functions, name="tiny", forward=nnx_forward)
    return from_equinox(
        lambda shape, key: EquinoxRegressor(shape["d"], key), *functions, name="tiny", forward=equinox_forward
    )


MISTAKES = {  # mistake: (loss, metric, what the message says)
    "prediction_n_by_1": (
        half_squared_error,
        squared_error,
        [
            r"experiment tiny \(test_adapter_shapes:half_squared_error\): the loss returned an array of shape \(3, 3\)",
            r"\(test_adapter_shapes:squared_error\): metric 'error' returned an array of shape \(3, 3\)",
            r"perhaps prediction of shape \(3, 1\) met batch.y of \(3,\): they broadcast to \(3, 3\)",
        ],
    ),
    "matrix_loss": (
        pairwise_loss,
        with_prediction(squared_error),
        [r"\(test_adapter_shapes:pairwise_loss\): the loss returned an array of shape \(3, 3\)"],
    ),
    "sliced_metric": (
        with_prediction(half_squared_error),
        first_two_errors,
        [
            r"\(test_adapter_shapes:first_two_errors\): metric 'error' returned an array of shape \(2,\), whose axis "
            r"stays 2 long whatever the sizes"
        ],
    ),
}


@pytest.fixture
def compiles(monkeypatch):
    """The programs the adapter compiles (its layout's initial values, its padding check), recorded."""
    compiled = []

    def recorded(fn, *args):
        compiled.append(fn)
        raise RuntimeError("the adapter compiled a program")

    monkeypatch.setattr(pipeline, "run_once", recorded)
    monkeypatch.setattr(padding_check, "run_once", recorded)
    return compiled


@pytest.mark.parametrize("framework", ["linen", "nnx", "equinox"])
@pytest.mark.parametrize("mistake", MISTAKES)
def test_a_shape_mistake_is_refused_before_anything_compiles(framework, mistake, compiles):
    loss, metric, says = MISTAKES[mistake]
    with pytest.raises(ExperimentError) as refused:
        experiment(framework, loss, metric)
    message = str(refused.value)
    assert all(re.search(pattern, message) for pattern in says), message
    assert "one value per example, shape (3,) (N, the leading axis of batch.x, batch.y, prediction)" in message
    assert "d = 3, N = 3 (the adapter's own small probe sizes" in message
    assert f'File "{__file__}"' in message  # the user's function, where it is defined
    assert compiles == []


def test_the_probe_sizes_a_user_gives_are_told_apart(compiles):
    with pytest.raises(ExperimentError, match=r"The shapes are at d = 3 \(the adapter's .*\), N = 4 \(from `probe`\)"):
        from_flax(
            lambda shape: LinenRegressor(),
            sample,
            half_squared_error,
            {},
            FIELDS,
            name="tiny",
            forward=linen_forward,
            probe={"N": 4},
        )


ASSERTING_MODULE = """
import equinox as eqx


class Regressor(eqx.Module):
    dense: eqx.nn.Linear

    def __init__(self, d, key):
        self.dense = eqx.nn.Linear(d, "scalar", key=key)

    def __call__(self, x):
        assert x.ndim == 1
        return self.dense(x)
"""


def test_an_assertion_in_the_users_module_shows_the_users_line(tmp_path, monkeypatch, compiles):
    """An equinox module called on the whole batch (no vmap) fails its own `assert x.ndim == 1`, which has
    no message (the module is the user's, not rewritten by pytest)."""
    (tmp_path / "asserting_regressor.py").write_text(ASSERTING_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    regressor = importlib.import_module("asserting_regressor").Regressor
    with pytest.raises(ExperimentError) as refused:
        from_equinox(
            lambda shape, key: regressor(shape["d"], key),
            sample,
            half_squared_error,
            {},
            FIELDS,
            name="tiny",
            forward=lambda model, batch, dyn: model(batch["x"]),
        )
    sys.modules.pop("asserting_regressor")
    first, *frames = str(refused.value).splitlines()
    assert first.startswith("experiment tiny: its pipeline at d = 3, N = 3 (") and first.endswith(
        "raised AssertionError"
    )
    lines = [line.strip() for line in frames]
    assert f'File "{tmp_path / "asserting_regressor.py"}", line 12, in __call__' in lines
    assert lines[lines.index("assert x.ndim == 1") - 1].endswith("in __call__")
    assert compiles == []


USER_MODULE = """
import flax.linen as nn

from test_adapter_shapes import FIELDS, linen_forward, sample
from jaxmem.experiments import from_flax


class Regressor(nn.Module):
    @nn.compact
    def __call__(self, x):
        return nn.Dense(1)(x)


def loss(prediction, batch, dyn):
    return (prediction - batch["y"]) ** 2


EXPERIMENT = from_flax(lambda shape: Regressor(), sample, loss, {}, FIELDS, name="tiny", forward=linen_forward)
"""

SPEC = """
experiment = "user_regressor:EXPERIMENT"
seeds = [0]
[fixed]
d = 4
N = 8
[train]
steps = 2
eval_every = 1
learning_rates = [0.01]
metric = "loss"
"""


def test_jaxmem_run_exits_2_naming_the_users_function(tmp_path, capsys, compiles):
    (tmp_path / "user_regressor.py").write_text(USER_MODULE)
    (tmp_path / "sweep.toml").write_text(SPEC)
    try:
        assert (
            main(["run", str(tmp_path / "sweep.toml"), "--out", str(tmp_path / "out"), "--quiet", "--no-compile-cache"])
            == 2
        )
    finally:
        sys.modules.pop("user_regressor", None)
    error = capsys.readouterr().err
    assert "jaxmem: error: experiment tiny (user_regressor:loss): the loss returned an array of shape (3, 3)" in error
    assert f'File "{tmp_path / "user_regressor.py"}", line 14, in loss' in error
    assert compiles == []
