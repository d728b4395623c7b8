"""A user-defined experiment: a two-layer ReLU student f(x) = Σ_j a_j relu(w_j·x) learning a random
two-layer ReLU teacher of width k from n Gaussian samples. How many samples does it need?

    jaxmem run examples/relu_teacher.toml --out results/relu_teacher
"""

import jax
import jax.numpy as jnp

from jaxmem.experiments import draws
from jaxmem.experiments.interface import Costs, Experiment, size, static

FIELDS = {
    "d": size("input dimension"),
    "m": size("student width"),
    "k": size("teacher width"),
    "n": size("training samples"),
    "n_test": static(int, "test samples", default=1024, minimum=1),
}


def network(w, a, x):
    return jax.nn.relu(x @ w.T) @ a


def init(key, shape, dyn):
    """Teacher, data and student; every draw is shape-stable and zero outside the true sizes."""
    d, m, k, n, t = shape["d"], shape["m"], shape["k"], shape["n"], shape["n_test"]
    tw, w, a, x, x_test = draws.normal_matrices(key, [(k, d), (m, d), (1, m), (n, d), (t, d)])
    teacher_w = jnp.where(draws.block_mask((k, d), dyn["k"], dyn["d"]), tw, 0.0) / jnp.sqrt(dyn["d"])
    teacher_a = jnp.where(draws.active_mask(k, dyn["k"]), 1.0 / dyn["k"], 0.0)
    x = jnp.where(draws.block_mask((n, d), dyn["n"], dyn["d"]), x, 0.0)
    x_test = jnp.where(draws.block_mask((t, d), t, dyn["d"]), x_test, 0.0)
    problem = {"x": x, "y": network(teacher_w, teacher_a, x), "x_test": x_test}
    problem["y_test"] = network(teacher_w, teacher_a, x_test)
    params = {
        "w": jnp.where(draws.block_mask((m, d), dyn["m"], dyn["d"]), w, 0.0) / jnp.sqrt(dyn["d"]),
        "a": jnp.where(draws.active_mask(m, dyn["m"]), a[0], 0.0) / jnp.sqrt(dyn["m"]),
    }
    return params, problem


def loss(params, problem, shape, dyn, key):
    """Half the mean squared error over the n true training samples (full batch)."""
    err = network(params["w"], params["a"], problem["x"]) - problem["y"]
    return jnp.sum(jnp.where(draws.active_mask(shape["n"], dyn["n"]), err**2, 0.0)) / (2 * dyn["n"])


def evaluate(params, problem, shape, dyn):
    """Training loss, and the test error relative to the teacher's output power."""
    err = network(params["w"], params["a"], problem["x_test"]) - problem["y_test"]
    test_error = jnp.mean(err**2) / jnp.mean(problem["y_test"] ** 2)
    return {"loss": loss(params, problem, shape, dyn, None), "test_error": test_error}


EXPERIMENT = Experiment(
    name="relu_teacher",
    doc="Two-layer ReLU student learning a random ReLU teacher from n samples",
    fields=FIELDS,
    init=init,
    loss=loss,
    evaluate=evaluate,
    metrics=("loss", "test_error"),
    costs=Costs(params=lambda c: c["m"] * (c["d"] + 1), flops_per_step=lambda c: 6.0 * c["n"] * c["m"] * c["d"]),
)
