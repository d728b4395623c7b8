"""The student: m_S full d×d heads (Θ_i, W_i) of Eq. (1), trained on the first n samples of a nested
training set, full batch (spec §5 "Student", "Losses").

Init (spec §5, §7.16): Θ entries N(0, (init_theta/d)²), W entries N(0, 1/d²), every head from its own
counters (distinct inits; equal inits never separate). Heads past m_S are zero and masked out of the
forward pass, so they get no gradient and a padded student equals the unpadded one.
"""

from __future__ import annotations

import jax.numpy as jnp

from jaxmem.experiments import draws
from jaxmem.experiments.chen_li24 import model


def init(key, m: int, d: int, m_S, init_theta) -> dict:
    """The student's parameters {theta, w}, each (m, d, d), zero past the m_S active heads."""
    g_theta, g_w = draws.normal_matrices(key, [(m, d, d), (m, d, d)])
    active = heads(m, m_S)
    return {"theta": jnp.where(active, init_theta / d * g_theta, 0.0), "w": jnp.where(active, g_w / d, 0.0)}


def heads(m: int, m_S):
    """(m, 1, 1) mask of the active heads."""
    return draws.active_mask(m, m_S)[:, None, None]


def forward(params, x, m_S):
    """The student's F̂(X) over its active heads."""
    w = jnp.where(heads(params["w"].shape[0], m_S), params["w"], 0.0)
    return model.mha(params["theta"], w, x)


def loss(params, problem, n, m_S):
    """(1/n) Σ_{j<n} ‖F̂(X_j) − Y_j‖_F² (spec §5 "Losses", unit weights on the first n samples)."""
    err, _ = model.sample_errors(forward(params, problem["x"], m_S), problem["y"])
    return jnp.sum(jnp.where(draws.active_mask(err.shape[0], n), err, 0.0)) / n


def errors(params, problem, n, m_S) -> dict:
    """Training loss; relative test and train errors ε_rel (the threshold metric) and the paper's
    absolute test error E‖F̂ − F‖_F² (spec §7.3)."""
    pred_test = forward(params, problem["x_test"], m_S)
    err_test, _ = model.sample_errors(pred_test, problem["y_test"])
    train_weights = draws.active_mask(problem["x"].shape[0], n).astype(jnp.float32)
    return {
        "loss": loss(params, problem, n, m_S),
        "test_error": model.relative_error(pred_test, problem["y_test"], 1.0),
        "test_error_abs": jnp.mean(err_test),
        "train_error": model.relative_error(forward(params, problem["x"], m_S), problem["y"], train_weights),
    }
