"""H. Li thesis (spec 001), chapter 3: the pattern graph generator (exact counts, the k_own/k_other
links, the greedy degree fill, no μ_1–μ_2 or non-discriminative–non-discriminative edges, SPD classes,
label flips), the node sampler, the GCN as a uniform mean, and a padded run equal to the unpadded one
across n_nodes, m and n_labeled."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import run_steps

from jaxmem.experiments.li_thesis import graph_generators, gt_model, gt_node_classification

N, M, DEGREE = 120, 6, 10
pattern_graph = jax.jit(graph_generators.pattern_graph, static_argnums=(1, 7))


def graph(n=N, size=N, gamma_d=0.4, eps_s=0.2, eps_0=0.0, degree=DEGREE):
    out = pattern_graph(jax.random.PRNGKey(0), size, n, gamma_d, eps_s, eps_0, degree, M)
    return {k: np.asarray(v) for k, v in out.items()}


@pytest.fixture(scope="module")
def g():
    return graph()


def test_pattern_counts_are_exact_and_labels_follow_the_discriminative_patterns(g):
    counts = np.bincount(g["pattern"], minlength=M)
    assert counts[0] == counts[1] == round(0.4 * N / 2)
    assert counts[2:].max() - counts[2:].min() <= 1 and counts.sum() == N
    assert np.all(g["y"][g["pattern"] == 0] == 1) and np.all(g["y"][g["pattern"] == 1] == -1)
    assert set(np.unique(g["y"][g["pattern"] >= 2])) == {-1.0, 1.0}


def test_links_follow_the_thesis_construction(g):
    a, p, y = g["adjacency"], g["pattern"], g["y_clean"]
    assert np.array_equal(a, a.T) and not a.diagonal().any()
    nd = p >= 2
    assert not a[np.ix_(nd, nd)].any(), "no non-discriminative–non-discriminative edges"
    assert not a[np.ix_(p == 0, p == 1)].any(), "no μ_1–μ_2 edges"
    own = np.where(y[:, None] > 0, p[None, :] == 0, p[None, :] == 1)
    other = np.where(y[:, None] > 0, p[None, :] == 1, p[None, :] == 0)
    assert np.all((a & own)[nd].sum(1) == round(DEGREE * 0.8)) and np.all((a & other)[nd].sum(1) == round(DEGREE * 0.2))
    assert a[~nd].sum(1).min() >= DEGREE, "the greedy fill reaches degree D"


def test_greedy_fill_adds_own_pattern_edges_only_where_degrees_fall_short():
    sparse = graph(gamma_d=0.8, eps_s=0.0)  # 48 discriminative nodes per class, 24 others: the fill must act
    a, p = sparse["adjacency"], sparse["pattern"]
    intra = a[np.ix_(p == 0, p == 0)].sum(1)
    assert intra.sum() > 0 and a[p < 2].sum(1).min() >= DEGREE
    assert not a[np.ix_(p == 0, p == 1)].any()


def test_truncated_shortest_path_classes(g):
    a, spd = g["adjacency"].astype(int), g["spd"]
    hop2 = (a @ a > 0) & (a == 0) & ~np.eye(N, dtype=bool)
    assert np.all(np.diag(spd) == 0) and np.all(spd[a == 1] == 1) and np.all(spd[hop2] == 2)
    assert np.all(spd[(a == 0) & ~hop2 & ~np.eye(N, dtype=bool)] == 3)
    nd = g["pattern"] >= 2
    assert np.all(g["pattern"][np.nonzero(spd[nd] == 1)[1]] < 2), (
        "z_m = 1: a non-discriminative node's N_1 is discriminative"
    )


def test_label_flips_hit_exactly_round_eps0_n_nodes():
    flipped = graph(eps_0=0.1)
    assert int(np.sum(flipped["y"] != flipped["y_clean"])) == round(0.1 * N)


def test_sampler_draws_distinct_candidates_and_masks_a_short_supply():
    spd = jnp.asarray([[0, 1, 2, 3, 1, 2], [1, 0, 3, 3, 3, 3]], jnp.int8)
    queries = jnp.asarray([0, 1])
    u = jax.random.uniform(jax.random.PRNGKey(1), (2, 6))
    nodes, valid = gt_model.sample_neighbours(queries, spd, u, 3, False)
    assert nodes[0, 0] == 0 and nodes[1, 0] == 1 and bool(valid[:, 0].all())
    picked = set(np.asarray(nodes[0, 1:]).tolist())
    assert picked <= {1, 2, 4, 5} and len(picked) == 3 and bool(valid[0].all())
    assert np.asarray(valid[1]).tolist() == [True, True, False, False] and nodes[1, 1] == 0
    whole, whole_valid = gt_model.whole_neighbourhood(queries, spd, False)
    assert np.array_equal(np.asarray(whole)[0], np.arange(6)) and np.asarray(whole_valid).tolist()[0] == [
        1,
        1,
        1,
        0,
        1,
        1,
    ]
    core, core_valid = gt_model.sample_neighbours(queries, spd, u, 3, True)
    assert set(np.asarray(core[0, 1:])[np.asarray(core_valid[0, 1:])].tolist()) == {1, 4}


def test_sampling_is_uniform_over_the_candidates():
    spd = jnp.asarray([[0, 1, 2, 1, 3, 2, 1]], jnp.int8)
    u = jax.random.uniform(jax.random.PRNGKey(2), (4000, 1, 7))
    nodes, _ = jax.vmap(lambda v: gt_model.sample_neighbours(jnp.asarray([0]), spd, v, 2, False))(u)
    freq = np.bincount(np.asarray(nodes[:, 0, 1:]).ravel(), minlength=7) / 4000
    np.testing.assert_allclose(freq[[1, 2, 3, 5, 6]], 2 / 5, atol=0.03)
    assert freq[0] == freq[4] == 0


def test_the_gcn_aggregates_a_uniform_mean():
    rng = np.random.default_rng(3)
    forward = jax.jit(gt_model.forward, static_argnums=7)
    w_o, w_v, w_k, w_q, x, a = (rng.normal(size=s) for s in [(8, 6), (6, 6), (6, 6), (6, 6), (5, 6), (8,)])
    params = {"w_o": w_o, "w_v": w_v, "w_k": 0.1 * w_k, "w_q": 0.1 * w_q, "b": np.asarray([0.0, 5.0, -5.0])}
    x = 0.3 * x
    spd = jnp.asarray([[0, 1, 2, 1, 2]] * 5, jnp.int8)
    nodes, valid = jnp.asarray([[0, 1, 2, 3]]), jnp.asarray([[True, True, True, False]])
    f, att = forward(params, a, x, spd, jnp.asarray([0]), nodes, valid, False)
    np.testing.assert_allclose(att[0], [1 / 3, 1 / 3, 1 / 3, 0.0], rtol=1e-6)
    mean = x[:3].mean(0) @ params["w_v"].T
    np.testing.assert_allclose(f[0], jax.nn.relu(mean @ params["w_o"].T) @ a, rtol=1e-5)
    _, att_gt = forward(params, a, x, spd, jnp.asarray([0]), nodes, valid, True)
    assert att_gt[0, 1] > 0.9 and att_gt[0, 3] == 0.0, "the GT's SPD bias b[1] = 5 dominates"


# The experiment: padding


CONFIG = {"n_nodes": 60, "n_labeled": 20, "degree": 8, "k_sampled": 6, "d": 8, "M": 5, "m": 6, "batch": 4}


@pytest.fixture(scope="module")
def padded_pair():
    exp = gt_node_classification.EXPERIMENT
    return run_steps(exp, CONFIG, lambda n, *_: n, 0.5), run_steps(exp, CONFIG, lambda n, *_: 2 * n + 3, 0.5)


def test_padded_run_equals_unpadded_across_nodes_width_and_labels(padded_pair):
    (small, small_metrics), (big, big_metrics) = padded_pair
    np.testing.assert_allclose(big["w_o"][:6], small["w_o"], rtol=1e-4, atol=1e-6)
    assert not np.any(big["w_o"][6:]), "padded neurons stay zero"
    for name in ("w_v", "w_k", "w_q", "b"):
        np.testing.assert_allclose(big[name], small[name], rtol=1e-4, atol=1e-6, err_msg=name)
    for name, value in small_metrics.items():
        np.testing.assert_allclose(big_metrics[name], value, rtol=1e-4, atol=1e-6, err_msg=name)
    assert float(small_metrics["loss"]) < 1.0 and abs(float(small_metrics["b_core"])) > 0  # the steps moved the model
