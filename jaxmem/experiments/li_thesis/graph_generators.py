"""Graph generators of the thesis's synthetic experiments, jittable and padded (spec 001 §2.2 and
Appendix A.7). A graph of `n` (traced) nodes lives in an `(n_pad, n_pad)` boolean adjacency; nodes
past `n` have no edges and pattern −1. Every random choice comes from shape-stable uniforms
(jaxmem.experiments.draws) ranked among the active nodes only, so a padded graph equals the
unpadded one on the shared block.

Chapter 3 (Sec 3.5.1, spec §2.2 [REC]): exact pattern counts round(γ_d n/2) for μ_1 and μ_2, the rest
cycled over μ_3..μ_M from a random offset, node ids in random order; a non-discriminative node of
label +1 links to min(round(D(1−ε_S)), |D_1|) random μ_1 nodes and round(D ε_S) random μ_2 nodes (roles
swapped for −1), then every discriminative node, visited in random order, links to random non-adjacent
nodes of its own pattern until its degree reaches D: the spec's greedy construction, run exactly as a
`fori_loop` over nodes (one row ranking per node), so it is jittable and needs no host cache.

Chapter 5 (spec A.7 [REC]): the configuration model as a random permutation of stubs (`configuration_model`).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxmem.experiments import draws

INACTIVE = -1  # pattern of a padded node
CLASS_PATTERNS = (0, 1)  # μ_1 ↔ label +1, μ_2 ↔ label −1


def ranks(u: jax.Array, eligible: jax.Array) -> jax.Array:
    """Rank of each entry of `u` among the eligible entries of its row (0 = smallest); ineligible
    entries rank after every eligible one. Ranking uniforms is sampling without replacement."""
    return jnp.argsort(jnp.argsort(jnp.where(eligible, u, jnp.inf), axis=-1), axis=-1)


def round_half_up(x):
    return jnp.floor(x + 0.5)


def pattern_of_nodes(u_order, u_offset, n, gamma_d, patterns: int) -> jax.Array:
    """Each node's pattern (spec §2.2 [REC]): exact counts round(γ_d n/2) of μ_1 and of μ_2, the rest
    cycled over μ_3..μ_M from a random offset, in the random order of `u_order`; −1 past `n`."""
    active = draws.active_mask(u_order.shape[0], n)
    position = ranks(u_order, active)
    n_disc = round_half_up(gamma_d * n / 2)
    offset = jnp.floor(u_offset * (patterns - 2))
    rest = 2 + jnp.mod(position - 2 * n_disc + offset, patterns - 2)
    pattern = jnp.where(position < n_disc, 0, jnp.where(position < 2 * n_disc, 1, rest))
    return jnp.where(active, pattern, INACTIVE).astype(jnp.int32)


def clean_labels(pattern, u_label) -> jax.Array:
    """μ_1 → +1, μ_2 → −1, a non-discriminative node ±1 with probability 1/2 each (0 past the graph)."""
    coin = jnp.where(u_label < 0.5, 1.0, -1.0)
    return jnp.where(pattern == 0, 1.0, jnp.where(pattern == 1, -1.0, jnp.where(pattern == INACTIVE, 0.0, coin)))


def bipartite_edges(pattern, y, u, degree, eps_s) -> jax.Array:
    """Directed edges from each non-discriminative node to round(D(1−ε_S)) own-class and round(D ε_S)
    other-class discriminative nodes, drawn without replacement (capped at the class sizes)."""
    k_own, k_other = round_half_up(degree * (1.0 - eps_s)), round_half_up(degree * eps_s)
    non_disc = (pattern >= 2)[:, None]
    to_first = jnp.where(y > 0, k_own, k_other)[:, None]
    to_second = jnp.where(y > 0, k_other, k_own)[:, None]
    first, second = (pattern == 0)[None, :], (pattern == 1)[None, :]
    pick = (first & (ranks(u, first) < to_first)) | (second & (ranks(u, second) < to_second))
    return non_disc & pick


def fill_degrees(adjacency, pattern, u_order, u, degree) -> jax.Array:
    """The greedy step (spec §2.2 [REC], B7): each discriminative node, in the random order of `u_order`,
    links to uniformly random non-adjacent nodes of its own pattern until its degree reaches D (or no
    candidate is left). Exact, as a loop over nodes."""
    size = pattern.shape[0]
    order = jnp.argsort(jnp.where(pattern >= 0, u_order, jnp.inf))
    index = jnp.arange(size)

    def visit(t, adj):
        i = order[t]
        deficit = jnp.where(pattern[i] < 2, degree - jnp.sum(adj[i]), 0)
        eligible = (pattern == pattern[i]) & ~adj[i] & (index != i) & (pattern[i] >= 0)
        new = eligible & (ranks(u[i], eligible) < deficit)
        return adj.at[i].set(adj[i] | new).at[:, i].set(adj[:, i] | new)

    return jax.lax.fori_loop(0, size, visit, adjacency)


def flip_labels(y, u_flip, n, eps_0) -> jax.Array:
    """Spec B8: the labels of round(ε_0 n) uniformly chosen nodes flipped (used in training and test)."""
    flipped = ranks(u_flip, y != 0) < round_half_up(eps_0 * n)
    return jnp.where(flipped, -y, y)


def shortest_path_classes(adjacency) -> jax.Array:
    """Truncated shortest-path distance (int8): 0 on the diagonal, 1 for edges, 2 for two hops, 3 beyond."""
    a = adjacency.astype(jnp.float32)
    two_hops = (a @ a) > 0
    eye = jnp.eye(adjacency.shape[0], dtype=bool)
    return jnp.where(eye, 0, jnp.where(adjacency, 1, jnp.where(two_hops, 2, 3))).astype(jnp.int8)


def pattern_graph(key, size: int, n, gamma_d, eps_s, eps_0, degree, patterns: int) -> dict:
    """The chapter-3 graph of `n` active nodes padded to `size`: pattern (size,), clean label y_clean,
    observed label y (after the ε_0 flips), adjacency (size, size) bool and truncated SPD (int8)."""
    u_edges, u_fill = draws.uniform_matrices(key, [(size, size), (size, size)])
    (u_node,) = draws.uniform_matrices(jax.random.fold_in(key, 1), [(size, 5)])
    pattern = pattern_of_nodes(u_node[:, 0], u_node[0, 1], n, gamma_d, patterns)
    y_clean = clean_labels(pattern, u_node[:, 2])
    directed = bipartite_edges(pattern, y_clean, u_edges, degree, eps_s)
    adjacency = fill_degrees(directed | directed.T, pattern, u_node[:, 3], u_fill, degree)
    y = flip_labels(y_clean, u_node[:, 4], n, eps_0)
    return {
        "pattern": pattern,
        "y_clean": y_clean,
        "y": y,
        "adjacency": adjacency,
        "spd": shortest_path_classes(adjacency),
    }


def stub_owners(stubs: int, n1, d1, d2) -> jax.Array:
    """The node of each stub (stubs,): nodes < n1 own d1 stubs each, the others d2 each."""
    s = jnp.arange(stubs)
    first = n1 * d1
    return jnp.where(s < first, s // jnp.maximum(d1, 1), n1 + (s - first) // jnp.maximum(d2, 1)).astype(jnp.int32)


def configuration_model(key, size: int, stubs: int, n, n1, d1, d2) -> jax.Array:
    """Spec A.7 [REC]: node i < n1 gets d1 stubs, the other nodes of the `n` active ones d2; the stubs in
    uniformly random order are paired consecutively, self-pairs and repeated pairs dropped. Returns the
    symmetric boolean adjacency (size, size) without self-loops. `stubs` (static) ≥ n1 d1 + (n − n1) d2."""
    total = n1 * d1 + (n - n1) * d2
    (u,) = draws.uniform_matrices(key, [(stubs, 1)])
    order = jnp.argsort(jnp.where(jnp.arange(stubs) < total, u[:, 0], jnp.inf))
    owner = stub_owners(stubs, n1, d1, d2)[order]
    pair = jnp.arange(stubs // 2)
    src, dst = owner[2 * pair], owner[2 * pair + 1]
    real = (2 * pair + 1 < total) & (src != dst)
    adjacency = jnp.zeros((size, size), bool).at[src, dst].max(real, mode="drop")
    return adjacency | adjacency.T


def normalized_adjacency(adjacency, n) -> jax.Array:
    """A = D^{-1/2} (A + I) D^{-1/2} over the `n` active nodes (Sec 5.2)."""
    active = draws.active_mask(adjacency.shape[0], n)
    with_self = (adjacency | jnp.diag(active)).astype(jnp.float32)
    scale = 1.0 / jnp.sqrt(jnp.maximum(jnp.sum(with_self, axis=1), 1.0))
    return scale[:, None] * with_self * scale[None, :]
