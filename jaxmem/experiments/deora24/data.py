"""The two synthetic data models of App. G (spec 002 §2). Every draw is shape-stable
(jaxmem.experiments.draws): sample i depends only on the key and i, so a training set padded to a larger
n is the same set plus masked samples, and the sets of one key nest along n.

DM1, the tokenised mixture (Eq. DM1, Assumption 3; App. G values by default): patterns μ₊ = S e₁,
μ₋ = S e₂, ν_ℓ = S e_{2+ℓ} (spec A7); `relevant` = ζT positions per sample, uniformly random (A6), hold
μ_y; the others hold ν_j + z with j ~ Unif{1..M} and z ~ N(0, σ² I_d).

DM2, the planted teacher (Eq. DM2, §2.5 normalisation): X_ij ~ N(0, 1), y = sign Φ(X; W*, U*) with
W* = G_W/√d and U* = G_U/‖G_U‖_F (spec A13), keeping only samples with |Φ(X; W*, U*)| > reject_margin
(rejection sampling: the first accepted of ROUNDS fresh candidates per sample).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxmem.experiments import draws
from jaxmem.experiments.deora24.model import heads, real

ROUNDS = 48  # DM2 candidates per sample (acceptance ≈ 25 %: 0.75^48 ≈ 1e-6 of the samples keep a rejected one)


def tokens(key, n: int, T: int, d: int) -> jax.Array:
    """(n, T, d) standard normals, entry (i, t, j) from (key, t, i, j) only."""
    (z,) = draws.normal_matrices(key, [(T, n, d)])
    return real(jnp.transpose(z, (1, 0, 2)))


def dm1(key, n: int, shape, dyn) -> dict:
    """Tokenised mixture: X (n, T, d), y (n,) ±1, relevant (n, T) the mask of R."""
    T, d, M = shape["T"], shape["d"], shape["M"]
    u_label, u_position, u_pattern = draws.uniform_matrices(key, [(n, 1), (n, T), (n, T)])
    y = jnp.where(u_label[:, 0] < 0.5, 1.0, -1.0)
    rank = jnp.sum(u_position[:, None, :] < u_position[:, :, None], axis=2)  # rank of position t in sample i
    relevant = rank < shape["relevant"]
    j = jnp.clip(jnp.floor(u_pattern * M).astype(jnp.int32), 0, M - 1)
    S = dyn["S"]
    mu = S * jnp.where(y[:, None] > 0, jax.nn.one_hot(0, d), jax.nn.one_hot(1, d))  # (n, d)
    nu = S * jax.nn.one_hot(2 + j, d) + dyn["sigma"] * tokens(jax.random.fold_in(key, 1), n, T, d)
    X = jnp.where(relevant[..., None], mu[:, None, :], nu)
    return {"X": real(X), "y": real(y), "relevant": relevant}


def teacher(key, T: int, d: int) -> dict:
    """The planted single head (§2.5 [R]): W* = G_W/√d, U* = G_U/‖G_U‖_F."""
    g_w, g_u = draws.normal_matrices(key, [(d, d), (T, d)])
    return {"W": real(g_w / jnp.sqrt(d))[None], "U": real(g_u / jnp.linalg.norm(g_u))[None]}


def dm2(key, n: int, count, shape, dyn, planted: dict) -> dict:
    """Planted teacher with rejection of |Φ*| ≤ reject_margin: ROUNDS candidates per sample, the first
    accepted one kept (the last one where none is, with probability ≈ 0.75^ROUNDS); `accept` is the
    acceptance rate of the first candidates of the `count` (traced) real samples."""
    T, d = shape["T"], shape["d"]
    X = jax.vmap(lambda r: tokens(jax.random.fold_in(key, r), n, T, d))(jnp.arange(ROUNDS))
    logit = jax.vmap(lambda x: heads(planted, x)[0][:, 0])(X)  # (ROUNDS, n)
    accepted = jnp.abs(logit) > dyn["reject_margin"]
    pick = jnp.where(jnp.any(accepted, axis=0), jnp.argmax(accepted, axis=0), ROUNDS - 1)
    X, logit = X[pick, jnp.arange(n)], logit[pick, jnp.arange(n)]
    active = draws.active_mask(n, count)
    accept = jnp.sum(active & accepted[0]) / jnp.maximum(jnp.sum(active), 1)
    return {"X": X, "y": jnp.where(logit > 0, real(1.0), real(-1.0)), "accept": real(accept)}
