"""The multi-head attention layer of Eq. (1): F(X) = Σ_i softmax(X Θ_i Xᵀ) X W_i, row-wise softmax, no
temperature, mask, residual or bias (spec §1.1, §7.1–7.2); and its errors (spec §7.3)."""

from __future__ import annotations

import jax
import jax.numpy as jnp


def patterns(theta, x):
    """softmax(X Θ_i Xᵀ) per head: theta (m, d, d), x (B, k, d) -> (B, m, k, k), rows sum to one."""
    logits = jnp.einsum("bkd,mde,ble->bmkl", x, theta, x)
    return jax.nn.softmax(logits, axis=-1)


def mha(theta, w, x):
    """Eq. (1): Σ_i softmax(X Θ_i Xᵀ) X W_i for a batch x (B, k, d) -> (B, k, d)."""
    attended = jnp.einsum("bmkl,bld->bmkd", patterns(theta, x), x)
    return jnp.einsum("bmkd,mde->bke", attended, w)


def sample_errors(pred, target):
    """‖F̂(X_j) − F(X_j)‖_F² and ‖F(X_j)‖_F² per sample."""
    return jnp.sum((pred - target) ** 2, axis=(1, 2)), jnp.sum(target**2, axis=(1, 2))


def relative_error(pred, target, weights):
    """ε_rel = Σ_j w_j ‖F̂ − F‖_F² / Σ_j w_j ‖F‖_F² (spec §5 "Losses"; the threshold metric)."""
    err, power = sample_errors(pred, target)
    return jnp.sum(weights * err) / jnp.maximum(jnp.sum(weights * power), 1e-30)
