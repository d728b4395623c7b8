"""The one-hidden-layer network of Eq. (4.1): H(W, x) = (1/K) Σ_j φ(w_jᵀx), φ the sigmoid, the second
layer fixed to 1/K; its cross-entropy (4.3) and the excess risk E_x KL(Bern(H(W*, x)) ‖ Bern(H(W, x)))
that the risk bounds (4.11), (4.12) control (spec C6). Logs are computed as log-sum-exps of
log-sigmoids, so they stay finite where H rounds to 0 or 1."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.scipy.special import logsumexp


def log_probs(w, x):
    """(log H, log(1 − H)) for W (d, K) and points x (..., d)."""
    z = x @ w
    k = jnp.log(w.shape[-1])
    return logsumexp(jax.nn.log_sigmoid(z), axis=-1) - k, logsumexp(jax.nn.log_sigmoid(-z), axis=-1) - k


def prob(w, x):
    """H(W, x) of (4.1)."""
    return jnp.mean(jax.nn.sigmoid(x @ w), axis=-1)


def cross_entropy(w, x, y):
    """ℓ(W; x, y) = −y log H − (1 − y) log(1 − H) per sample (4.3)."""
    log_h, log_1mh = log_probs(w, x)
    return -(y * log_h + (1.0 - y) * log_1mh)


def risks(w, w_star, x) -> tuple[jnp.ndarray, jnp.ndarray]:
    """Mean over points x of (the expected cross-entropy of W under y ~ Bern(H(W*, x)), the excess
    risk KL(Bern(H(W*, x)) ‖ Bern(H(W, x))))."""
    p = prob(w_star, x)
    log_h, log_1mh = log_probs(w, x)
    star_h, star_1mh = log_probs(w_star, x)
    ce = -(p * log_h + (1.0 - p) * log_1mh)
    kl = p * (star_h - log_h) + (1.0 - p) * (star_1mh - log_1mh)
    return jnp.mean(ce), jnp.mean(kl)
