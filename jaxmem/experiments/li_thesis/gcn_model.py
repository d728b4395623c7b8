"""The three-layer GCN of Eq. (5.4) and the graph topology samplers of Sec 5.3.2 (spec A.2, A.4):

    F_A(e_g, X) = e_gᵀ A σ(r + B_2) C,   r = A σ(A X W + B_1) V,

W (d×m), V (m×m) trained; B_1 = 1 b_1ᵀ, B_2 = 1 b_2ᵀ and C (m×K) fixed. In training every A is the
step's sample A^s (the same in all three layers, spec A.2); prediction uses A*.

Samplers (each returns the column/row scalings that make A^s from A, so E[A^s] = A* exactly):
- "groupwise" (the thesis's, asymmetric): in each degree group l, S_l = round(frac·N_l) nodes uniformly
  without replacement; A^s = A P^s with P^s_ii = p*_l N_l / S_l for a sampled node, 0 otherwise
  (A* = A P*, P*_ii = p*_l);
- "symmetric" (Appendix D.1.1): P^s_ii = sqrt(p*_l N_l / S_l), A^s = P^s A P^s (A* = P* A P*, P*_ii = sqrt(p*_l));
- "fastgcn" (spec A.8 [REC]): t = round(frac·N) draws iid with q(u) ∝ ‖A[:, u]‖², A^s = A diag(cnt_u/(t q(u)))
  (A* = A).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxmem.experiments import draws
from jaxmem.experiments.li_thesis.graph_generators import ranks, round_half_up

SAMPLERS = ("groupwise", "symmetric", "fastgcn")


def group_scale(group1, p1, p2) -> jax.Array:
    """p*_l of each node's group (group1: bool per node; inactive nodes get 0 from the caller's mask)."""
    return jnp.where(group1, p1, p2)


def groupwise_scale(u, active, group1, frac, p1, p2) -> jax.Array:
    """diag(P^s) of the group-wise uniform sampler: S_l = round(frac N_l) per group, p*_l N_l / S_l."""
    scale = jnp.zeros(u.shape)
    for members, p in ((active & group1, p1), (active & ~group1, p2)):
        count = jnp.sum(members)
        kept = jnp.maximum(round_half_up(frac * count), 1.0)
        scale = jnp.where(members & (ranks(u, members) < kept), p * count / kept, scale)
    return scale


def fastgcn_scale(u, adjacency, active, frac) -> jax.Array:
    """cnt_u / (t q(u)) for t = round(frac N) iid draws with q ∝ ‖A[:, u]‖² (inverse-CDF of `u`)."""
    q = jnp.where(active, jnp.sum(adjacency**2, axis=0), 0.0)
    q = q / jnp.sum(q)
    t = jnp.maximum(round_half_up(frac * jnp.sum(active)), 1.0)
    drawn = jnp.searchsorted(jnp.cumsum(q), u, side="right").clip(0, u.shape[0] - 1)
    counts = jnp.zeros(u.shape).at[drawn].add(jnp.where(jnp.arange(u.shape[0]) < t, 1.0, 0.0))
    return jnp.where(q > 0, counts / (t * jnp.where(q > 0, q, 1.0)), 0.0)


def sampled_adjacency(key, adjacency, active, group1, sampler, frac, p1, p2) -> jax.Array:
    """One draw of A^s (traced `sampler`: an index into SAMPLERS)."""
    (u,) = draws.uniform_matrices(key, [(adjacency.shape[0], 1)])
    u = u[:, 0]
    grouped = groupwise_scale(u, active, group1, frac, p1, p2)
    fast = fastgcn_scale(u, adjacency, active, frac)
    columns = jnp.where(sampler == 0, grouped, jnp.where(sampler == 1, jnp.sqrt(grouped), fast))
    rows = jnp.where(sampler == 1, jnp.sqrt(grouped), 1.0)
    return rows[:, None] * adjacency * columns[None, :]


def effective_adjacency(adjacency, active, group1, sampler, p1, p2) -> jax.Array:
    """A* = E[A^s]: A P*, P* A P* with sqrt(p*), or A (FastGCN)."""
    p = jnp.where(active, group_scale(group1, p1, p2), 0.0)
    columns = jnp.where(sampler == 0, p, jnp.where(sampler == 1, jnp.sqrt(p), 1.0))
    rows = jnp.where(sampler == 1, jnp.sqrt(p), 1.0)
    return rows[:, None] * adjacency * columns[None, :]


def forward(params, fixed, adjacency, x, rows, dropout=None) -> jax.Array:
    """F_A(e_g, X) of Eq. (5.4) for the nodes `rows` (q,): (q, K). `dropout`: optional keep-masks
    (two (N, m) arrays, already scaled by 1/(1−rate)) on the two hidden ReLU outputs."""
    h1 = jax.nn.relu(adjacency @ (x @ params["w"]) + fixed["b1"])
    h1 = h1 if dropout is None else h1 * dropout[0]
    h2 = jax.nn.relu(adjacency @ (h1 @ params["v"]) + fixed["b2"])
    h2 = h2 if dropout is None else h2 * dropout[1]
    return adjacency[rows] @ h2 @ fixed["c"]


def targets(adjacency_hat, x, w_star, c_star) -> jax.Array:
    """Labels of Eq. (5.20): y = (sin(Â X W*) ⊙ tanh(Â X W*)) C*."""
    z = adjacency_hat @ x @ w_star
    return (jnp.sin(z) * jnp.tanh(z)) @ c_star
