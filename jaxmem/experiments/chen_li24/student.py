"""The student: m_S full d×d heads (Θ_i, W_i) of Eq. (1), trained on the first n samples of a nested
training set, full batch (spec §5 "Student", "Losses").

Init (spec §5, §7.16): Θ entries N(0, (init_theta/d)²), W entries N(0, (init_w/d)²) (init_w = 1 in the
spec), every head from its own counters (distinct inits; equal inits never separate). Heads past m_S are
zero and masked out of the forward pass, so they get no gradient and a padded student equals the
unpadded one. `specialisation` compares the student's heads with the teacher's (E2 head recovery, E7).
"""

from __future__ import annotations

import jax.numpy as jnp

from jaxmem.experiments import draws
from jaxmem.experiments.chen_li24 import model


def init(key, m: int, d: int, m_S, init_theta, init_w=1.0) -> dict:
    """The student's parameters {theta, w}, each (m, d, d), zero past the m_S active heads."""
    g_theta, g_w = draws.normal_matrices(key, [(m, d, d), (m, d, d)])
    active = heads(m, m_S)
    return {"theta": jnp.where(active, init_theta / d * g_theta, 0.0), "w": jnp.where(active, init_w / d * g_w, 0.0)}


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
    """Training loss; relative validation, test and train errors ε_rel and the paper's absolute test
    error E‖F̂ − F‖_F² (spec §7.3). The validation and test sets are independent draws: a sweep stops
    early on `val_error` and judges success on `test_error`, so no verdict selects on its own test set."""
    pred_test = forward(params, problem["x_test"], m_S)
    err_test, _ = model.sample_errors(pred_test, problem["y_test"])
    train_weights = draws.active_mask(problem["x"].shape[0], n).astype(jnp.float32)
    return {
        "loss": loss(params, problem, n, m_S),
        "val_error": model.relative_error(forward(params, problem["x_val"], m_S), problem["y_val"], 1.0),
        "test_error": model.relative_error(pred_test, problem["y_test"], 1.0),
        "test_error_abs": jnp.mean(err_test),
        "train_error": model.relative_error(forward(params, problem["x"], m_S), problem["y"], train_weights),
    }


def head_errors(theta, teacher_theta, m_S, m_T):
    """Per teacher head i, the best-matching student head's ‖Θ̂_j − Θ_i‖_F / ‖Θ_i‖_F (min over the active j),
    (m_T padded,); NaN past the m_T active teacher heads. A best match, not the one-to-one Hungarian
    match of spec §7.18: it is 0 exactly when every teacher head has a copy among the student's."""
    gap = jnp.linalg.norm(theta[None, :] - teacher_theta[:, None], axis=(-2, -1))
    gap = jnp.where(draws.active_mask(theta.shape[0], m_S)[None, :], gap, jnp.inf)
    best = jnp.min(gap, axis=1) / jnp.maximum(jnp.linalg.norm(teacher_theta, axis=(-2, -1)), 1e-30)
    return jnp.where(draws.active_mask(teacher_theta.shape[0], m_T), best, jnp.nan)


def specialisation(theta, teacher_theta, m_S, m_T) -> dict:
    """Head specialisation (spec §5 E2 "head-recovery", E7 "per-head match error vs time"): the smallest,
    mean and largest of `head_errors` over the teacher heads: the first head found, all heads on
    average, the last head found."""
    e = head_errors(theta, teacher_theta, m_S, m_T)
    return {"head_error_min": jnp.nanmin(e), "head_error_mean": jnp.nanmean(e), "head_error_max": jnp.nanmax(e)}
