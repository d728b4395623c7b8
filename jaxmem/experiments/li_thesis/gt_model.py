"""The one-layer graph transformer of Eq. (3.1) with the relative shortest-path PE of Eq. (3.2), and
its node sampling (spec §2.1, §2.3):

    F(x_n) = aᵀ ReLU(W_O Σ_{s∈S^n} W_V x_s softmax_n((W_K x_s)ᵀ W_Q x_n + b[min(SPD(s, n), Z−1)])),

S^n = {n} ∪ k nodes drawn uniformly without replacement from the candidates N_1^n ∪ N_2^n (or N_1^n
only, the Theorem 3.4.6 setting), fewer when there are fewer candidates (masked). Sampling is the
top-k of shape-stable uniforms over the candidates. The GCN of Theorem 3.4.6 is the same network with
W_K = W_Q = 0 and b = 0: a uniform mean over S^n (`attend = False`). Parameters and init: the §0.3
construction of jaxmem.experiments.li_thesis.vit plus b = 0 ∈ R^Z.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxmem.experiments.li_thesis import vit

hinge = vit.hinge


def init(key, m: int, d: int, patterns: int, width, z: int, cfg) -> tuple[dict, jax.Array]:
    """(params {w_o, w_v, w_k, w_q, b (Z,)}, a): §0.3 with b^(0) = 0."""
    params, a = vit.init(key, m, d, patterns, width, cfg)
    return {**params, "b": jnp.zeros(z)}, a


def candidates(spd_rows, core_only) -> jax.Array:
    """Nodes a query may sample: SPD 1 or 2 (SPD 1 only when `core_only`)."""
    return jnp.where(core_only, spd_rows == 1, (spd_rows == 1) | (spd_rows == 2))


def sample_neighbours(queries, spd_rows, uniforms, k: int, core_only) -> tuple[jax.Array, jax.Array]:
    """S^n for each query: (nodes (q, k+1), valid (q, k+1)), the query itself first."""
    score = jnp.where(candidates(spd_rows, core_only), uniforms, -1.0)
    top, picked = jax.lax.top_k(score, k)
    nodes = jnp.concatenate([queries[:, None], picked], axis=1)
    valid = jnp.concatenate([jnp.ones_like(queries[:, None], bool), top >= 0.0], axis=1)
    return nodes, valid


def whole_neighbourhood(queries, spd_rows, core_only) -> tuple[jax.Array, jax.Array]:
    """T^n = {n} ∪ every candidate (spec §2.3's deterministic test-time option): (nodes (q, N), valid)."""
    nodes = jnp.broadcast_to(jnp.arange(spd_rows.shape[1]), spd_rows.shape)
    return nodes, candidates(spd_rows, core_only) | (nodes == queries[:, None])


def attention(params, xs, xq, pe, valid, attend: bool) -> jax.Array:
    """softmax_n over the valid sampled nodes (q, k+1); uniform when not `attend` (the GCN)."""
    if attend:
        logits = jnp.einsum("qsa,qa->qs", xs @ params["w_k"].T, xq @ params["w_q"].T) + params["b"][pe]
    else:
        logits = jnp.zeros(valid.shape)
    return jax.nn.softmax(jnp.where(valid, logits, -jnp.inf), axis=-1)


def forward(params, a, x, spd, queries, nodes, valid, attend: bool) -> tuple[jax.Array, jax.Array]:
    """F(x_n) of Eq. (3.1) for each query (q,) over its sampled set; also the attention (q, k+1)."""
    z = params["b"].shape[0]
    pe = jnp.minimum(jnp.take_along_axis(spd[queries], nodes, axis=1), z - 1).astype(jnp.int32)
    xs = x[nodes]
    att = attention(params, xs, x[queries], pe, valid, attend)
    value = jnp.einsum("qs,qsb->qb", att, xs @ params["w_v"].T)
    return jax.nn.relu(value @ params["w_o"].T) @ a, att


def relevant_mass(att, nodes, valid, pattern, relevant_pattern) -> jax.Array:
    """Lemma 3.4.5 / Fig 3.5: the attention on class-relevant sampled nodes (pattern μ_1 for label +1,
    μ_2 for −1), per query."""
    relevant = valid & (pattern[nodes] == relevant_pattern[:, None])
    return jnp.sum(jnp.where(relevant, att, 0.0), axis=-1)
