"""λ_min of the empirical-risk Hessian (Cor. 1(3): λ_min(∇²L̂) ≥ −β₃ L̂/√H, spec 002 §5.1, RT-13), by
Lanczos over Hessian-vector products or, where the parameter count is small, densely."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.flatten_util import ravel_pytree


def lifted(matrix: jax.Array, valid: jax.Array) -> jax.Array:
    """`matrix` restricted to the `valid` coordinates, the others decoupled at a diagonal value above
    every eigenvalue of the valid block (its Gershgorin bound + 1): never the minimum, and small enough
    to keep the eigensolver's absolute precision."""
    block = jnp.where(valid[:, None] & valid[None, :], matrix, 0.0)
    bound = 1.0 + jnp.max(jnp.sum(jnp.abs(block), axis=1))
    return block + jnp.diag(jnp.where(valid, 0.0, bound))


def lanczos_min(hvp, start: jax.Array, iters: int) -> jax.Array:
    """The smallest Ritz value of `hvp` (a symmetric linear map of flat vectors) on the `iters`-dim
    Krylov space of `start`, with full reorthogonalisation (Rayleigh–Ritz on the basis). A start vector
    that vanishes on some coordinates (padded heads) keeps the space off them when `hvp` does."""
    p = start.shape[0]

    def body(j, carry):
        V, HV = carry
        w = hvp(V[j])
        HV = HV.at[j].set(w)
        for _ in range(2):  # twice is enough (Kahan–Parlett)
            w = w - V.T @ (V @ w)
        norm = jnp.linalg.norm(w)
        fresh = jnp.where(norm > 1e-8 * jnp.maximum(jnp.linalg.norm(HV[j]), 1e-30), w / norm, 0.0)
        return V.at[jnp.minimum(j + 1, iters - 1)].set(jnp.where(j + 1 < iters, fresh, V[-1])), HV

    V0 = jnp.zeros((iters, p), start.dtype).at[0].set(start / jnp.linalg.norm(start))
    V, HV = jax.lax.fori_loop(0, iters, body, (V0, jnp.zeros_like(V0)))
    M = V @ HV.T
    return jnp.linalg.eigvalsh(lifted((M + M.T) / 2, jnp.linalg.norm(V, axis=1) > 0.5))[0]


def dense_min(loss, params, live) -> jax.Array:
    """λ_min of the full Hessian of `loss` at `params`; coordinates where the pytree `live` is False
    (padded heads, whose rows and columns vanish) are lifted out of the way (`lifted`)."""
    flat, unravel = ravel_pytree(params)
    mask, _ = ravel_pytree(live)
    hess = jax.hessian(lambda v: loss(unravel(v)))(flat)
    return jnp.linalg.eigvalsh(lifted(hess, mask > 0))[0]


def hvp_min(loss, params, start, iters: int) -> jax.Array:
    """λ_min of ∇²loss at `params` by Lanczos from the pytree `start` (forward-over-reverse HVPs)."""
    flat, unravel = ravel_pytree(params)
    grad = jax.grad(lambda v: loss(unravel(v)))
    hvp = lambda v: jax.jvp(grad, (flat,), (v,))[1]  # noqa: E731
    return lanczos_min(hvp, ravel_pytree(start)[0], iters)
