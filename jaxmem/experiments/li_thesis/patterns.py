"""The chapter-2 pattern data model (spec §1.2, Sec 2.4.1): M orthonormal patterns μ_j = e_j in R^d;
μ_1, μ_2 are discriminative, μ_3..μ_M are not. A sample of label y has L tokens x = μ_pattern + c·g
(no normalisation), its label-relevant tokens on μ_1 (y = +1) or μ_2 (y = −1), its confusion tokens on
the other one. Labels alternate (+1, −1, ...), so every even prefix is balanced.

Composition per sample (spec A5): "fixed" gives every sample round(α*L) relevant and round(α#L)
confusion tokens, the rest split evenly over μ_3..μ_M from a random offset; "iid" draws each token's
role from Categorical(α*, α#, α_nd/(M−2), ...) and keeps the first of CANDIDATES draws with more
relevant than confusion tokens (the spec's rejection step, truncated). A fraction of tokens can be
"highly noisy" (c_big instead of c0, E2.6). Every per-sample draw comes from the counters of entry
(sample, token, ·) (jaxmem.experiments.draws), so the training sets nest along n.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxmem.experiments import draws

COMPOSITIONS = ("fixed", "iid")
CANDIDATES = 8  # iid compositions tried per sample before giving up on n_rel > n_conf (P(fail) ~ 1e-6)
RELEVANT, CONFUSION = 0, 1  # role codes; a non-discriminative token's role is its pattern index 2..M−1


def labels(count: int) -> jnp.ndarray:
    """+1, −1, +1, ...: balanced in every even prefix."""
    return jnp.where(jnp.arange(count) % 2 == 0, 1.0, -1.0)


def fixed_roles(length: int, patterns: int, alpha, alpha_conf, u_shift):
    """Roles of the fixed composition (L,): the first round(α*L) relevant, the next round(α#L)
    confusion, the rest cycling over μ_3..μ_M from a random offset (the remainder lands at random)."""
    t = jnp.arange(length)
    n_rel = jnp.floor(alpha * length + 0.5)
    n_conf = jnp.floor(alpha_conf * length + 0.5)
    offset = jnp.floor(u_shift * (patterns - 2))
    nd = 2 + jnp.mod(t - n_rel - n_conf + offset, patterns - 2)
    return jnp.where(t < n_rel, RELEVANT, jnp.where(t < n_rel + n_conf, CONFUSION, nd)).astype(jnp.int32)


def iid_roles(patterns: int, alpha, alpha_conf, u):
    """Roles drawn iid per token from (α*, α#, α_nd/(M−2), ...); u (L, CANDIDATES) uniforms, one column
    per candidate sample; the first candidate with n_rel > n_conf is kept (else the last)."""
    nd_each = (1.0 - alpha - alpha_conf) / (patterns - 2)
    nd = 2 + jnp.minimum(jnp.floor((u - alpha - alpha_conf) / nd_each), patterns - 3)
    roles = jnp.where(u < alpha, RELEVANT, jnp.where(u < alpha + alpha_conf, CONFUSION, nd)).astype(jnp.int32)
    valid = jnp.sum(roles == RELEVANT, axis=0) > jnp.sum(roles == CONFUSION, axis=0)
    first = jnp.argmax(jnp.append(valid[:-1], True))
    return roles[:, first]


def pattern_of(role, y):
    """Pattern index of each token: relevant → μ_1 for y = +1 (μ_2 for −1), confusion → the other."""
    positive = y > 0
    return jnp.where(
        role == RELEVANT, jnp.where(positive, 0, 1), jnp.where(role == CONFUSION, jnp.where(positive, 1, 0), role)
    )


def sample(key, count: int, length: int, d: int, patterns: int, cfg) -> dict:
    """`count` samples: tokens x (count, L, d), labels y (count,), roles (count, L), each token's noise
    norm (count, L) and a uniform per token for random removal. `cfg` holds alpha, alpha_conf, c0, c_big,
    noisy_frac and composition (an index into COMPOSITIONS)."""
    (g,) = draws.normal_matrices(key, [(count, length, d)])
    (u,) = draws.uniform_matrices(jax.random.fold_in(key, 1), [(count, length, CANDIDATES + 3)])
    y = labels(count)
    fixed = jax.vmap(lambda s: fixed_roles(length, patterns, cfg["alpha"], cfg["alpha_conf"], s))(u[:, 0, -1])
    iid = jax.vmap(lambda v: iid_roles(patterns, cfg["alpha"], cfg["alpha_conf"], v))(u[:, :, :CANDIDATES])
    role = jnp.where(cfg["composition"] == 0, fixed, iid)
    noise = jnp.where(u[:, :, CANDIDATES] < cfg["noisy_frac"], cfg["c_big"], cfg["c0"])[..., None] * g
    mu = jnp.eye(patterns, d)[pattern_of(role, y[:, None])]
    return {"x": mu + noise, "y": y, "role": role, "noise": jnp.linalg.norm(noise, axis=-1), "u": u[:, :, -2]}
