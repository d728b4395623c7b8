"""The H-head attention classifier of Eq. (2) and its logistic loss (spec 002 §1.2–§1.4).

One head: Φ(X; W, U) = ⟨U, softmax(X W Xᵀ) X⟩ (Eq. 1; row-wise softmax, no temperature). The heads are
stored as G groups of identical heads with multiplicities `counts`:

    Φ̃(X) = H^{-c} Σ_g counts_g Φ(X; W_g, U_g)      (Eq. 2 with c = 1/2; §5.3's 1/H^c for other c)

The full model is G = H heads of multiplicity 1 (padded heads: multiplicity 0, so they get exactly zero
gradient and stay at zero). The exact reduction (§1.9) is G = 1 (or the two sign groups of the first-step
init) with multiplicity H: every head of a group stays identical, and `per_head` makes the gradient of a
group's parameters the gradient of ONE of its heads, so every optimiser (GD, momentum, Adam with its ε)
runs on exactly the per-head numbers of the full model.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp


def real(x) -> jax.Array:
    """`x` as the default float (float64 where x64 is enabled, float32 otherwise)."""
    return jnp.asarray(x, jax.dtypes.canonicalize_dtype(jnp.float64))


def attention(W, X) -> jax.Array:
    """softmax(X W_g Xᵀ) row-wise: W (G, d, d), X (n, T, d) -> (n, G, T, T) (query t, key t')."""
    return jax.nn.softmax(jnp.einsum("itd,gde,ise->igts", X, W, X), axis=-1)


def heads(params, X) -> tuple[jax.Array, jax.Array]:
    """Per-group outputs Φ(X_i; W_g, U_g) (n, G) and attention maps (n, G, T, T)."""
    A = attention(params["W"], X)
    return jnp.einsum("gtd,igts,isd->ig", params["U"], A, X), A


def output(params, X, counts, scale) -> jax.Array:
    """Φ̃(X_i) (n,): Eq. (2) with the groups' multiplicities and the 1/H^c output scale."""
    return scale * heads(params, X)[0] @ counts


def empirical_loss(params, X, y, weights, counts, scale) -> jax.Array:
    """L̂ = Σ_i w_i ℓ(y_i Φ̃(X_i)), ℓ(z) = log(1 + e^{−z}) (§1.4); w_i = 1/n on the true samples."""
    return jnp.sum(weights * jax.nn.softplus(-y * output(params, X, counts, scale)))


@jax.custom_vjp
def scale_gradient(x, factor):
    """The identity whose gradient is multiplied by `factor` (broadcast over the leading group axis)."""
    return x


def _forward(x, factor):
    return x, factor


def _backward(factor, g):
    return g * factor.reshape(factor.shape + (1,) * (g.ndim - factor.ndim)), jnp.zeros_like(factor)


scale_gradient.defvjp(_forward, _backward)


def per_head(params, counts):
    """Parameters whose gradient is one head's: ∂L̂/∂θ_g / counts_g (§1.9: at a point where the
    counts_g heads of group g are equal, the gradient of any one of them)."""
    factor = 1.0 / jnp.maximum(counts, 1.0)
    return jax.tree.map(lambda p: scale_gradient(p, factor), params)


def norms(params, counts) -> dict:
    """‖W̃‖, ‖Ũ‖, ‖θ̃‖ of the full H-head parameters, and max_h ‖θ_h‖ (the ‖θ̃‖_{2,∞} of §1.1)."""
    w2 = jnp.sum(params["W"] ** 2, axis=(1, 2))
    u2 = jnp.sum(params["U"] ** 2, axis=(1, 2))
    live = counts > 0
    return {
        "W": jnp.sqrt(counts @ w2),
        "U": jnp.sqrt(counts @ u2),
        "theta": jnp.sqrt(counts @ (w2 + u2)),
        "head_max": jnp.sqrt(jnp.max(jnp.where(live, w2 + u2, 0.0))),
    }
