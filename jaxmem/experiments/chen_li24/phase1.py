"""Phase I of the algorithm (spec §2 Phase I): the moment estimate of ΣW_i, Eq. (2) with the J of
Thm 5.1 (the §2.1 Eq. (3) omits it; spec §7.4).

    Ŵ = (1/(kN)) Σ_n X⁽ⁿ⁾ᵀ J Y⁽ⁿ⁾ = (1/(kN)) Σ_n (Σ_a x_a⁽ⁿ⁾)(Σ_b Y_b⁽ⁿ⁾)ᵀ,   J = 𝟙𝟙ᵀ.

For a uniform head (Θ = 0) the model is (1/k) J X W, whose population square loss has Hessian 2I: one GD
step from W = 0 with step 1/2 lands on Ŵ (spec §2, tested in tests/test_chen_li24.py).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxmem.experiments.chen_li24 import inputs, model


def estimate(x, y):
    """Ŵ of Eq. (2) from samples x, y (N, k, d)."""
    return jnp.einsum("nd,ne->de", x.sum(axis=1), y.sum(axis=1)) / (x.shape[1] * x.shape[0])


def streamed(key, theta, w, chunks, chunk: int, k: int, kind):
    """Ŵ over `chunks` (traced, ≥ 2) fresh chunks of `chunk` samples, and the variance of each of its
    entries estimated from the spread of the chunk estimates (for the unbiased bias below)."""
    d = theta.shape[-1]

    def part(c):
        x = inputs.tokens(jax.random.fold_in(key, c), chunk, k, d, kind)
        return estimate(x, model.mha(theta, w, x))

    def add(c, sums):
        p = part(c)
        return sums[0] + p, sums[1] + p**2

    first = part(0)
    total, squares = jax.lax.fori_loop(1, chunks, add, (first, first**2))
    mean = total / chunks
    return mean, (squares / chunks - mean**2) / (chunks - 1)


def bias(mean, variance, target):
    """Relative error ‖Ŵ − ΣW‖_F/‖ΣW‖_F, its bias part √(‖Ŵ − ΣW‖² − Σ Var Ŵ) (E‖Ŵ − ΣW‖² = b² + Σ Var)
    and its Monte-Carlo part √(Σ Var Ŵ), each relative to ‖ΣW‖_F (spec §3 prediction 2)."""
    scale = jnp.linalg.norm(target)
    error2 = jnp.sum((mean - target) ** 2)
    noise2 = jnp.sum(variance)
    return jnp.sqrt(error2) / scale, jnp.sqrt(jnp.maximum(error2 - noise2, 0.0)) / scale, jnp.sqrt(noise2) / scale
