"""The ReLU teacher-student of examples/relu_teacher.py with the student written as an equinox module
f(x) = a·relu(W x) (equinox's default initialisation) and run through `from_equinox`: the module, a data
sampler and a per-example loss are all it takes; the adapter pads and masks.

    jaxmem run examples/relu_teacher_equinox.toml --preset quick --out results/relu_teacher_equinox
"""

import equinox as eqx
import jax
import jax.numpy as jnp

from jaxmem.experiments import draws, from_equinox
from jaxmem.experiments.interface import Costs, size, static

FIELDS = {
    "d": size("input dimension"),
    "m": size("student width"),
    "k": size("teacher width"),
    "n": size("training samples"),
    "n_test": static(int, "test samples", default=1024, minimum=1),
}


class Student(eqx.Module):
    hidden: eqx.nn.Linear
    out: eqx.nn.Linear

    def __init__(self, d, m, key):
        hidden_key, out_key = jax.random.split(key)
        self.hidden = eqx.nn.Linear(d, m, use_bias=False, key=hidden_key)
        self.out = eqx.nn.Linear(m, "scalar", use_bias=False, key=out_key)

    def __call__(self, x):
        return self.out(jax.nn.relu(self.hidden(x)))


def module(shape, key):
    return Student(shape["d"], shape["m"], key)


def sample(key, shape, dyn):
    """A random width-k ReLU teacher, n training and n_test test inputs (Gaussian) and its outputs. The
    draws are shape-stable; what is derived from them (the teacher's outputs) masks past the true sizes."""
    d, k, n, t = shape["d"], shape["k"], shape["n"], shape["n_test"]
    teacher_key, x_key, test_key = jax.random.split(key, 3)
    w = jnp.where(draws.block_mask((k, d), dyn["k"], dyn["d"]), jax.random.normal(teacher_key, (k, d)), 0.0)
    a = jnp.where(draws.active_mask(k, dyn["k"]), 1.0 / dyn["k"], 0.0)
    x = jnp.where(draws.block_mask((n, d), dyn["n"], dyn["d"]), jax.random.normal(x_key, (n, d)), 0.0)
    x_test = jnp.where(draws.block_mask((t, d), t, dyn["d"]), jax.random.normal(test_key, (t, d)), 0.0)

    def teacher(inputs):
        return jax.nn.relu(inputs @ w.T / jnp.sqrt(dyn["d"])) @ a

    return {"x": x, "y": teacher(x), "x_test": x_test, "y_test": teacher(x_test)}


def forward(model, batch, dyn):
    return {"train": jax.vmap(model)(batch["x"]), "test": jax.vmap(model)(batch["x_test"])}


def half_squared_error(prediction, batch, dyn):
    return 0.5 * (prediction["train"] - batch["y"]) ** 2


def test_error(prediction, batch, dyn):
    """Squared test error relative to the teacher's output power (its mean is the relative test error)."""
    return (prediction["test"] - batch["y_test"]) ** 2 / jnp.mean(batch["y_test"] ** 2)


EXPERIMENT = from_equinox(
    module,
    sample,
    half_squared_error,
    {"test_error": test_error},
    FIELDS,
    name="relu_teacher_equinox",
    doc="Two-layer ReLU student (an equinox module) learning a random ReLU teacher from n samples",
    forward=forward,
    costs=Costs(params=lambda c: c["m"] * (c["d"] + 1), flops_per_step=lambda c: 6.0 * c["n"] * c["m"] * c["d"]),
)
