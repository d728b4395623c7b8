"""H. Li thesis (spec 001), chapter 2: the pattern data model (composition, labels, noise, nesting),
the ViT of Eq. (2.1) (masked softmax = dropped tokens, permutation invariance, the §0.3 init errors),
token sparsification, the frozen-attention CNN, and a padded run equal to the unpadded one across n
and m."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from jaxmem.experiments.li_thesis import patterns, shallow_vit, sparsify, vit
from jaxmem.plan.buckets import static_shape, traced_values
from jaxmem.plan.runs import run_key

L, D, M = 20, 6, 4
CFG = {"alpha": 0.4, "alpha_conf": 0.15, "c0": 0.01, "c_big": 0.2, "noisy_frac": 0.0}


draw = jax.jit(patterns.sample, static_argnums=(1, 2, 3, 4))
forward = jax.jit(vit.forward)


def sample(count, composition, **knobs):
    cfg = {k: jnp.asarray(v, jnp.float32) for k, v in {**CFG, "composition": composition, **knobs}.items()}
    return jax.tree.map(np.asarray, draw(jax.random.PRNGKey(0), count, L, D, M, cfg))


@pytest.fixture(scope="module")
def fixed():
    return sample(64, 0)


@pytest.fixture(scope="module")
def iid():
    return sample(2000, 1)


@pytest.fixture(scope="module")
def noisy():
    return sample(2000, 1, noisy_frac=0.3)


def test_fixed_composition_has_the_exact_counts_and_an_even_split(fixed):
    role = fixed["role"]
    assert np.all(np.sum(role == patterns.RELEVANT, axis=1) == round(0.4 * L))
    assert np.all(np.sum(role == patterns.CONFUSION, axis=1) == round(0.15 * L))
    nd = np.stack([np.sum(role == j, axis=1) for j in range(2, M)], axis=1)
    assert np.all(nd.max(axis=1) - nd.min(axis=1) <= 1) and len({tuple(r) for r in nd}) > 1  # remainder at random


def test_iid_composition_has_alpha_star_relevant_tokens_and_a_strict_majority(iid):
    role = iid["role"]
    rel, conf = np.sum(role == patterns.RELEVANT, axis=1), np.sum(role == patterns.CONFUSION, axis=1)
    assert np.all(rel > conf)
    assert np.std(rel) > 1.0  # compositions vary per sample
    # conditioning on n_rel > n_conf lifts the mean a little above α* (rarely binds at these α)
    assert 0.4 <= np.mean(rel) / L < 0.43 and abs(np.mean(conf) / L - 0.15) < 0.02
    assert np.all(np.isin(role, np.arange(M)))


def test_labels_are_balanced_and_choose_the_relevant_pattern(fixed):
    y, x, role = fixed["y"], fixed["x"], fixed["role"]
    assert np.sum(y) == 0 and set(np.unique(y)) == {-1.0, 1.0}
    nearest = np.argmax(x @ np.eye(M, D).T, axis=-1)
    relevant = role == patterns.RELEVANT
    expected = np.where(y[:, None] > 0, 0, 1) * np.ones_like(role)
    assert np.array_equal(nearest[relevant], expected[relevant])
    assert np.array_equal(nearest[role == patterns.CONFUSION], (1 - expected)[role == patterns.CONFUSION])


def test_tokens_are_patterns_plus_gaussian_noise_of_std_c0(iid, noisy):
    noise = iid["noise"]
    assert abs(np.mean(noise**2) / (D * 0.01**2) - 1) < 0.02
    offset = iid["x"] - np.eye(M, D)[np.argmax(iid["x"] @ np.eye(M, D).T, axis=-1)]
    assert abs(np.corrcoef(offset[..., 0].ravel(), (iid["role"] == 0).ravel())[0, 1]) < 0.03  # independent draws
    assert abs(np.mean(noisy["noise"] > 0.1) - 0.3) < 0.01  # c_big = 0.2 on 30 % of the tokens


def test_samples_nest_along_the_set_size(fixed):
    small = sample(16, 0)
    for name, value in small.items():
        np.testing.assert_allclose(value, fixed[name][:16], rtol=1e-6, atol=0, err_msg=name)


# The model (Eq. 2.1)


def random_params(key, m=12):
    g = jax.random.normal(key, (4, max(m, D), D))
    return {"w_o": g[0, :m], "w_v": g[1, :D], "w_k": g[2, :D], "w_q": g[3, :D]}, jax.random.normal(key, (m,))


def test_masked_tokens_are_dropped_tokens_and_the_model_is_permutation_invariant(fixed):
    params, a = random_params(jax.random.PRNGKey(1))
    x = jnp.asarray(fixed["x"][:4])
    keep = jnp.arange(L) % 3 != 0
    f_masked, _ = forward(params, a, x, jnp.broadcast_to(keep, (4, L)))
    f_dropped, _ = forward(params, a, x[:, keep], jnp.ones((4, int(keep.sum())), bool))
    np.testing.assert_allclose(f_masked, f_dropped, rtol=1e-5, atol=1e-6)
    perm = np.random.default_rng(0).permutation(L)
    f, _ = forward(params, a, x, jnp.ones((4, L), bool))
    f_perm, _ = forward(params, a, x[:, perm], jnp.ones((4, L), bool))
    np.testing.assert_allclose(f, f_perm, rtol=1e-5, atol=1e-6)


def test_uniform_attention_reduces_to_a_perceptron_on_the_mean_token(fixed):
    params, a = random_params(jax.random.PRNGKey(2))
    params = {**params, "w_k": jnp.zeros((D, D))}
    x = jnp.asarray(fixed["x"][:4])
    f, att = forward(params, a, x, jnp.ones((4, L), bool))
    np.testing.assert_allclose(att, 1.0 / L, rtol=1e-6)
    expected = jax.nn.relu(x.mean(axis=1) @ params["w_v"].T @ params["w_o"].T) @ a
    np.testing.assert_allclose(f, expected, rtol=1e-4, atol=1e-6)
    mass = vit.relevant_mass(att, jnp.asarray(fixed["role"][:4] == 0), jnp.ones((4, L), bool))
    np.testing.assert_allclose(mass, np.mean(fixed["role"][:4] == 0, axis=1), rtol=1e-5)


def test_init_meets_assumption_2_3_1_with_equality_and_pads_inert_neurons():
    def init(sigma):
        cfg = {"sigma": jnp.asarray(sigma), "delta": jnp.asarray(0.3), "xi": jnp.asarray(0.01)}
        return jax.jit(vit.init, static_argnums=(1, 2, 3))(jax.random.PRNGKey(3), 16, D, M, 10, cfg)

    (params, a), (plain, _) = init(0.1), init(0.0)
    mu = np.eye(M, D)
    np.testing.assert_allclose(np.linalg.norm(mu @ params["w_k"].T - mu, axis=1), 0.3, rtol=1e-5)
    np.testing.assert_allclose(np.linalg.norm(mu @ params["w_q"].T - mu, axis=1), 0.3, rtol=1e-5)
    np.testing.assert_allclose(params["w_k"][:, M:], np.eye(D)[:, M:], atol=1e-7)  # off the patterns: I
    np.testing.assert_allclose(plain["w_v"] @ plain["w_v"].T, np.eye(D), atol=1e-5)  # U is orthogonal
    np.testing.assert_allclose(np.linalg.norm(mu @ (params["w_v"] - plain["w_v"]).T, axis=1), 0.1, rtol=1e-5)
    np.testing.assert_allclose(np.abs(a[:10]), 1 / np.sqrt(10), rtol=1e-6)
    assert not np.any(a[10:]) and not np.any(params["w_o"][10:])
    assert 0.005 < float(np.std(params["w_o"][:10])) < 0.02


def test_sparsification_removes_the_prescribed_tokens(noisy):
    data = jax.tree.map(lambda v: v[:50], noisy)
    r = 6
    for strategy in range(3):
        keep = np.asarray(sparsify.keep_mask(data, r, strategy))
        assert np.all(np.sum(~keep, axis=1) == r)
    irrelevant = np.asarray(sparsify.keep_mask(data, r, 1))
    nd_count = np.sum(data["role"] >= 2, axis=1)
    assert np.all(np.sum(~irrelevant & (data["role"] >= 2), axis=1) == np.minimum(r, nd_count))
    noisy = np.asarray(sparsify.keep_mask(data, r, 2))
    assert np.all(
        np.max(np.where(noisy, data["noise"], 0), axis=1) <= np.min(np.where(noisy, np.inf, data["noise"]), axis=1)
    )


# The experiment: CNN gradients, padding


CONFIG = {"d": D, "M": M, "L": 8, "m": 6, "n": 10, "n_test": 32, "batch": 4, "alpha": 0.5, "alpha_conf": 0.2}


def run_steps(config, pad, steps=2):
    exp = shallow_vit.EXPERIMENT
    shape = static_shape(exp, config, pad)
    dyn = {k: jnp.asarray(v) for k, v in traced_values(exp, config).items()} | {"lr": jnp.asarray(0.5)}
    key = run_key(0, 3)

    @jax.jit
    def go():
        params, problem = exp.init(key, shape, dyn)
        opt = exp.optimizer(dyn)
        state = opt.init(params)
        grads = None
        for t in range(steps):
            grads = jax.grad(exp.loss)(params, problem, shape, dyn, jax.random.fold_in(key, t))
            updates, state = opt.update(grads, state, params)
            params = optax.apply_updates(params, updates)
        return params, exp.evaluate(params, problem, shape, dyn), grads

    return go()


@pytest.fixture(scope="module")
def padded_pair():
    return run_steps(CONFIG, lambda n, *_: n), run_steps(CONFIG, lambda n, *_: 2 * n + 3)


def test_padded_run_equals_unpadded_across_n_and_m(padded_pair):
    (small, small_metrics, _), (big, big_metrics, _) = padded_pair
    np.testing.assert_allclose(big["w_o"][:6], small["w_o"], rtol=1e-4, atol=1e-6)
    assert not np.any(big["w_o"][6:]), "padded neurons stay zero"
    for name in ("w_v", "w_k", "w_q"):
        np.testing.assert_allclose(big[name], small[name], rtol=1e-4, atol=1e-6, err_msg=name)
    for name, value in small_metrics.items():
        np.testing.assert_allclose(big_metrics[name], value, rtol=1e-4, atol=1e-6, err_msg=name)
    assert float(small_metrics["loss"]) < 1.0  # the steps moved the model


def test_the_cnn_freezes_keys_and_queries_and_trains_the_rest():
    _, _, grads = run_steps({**CONFIG, "model": "cnn"}, lambda n, *_: n, steps=1)
    assert not np.any(grads["w_k"]) and not np.any(grads["w_q"])
    assert np.any(grads["w_o"]) and np.any(grads["w_v"])
