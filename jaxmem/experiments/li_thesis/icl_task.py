"""Chapter 6's in-context binary classification (spec B.1, B.3, B.7; eqs. 6.1, 6.6–6.8, Def. 6.3.1).

In-domain: M1 relevant patterns μ_j = β e_j and M2 = d_x − M1 irrelevant ones ν_k = β e_{M1+k} (spec
B.11-5); a token is x = μ_j + κ ν_k with κ ~ U(−K, K) (6.6). A task is an ordered pair (a, b) of relevant
patterns: f(x) = +1 if IDR(x) = μ_a, −1 if IDR(x) = μ_b, a fair coin otherwise (6.7). Out-of-domain (B.7):
three patterns μ'_1 = 0.3(μ_1 − μ_2) + a μ_5 + b μ_6, μ'_2 = (μ_1 + μ_2)/√2, μ'_3 = (μ_3 + μ_4)/√2 with
a² + b² = 0.82 and S_1 = a + b, irrelevant patterns ν'_k = ν_k (k ≤ M2'), κ' ~ U(−K', K') (6.8).

A prompt (6.1) holds `length` contexts and a query: its decisive patterns a (query label +1) and b (−1)
are drawn with probability ½ each (B.11-8); each context's pattern is a or b with probability α/2 each,
else one of the other patterns uniformly (B.3); the label embedding is ±q with q = e_1 of R^{d_y}
(B.11-4). Every per-prompt number comes from the shape-stable counters of (prompt, row, channel)
(`draws`), the query on row 0: prompts of one key nest along their length and agree across paddings,
and runs differing only in α, α', K, S_1 transform the same uniforms (paired comparisons).
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp

from jaxmem.experiments import draws

OOD_PATTERNS = 3  # M1' (B.7)
OOD_MIN_M1 = 6  # μ'_1 uses μ_5 and μ_6
OOD_RADIUS2 = 1.0 - 2 * 0.3**2  # a² + b² (B.7)
S1_MAX = math.sqrt(2 * OOD_RADIUS2)  # the largest a + b on that circle (a = b)
CHANNELS = 4  # uniforms per (prompt, row): pattern, label coin, irrelevant pattern, κ


def relevant_patterns(m1: int, dx: int, beta) -> jnp.ndarray:
    """IDR patterns μ_j = β e_j, j < M1: (M1, d_x)."""
    return beta * jnp.eye(m1, dx)


def irrelevant_patterns(m1: int, dx: int, beta) -> jnp.ndarray:
    """IDI patterns ν_k = β e_{M1+k}: (d_x − M1, d_x)."""
    return beta * jnp.eye(dx - m1, dx, k=m1)


def ood_coefficients(s1):
    """(a, b) with a + b = S_1 and a² + b² = 0.82, a ≥ b (the other half of the circle swaps μ_5, μ_6)."""
    root = jnp.sqrt(jnp.maximum(2 * OOD_RADIUS2 - s1**2, 0.0))
    return (s1 + root) / 2, (s1 - root) / 2


def ood_patterns(m1: int, dx: int, beta, s1) -> jnp.ndarray:
    """ODR patterns μ'_1..3 of B.7 (norm β): (3, d_x). Needs M1 ≥ 6."""
    mu = jnp.eye(m1, dx)
    a, b = ood_coefficients(s1)
    half = math.sqrt(0.5)
    rows = [0.3 * (mu[0] - mu[1]) + a * mu[4] + b * mu[5], half * (mu[0] + mu[1]), half * (mu[2] + mu[3])]
    return beta * jnp.stack(rows)


def ordered_pairs(m1: int, key) -> jnp.ndarray:
    """All M1(M1−1) tasks (a, b) as an int array (T, 2): first the cyclic tasks (j, j+1 mod M1) of
    Condition 6.3.2's construction (B.7, U = 1), then the others in an order drawn from `key` (E6.10:
    training sets of #T_tr ≥ M1 tasks add random extra tasks). The first #T_tr are the training tasks,
    the rest the unseen ones."""
    cyclic = [(j, (j + 1) % m1) for j in range(m1)]
    others = [(a, b) for a in range(m1) for b in range(m1) if a != b and (a, b) not in cyclic]
    if not others:
        return jnp.array(cyclic, jnp.int32)
    order = jax.random.permutation(key, len(others))
    return jnp.concatenate([jnp.array(cyclic, jnp.int32), jnp.array(others, jnp.int32)[order]])


def choose_patterns(u, a, b, alpha, n_patterns: int):
    """Pattern index from a uniform u: a w.p. α/2, b w.p. α/2, else one of the other n − 2 uniformly."""
    other = jnp.clip(
        jnp.floor((u - alpha) / jnp.maximum(1.0 - alpha, 1e-9) * (n_patterns - 2)), 0, n_patterns - 3
    ).astype(jnp.int32)
    low, high = jnp.minimum(a, b), jnp.maximum(a, b)
    other = other + (other >= low)
    other = other + (other >= high)
    return jnp.where(u < alpha / 2, a, jnp.where(u < alpha, b, other))


def prompts(key, count: int, length: int, relevant, irrelevant, n_irrelevant, pairs, tasks, alpha, noise, dy: int):
    """`count` prompts of `length` contexts. `relevant` (n, d_x), `irrelevant` (≥ n_irrelevant, d_x);
    `pairs` (T, 2) with the tasks drawn uniformly from rows [tasks[0], tasks[1]); `noise` = K.
    Returns contexts (count, length, d_x + d_y), query (count, d_x + d_y), label z (count,),
    `same` (count, length): the context shares the query's pattern (N*), and the patterns (query first)."""
    (u,) = draws.uniform_matrices(key, [(count, length + 1, CHANNELS)])
    n = relevant.shape[0]
    task = tasks[0] + jnp.minimum(jnp.floor(u[:, 0, 0] * (tasks[1] - tasks[0])), tasks[1] - tasks[0] - 1)
    a, b = pairs[task.astype(jnp.int32), 0][:, None], pairs[task.astype(jnp.int32), 1][:, None]
    z = jnp.where(u[:, 0, 1] < 0.5, 1.0, -1.0)
    context = choose_patterns(u[:, 1:, 0], a, b, alpha, n)
    coin = jnp.where(u[:, 1:, 1] < 0.5, 1.0, -1.0)
    y = jnp.where(context == a, 1.0, jnp.where(context == b, -1.0, coin))
    pattern = jnp.concatenate([jnp.where(z > 0, a[:, 0], b[:, 0])[:, None], context], axis=1)
    which = jnp.minimum(jnp.floor(u[..., 2] * n_irrelevant), n_irrelevant - 1).astype(jnp.int32)
    kappa = (2.0 * u[..., 3] - 1.0) * noise
    x = relevant[pattern] + kappa[..., None] * irrelevant[which]
    label = jnp.concatenate([y[..., None], jnp.zeros((count, length, dy - 1))], axis=-1)
    return {
        "contexts": jnp.concatenate([x[:, 1:], label], axis=-1),
        "query": jnp.concatenate([x[:, 0], jnp.zeros((count, dy))], axis=-1),
        "z": z,
        "same": context == pattern[:, :1],
        "pattern": pattern,
    }
