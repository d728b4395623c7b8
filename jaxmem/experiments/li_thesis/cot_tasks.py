"""Chapter 7's K-step pattern-transition tasks (spec C.1, C.3, C.4, C.9; eqs. 7.1, 7.10–7.13, 7.17–7.21).

A task is a random cycle through n patterns (a permutation q): f_k advances k places along it,
f_k(q_i) = q_{(i+k) mod n} (Sec 7.5), so the chain from z_0 moves 1, then 2, ..., K places. Training uses
the M TRR patterns μ_i = e_i, exact examples; testing uses the M' TSR patterns μ'_j = (μ_{2j} + μ_{2j+1})/√2
(C.9-3), noisy tokens μ'_j + δ with δ ⊥ span(μ') of norm `noise` (7.11), and erroneous examples whose
step k follows the transition matrix A_k (7.12): the C.9-4 generator puts p = τ^{1/K} on the correct
target and the rest in chunks of (1 − ρ)p on wrong targets in a random order per row; "sink" mode puts
the first chunk of every row on one common pattern (C.9-5b, which can break Condition 7.3.2). Tokens are
R^{2 d_X + K}: (input; output; c_k) with the positional encodings c_k = e_{2 d_X + k} (C.9-1).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

DISTRACTORS = ("random", "sink")


def tsr_patterns(n_test: int, dx: int) -> jnp.ndarray:
    """μ'_j = (e_{2j} + e_{2j+1})/√2: (M', d_X) (C.9-3)."""
    j = jnp.arange(n_test)
    return (jax.nn.one_hot(2 * j, dx) + jax.nn.one_hot(2 * j + 1, dx)) / jnp.sqrt(2.0)


def advance(perm, position, index, steps):
    """The pattern `steps` places after `index` along the cycle `perm` (position = inverse of perm)."""
    return perm[(position[index] + steps) % perm.shape[0]]


def exact_chain(perm, start, k_steps: int):
    """z_0 = start, z_k = f_k(z_{k−1}) (7.10): (..., K+1) pattern indices."""
    position = jnp.argsort(perm)
    chain = [start]
    for k in range(1, k_steps + 1):
        chain.append(advance(perm, position, chain[-1], k))
    return jnp.stack(chain, axis=-1)


def other_or_same(u, same, alpha, n: int):
    """`same` with probability α, else one of the other n − 1 patterns uniformly (from a uniform u)."""
    other = jnp.minimum(jnp.floor((u - alpha) / jnp.maximum(1.0 - alpha, 1e-9) * (n - 1)), n - 2).astype(jnp.int32)
    other = other + (other >= same)
    return jnp.where(u < alpha, same, other)


def transition_matrices(perm, u_order, tau, rho, sink, k_steps: int):
    """A_k (K, n, n) of the C.9-4 generator: A_k(i, f_k(i)) = p = τ^{1/K}, the rest 1 − p in chunks of
    c = (1 − ρ)p on wrong targets ranked by `u_order` (K, n, n); with `sink` every row ranks pattern
    `sink` first. Rows are renormalised where the chunks do not fit (the realised τ, ρ are logged)."""
    n = perm.shape[0]
    targets = step_targets(perm, k_steps)
    p = tau ** (1.0 / k_steps)
    chunk = jnp.maximum((1.0 - rho) * p, 1e-9)
    full = jnp.floor((1.0 - p) / chunk)
    rest = 1.0 - p - full * chunk
    rows = []
    for k in range(k_steps):
        correct = jnp.arange(n)[None, :] == targets[k][:, None]
        order = jnp.where(correct, 2.0, jnp.where(jnp.arange(n)[None, :] == sink, -1.0, u_order[k]))
        rank = jnp.argsort(jnp.argsort(order, axis=-1), axis=-1)
        wrong = jnp.where(rank < full, chunk, jnp.where(rank == full, rest, 0.0))
        a = jnp.where(correct, p, wrong)
        rows.append(a / jnp.sum(a, axis=-1, keepdims=True))
    return jnp.stack(rows)


def sample_chain(a, start, u):
    """An erroneous example's chain: y_0 = start, y_k ~ A_k(y_{k−1}, ·) from uniforms u (K,)."""
    chain = [start]
    for k in range(a.shape[0]):
        cdf = jnp.cumsum(a[k, chain[-1]])
        chain.append(jnp.minimum(jnp.sum(cdf < u[k]), a.shape[1] - 1))
    return jnp.stack(chain)


def step_targets(perm, k_steps: int):
    """targets[k − 1, i] = f_k(i) of a cycle task: (K, n)."""
    position, n = jnp.argsort(perm), perm.shape[0]
    return jnp.stack([advance(perm, position, jnp.arange(n), k) for k in range(1, k_steps + 1)])


def task_statistics(a, targets) -> dict:
    """The realised τ (7.17), τ_o (7.18), ρ (C.9-6: wrong targets only), ρ_o (7.13) and Condition 7.3.2
    (7.21) of one task: A_k (K, n, n) and its step maps targets[k − 1, i] = f_k(i) (K, n)."""
    k_steps, n = a.shape[0], a.shape[1]
    b, chain, along = a[0], [jnp.arange(n)], []
    for k in range(k_steps):
        if k:
            b = b @ a[k]
        chain.append(targets[k, chain[-1]])
        along.append(a[k, chain[-2], chain[-1]])
    correct = jnp.take_along_axis(a, targets[..., None], axis=-1)[..., 0]
    wrong = jnp.where(jax.nn.one_hot(targets, n) > 0, -jnp.inf, a)
    best = jnp.argmax(b, axis=-1)
    b_wrong = jnp.where(jax.nn.one_hot(best, n) > 0, -jnp.inf, b)
    return {
        "tau": jnp.min(jnp.prod(jnp.stack(along, axis=-1), axis=-1)),
        "tau_o": jnp.min(jnp.max(b, axis=-1)),
        "rho": jnp.min(1.0 - jnp.max(wrong, axis=-1) / correct),
        "rho_o": jnp.min(1.0 - jnp.max(b_wrong, axis=-1) / jnp.max(b, axis=-1)),
        "condition": jnp.all(best == chain[-1]),
        "b": b,
    }


def orthogonal_noise(g, patterns, norm):
    """δ ⊥ span(patterns) of the given norm from Gaussians g (..., d_X) (7.11)."""
    projected = g - (g @ patterns.T) @ patterns
    return norm * projected / jnp.maximum(jnp.linalg.norm(projected, axis=-1, keepdims=True), 1e-12)


def step_columns(tokens, k_steps: int):
    """Columns (input; output; c_k) of examples' chains of tokens (..., K+1, d_X): (..., K, 2 d_X + K)."""
    pe = jnp.broadcast_to(jnp.eye(k_steps), tokens.shape[:-2] + (k_steps, k_steps))
    return jnp.concatenate([tokens[..., :-1, :], tokens[..., 1:, :], pe], axis=-1)


def query_column(token, k, k_steps: int):
    """(z_{k−1}; 0) + c_k (k from 1)."""
    pe = jnp.broadcast_to(jax.nn.one_hot(k - 1, k_steps), token.shape[:-1] + (k_steps,))
    return jnp.concatenate([token, jnp.zeros_like(token), pe], axis=-1)
