"""H. Li thesis (spec 001), chapter 5: the configuration model (degrees, no self-loops, padding), the
normalised adjacency, the topology samplers (R5.1: E[A^s] = A*, and ‖A^s − A*‖∞ shrinks as S_l/N_l → 1),
the labels of Eq. (5.20), and a padded GCN run equal to the unpadded one across N, m and the stubs."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import run_steps

from jaxmem.experiments.li_thesis import gcn_model, gcn_sampling, graph_generators

N, N1, D1, D2 = 120, 12, 12, 2
STUBS = N1 * D1 + (N - N1) * D2
DRAWS = 1000
config_model = jax.jit(graph_generators.configuration_model, static_argnums=(1, 2))


@pytest.fixture(scope="module")
def links():
    return np.asarray(config_model(jax.random.PRNGKey(0), N, STUBS, N, N1, D1, D2))


def test_configuration_model_gives_each_group_about_its_degree(links):
    assert np.array_equal(links, links.T) and not links.diagonal().any()
    degree = links.sum(1)
    assert degree[:N1].max() <= D1 and degree[N1:].max() <= D2, "a node never exceeds its stubs"
    assert degree[:N1].mean() > 0.9 * D1 and degree[N1:].mean() > 0.9 * D2, "few self-pairs and repeats dropped"


def test_configuration_model_pads_inertly(links):
    padded = np.asarray(config_model(jax.random.PRNGKey(0), N + 37, STUBS + 101, N, N1, D1, D2))
    assert np.array_equal(padded[:N, :N], links) and not padded[N:].any()


def test_normalized_adjacency_is_symmetric_with_self_loops(links):
    a = np.asarray(graph_generators.normalized_adjacency(jnp.asarray(links), N))
    degree = links.sum(1) + 1
    np.testing.assert_allclose(a, (links + np.eye(N)) / np.sqrt(np.outer(degree, degree)), rtol=1e-6)


@functools.partial(jax.jit, static_argnums=1)
def draw_statistics(a, index, frac):
    """Over DRAWS draws of A^s (sampler `index`, kept fraction `frac`): the entrywise mean and standard
    error, A*, and the mean ‖A^s − A*‖∞ (one compile per sampler; the draws never leave the program)."""
    active, group1 = jnp.ones(N, bool), jnp.arange(N) < N1
    sample = jax.vmap(lambda k: gcn_model.sampled_adjacency(k, a, active, group1, index, frac, 0.7, 0.3))
    samples = sample(jax.random.split(jax.random.PRNGKey(1), DRAWS))
    a_star = gcn_model.effective_adjacency(a, active, group1, index, 0.7, 0.3)
    inf_error = jnp.mean(jnp.max(jnp.sum(jnp.abs(samples - a_star), axis=2), axis=1))
    return jnp.mean(samples, axis=0), jnp.std(samples, axis=0) / np.sqrt(DRAWS), a_star, inf_error


def sampler_statistics(links, sampler, frac):
    a = graph_generators.normalized_adjacency(jnp.asarray(links), N)
    return draw_statistics(a, gcn_model.SAMPLERS.index(sampler), frac)


@pytest.mark.parametrize("sampler", ["groupwise", "fastgcn"])
def test_sampled_adjacency_is_unbiased_for_a_star(links, sampler):
    """R5.1, Lemma D.1.2's premise: E[A^s] = A* (A P*, or A for FastGCN)."""
    mean, spread, a_star, _ = sampler_statistics(links, sampler, 0.7)
    assert float(jnp.max(jnp.abs(mean - a_star) - 5 * spread)) <= 1e-6


def test_symmetric_sampler_is_unbiased_on_the_diagonal_only(links):
    """Appendix D.1.1 as written (P^s_ii = sqrt(p*_l N_l / S_l)): E[P^s_ii²] = p*_l, but off the diagonal
    E[P^s_ii P^s_jj] = sqrt(p*_i p*_j) · sqrt(N_i N_j / (S_i S_j)) · P(both kept), so E[A^s] = P* A P* only
    as S_l / N_l → 1 (README: a finding, not a bug of the implementation)."""
    mean, spread, a_star, _ = sampler_statistics(links, "symmetric", 0.7)
    sizes = np.where(np.arange(N) < N1, N1, N - N1)
    kept = np.floor(0.7 * sizes + 0.5)  # S_l = round(0.7 N_l)
    same = (np.arange(N)[:, None] < N1) == (np.arange(N)[None, :] < N1)
    both = np.where(
        same,
        kept[:, None] * (kept[:, None] - 1) / (sizes[:, None] * (sizes[:, None] - 1)),
        np.outer(kept / sizes, kept / sizes),
    )
    expected = np.asarray(a_star) * np.where(
        np.eye(N, dtype=bool), 1.0, both / np.sqrt(np.outer(kept / sizes, kept / sizes))
    )
    assert np.max(np.abs(np.asarray(mean) - expected) - 5 * np.asarray(spread)) <= 1e-6
    assert np.max(np.abs(mean - np.asarray(a_star))) > 0.01, "biased off the diagonal at S/N = 0.7"


def test_sampling_error_shrinks_as_the_kept_fraction_grows(links):
    """R5.1: ‖A^s − A*‖∞ falls as S_l / N_l → 1 and vanishes at 1 (the group-wise sampler)."""
    errors = [float(sampler_statistics(links, "groupwise", frac)[3]) for frac in (0.5, 0.7, 0.9, 0.99, 1.0)]
    assert all(a > b for a, b in zip(errors, errors[1:])) and errors[-1] < 1e-5, errors


def test_targets_follow_eq_5_20():
    key = jax.random.PRNGKey(2)
    a, x, w, c = (
        jax.random.normal(jax.random.fold_in(key, i), s) for i, s in enumerate([(5, 5), (5, 3), (3, 4), (4, 2)])
    )
    z = np.asarray(a @ x @ w)
    np.testing.assert_allclose(gcn_model.targets(a, x, w, c), (np.sin(z) * np.tanh(z)) @ np.asarray(c), rtol=1e-5)


CONFIG = {"n_nodes": 50, "n1": 6, "d1": 5, "d2": 2, "n_omega": 20, "m": 6, "d": 4, "p": 3}


def test_padded_gcn_run_equals_unpadded_across_nodes_width_and_stubs():
    exp = gcn_sampling.EXPERIMENT
    small, small_metrics = run_steps(exp, CONFIG, lambda n, *_: n, 0.05)
    big, big_metrics = run_steps(exp, CONFIG, lambda n, *_: 2 * n + 3, 0.05)
    np.testing.assert_allclose(big["w"][:, :6], small["w"], rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(big["v"][:6, :6], small["v"], rtol=1e-4, atol=1e-6)
    assert not np.any(big["w"][:, 6:]) and not np.any(big["v"][6:]) and not np.any(big["v"][:, 6:])
    for name, value in small_metrics.items():
        np.testing.assert_allclose(big_metrics[name], value, rtol=1e-4, atol=1e-6, err_msg=name)
