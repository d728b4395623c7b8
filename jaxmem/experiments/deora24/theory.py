"""The paper's constructed parameters and theorem quantities, evaluated with measured values (spec 002
§5.2, §5.5, §5.6, §5.9): the DM1 target directions W⋆, U⋆ (§5.5), the optimal attention head θ_opt of
eq. (9) (Prop. 3, RT-14), the paper's NTK direction θ̃⋆ and its margin at θ̃₀ (Def. 1 P3), the constructive
realizability target θ̃(ε) = θ̃₀ + g₀(ε) θ̃⋆ of Prop. 7 (RT-16) and Thm 1's training bound (RT-17).

Heads are stored as groups with multiplicities (model.py); a direction gives each group ONE head's
value, so a group of `counts_g` heads carries counts_g copies of it.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxmem.experiments.deora24.model import empirical_loss, output


def targets(T: int, d: int, M: int, S) -> tuple[jax.Array, jax.Array]:
    """U⋆ = 1_T u⋆ᵀ with u⋆ = μ₊ − μ₋, and W⋆ = μ₊μ₊ᵀ + μ₋μ₋ᵀ + Σ_ℓ ν_ℓ(μ₊ + μ₋)ᵀ (§5.5), for the
    patterns of data.dm1 (μ₊ = S e₁, μ₋ = S e₂, ν_ℓ = S e_{2+ℓ}; spec A7). Unnormalised."""
    eye = S * jnp.eye(d)
    mu_plus, mu_minus, nu = eye[0], eye[1], eye[2 : 2 + M]
    U = jnp.broadcast_to(mu_plus - mu_minus, (T, d))
    W = jnp.outer(mu_plus, mu_plus) + jnp.outer(mu_minus, mu_minus) + jnp.outer(nu.sum(0), mu_plus + mu_minus)
    return U, W


def unit(x: jax.Array) -> jax.Array:
    return x / jnp.linalg.norm(x)


def optimal_head(T: int, d: int, M: int, S, gamma) -> dict:
    """θ_opt = (U_opt, Γ W_opt) of eq. (9) with unit-norm U_opt = U⋆/‖U⋆‖ and W_opt = W⋆/‖W⋆‖ (Prop. 3)."""
    U, W = targets(T, d, M, S)
    return {"U": unit(U), "W": gamma * unit(W)}


def paper_direction(alpha, counts, T: int, d: int, M: int, S) -> dict:
    """θ̃⋆ = H^{-1/2} concat_h (U⋆/‖U⋆‖, sign(α_h) W⋆/‖W⋆‖) (§5.5), per group: ‖θ̃⋆‖ = √2."""
    U, W = targets(T, d, M, S)
    per_head = jnp.where(counts > 0, 1.0, 0.0) / jnp.sqrt(jnp.sum(counts))
    sign = jnp.sign(alpha) * per_head
    return {"U": per_head[:, None, None] * unit(U)[None], "W": sign[:, None, None] * unit(W)[None]}


def ntk_margin(theta0, direction, X, y, active, counts, scale) -> jax.Array:
    """γ = min_i y_i ⟨∇Φ̃(X_i; θ̃₀), θ̃⋆⟩ over the real samples (Def. 1 P3), by one JVP."""
    _, tangent = jax.jvp(lambda p: output(p, X, counts, scale), (theta0,), (direction,))
    return jnp.min(jnp.where(active, y * tangent, jnp.inf))


def realizability(theta0, direction, train, counts, scale, eps) -> dict:
    """Prop. 7's target θ̃(ε) = θ̃₀ + g₀(ε) θ̃⋆ with g₀(ε) = (2B_Φ + log(1/ε))/γ and B_Φ = max(1, max_i
    |Φ̃(X_i; θ̃₀)|): its loss (Assumption 2 (i): ≤ ε once H is large enough), g₀, γ and B_Φ. NaN where γ ≤ 0
    (not NTK-separable along θ̃⋆)."""
    X, y, w = train["X"], train["y"], train["weights"]
    active = w > 0
    gamma = ntk_margin(theta0, direction, X, y, active, counts, scale)
    b_phi = jnp.maximum(1.0, jnp.max(jnp.where(active, jnp.abs(output(theta0, X, counts, scale)), 0.0)))
    g0 = jnp.where(gamma > 0, (2 * b_phi + jnp.log(1.0 / eps)) / jnp.maximum(gamma, 1e-30), jnp.nan)
    target = jax.tree.map(lambda a, b: a + g0 * b, theta0, direction)
    return {"loss": empirical_loss(target, X, y, w, counts, scale), "g0": g0, "gamma": gamma, "b_phi": b_phi}


def thm1_bound(target_loss, distance_sq, eta, K) -> jax.Array:
    """Thm 1: L̂(θ_K) ≤ 2 L̂(θ) + 5‖θ − θ₀‖²/(4ηK) for a target θ (here θ̃(1/K))."""
    return 2 * target_loss + 5 * distance_sq / (4 * eta * K)


def ntk_features(theta0, X, y, counts, scale) -> jax.Array:
    """ψ_i = y_i ∇_θ̃ Φ̃(X_i; θ̃₀) (§5.9 P3), flattened to (n, p) over the groups' parameters. A group of
    counts_g identical heads contributes ∂Φ̃/∂θ_g / √counts_g: the max-margin direction is the same on every
    head of a group (averaging a direction over the group keeps its margins and does not raise its norm),
    and for such a direction ⟨∇Φ̃, θ̃⋆⟩ and ‖θ̃⋆‖ are those of these features (padded groups: zero)."""
    jac = jax.jacrev(lambda p: output(p, X, counts, scale))(theta0)
    per_group = jax.lax.rsqrt(jnp.maximum(counts, 1.0)) * (counts > 0)
    blocks = [(jac[k] * per_group[None, :, None, None]).reshape(X.shape[0], -1) for k in ("U", "W")]
    return y[:, None] * jnp.concatenate(blocks, axis=1)


def max_margin(features, active, iters: int) -> tuple[jax.Array, jax.Array]:
    """max_{‖v‖=1} min_i ⟨ψ_i, v⟩ over the active rows (§5.9: the minimum-norm point x = Σ λ_i ψ_i of their
    convex hull, λ on the simplex) by pairwise Frank–Wolfe with exact line search on the Gram matrix.
    Returns the margin of the direction x/‖x‖ (a lower bound) and the duality gap ‖x‖ − margin (the
    max-margin lies between; it is ≤ 0, i.e. not separable, when the hull holds the origin)."""
    K = features @ features.T

    def pairwise_step(_, lam):
        scores = K @ lam  # ⟨ψ_i, x⟩
        toward = jnp.argmin(jnp.where(active, scores, jnp.inf))
        away = jnp.argmax(jnp.where(lam > 0, scores, -jnp.inf))
        curvature = K[toward, toward] + K[away, away] - 2 * K[toward, away]
        step = jnp.clip((scores[away] - scores[toward]) / jnp.maximum(curvature, 1e-300), 0.0, lam[away])
        return lam.at[toward].add(step).at[away].add(-step)

    start = jax.nn.one_hot(jnp.argmax(active), K.shape[0], dtype=K.dtype)
    lam = jax.lax.fori_loop(0, iters, pairwise_step, start)
    scores = K @ lam
    norm = jnp.sqrt(jnp.maximum(lam @ scores, 0.0))
    margin = jnp.min(jnp.where(active, scores, jnp.inf)) / jnp.maximum(norm, 1e-300)
    return margin, norm - margin
