"""H. Li thesis (spec 001), chapter 4: the network of Eq. (4.1) and its risks, the two-group Gaussian
mixture with Bernoulli labels (C1), the local init, the η_0 rule (C2), replicas trained independently
on one training set, and a padded run equal to the unpadded one across n."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from jaxmem.experiments.li_thesis import gmm, gmm_imbalance, sigmoid_net
from jaxmem.plan.buckets import static_shape, traced_values
from jaxmem.plan.runs import run_key

EXP = gmm_imbalance.EXPERIMENT
training_set = jax.jit(gmm.training_set, static_argnums=(1, 2))
RNG = np.random.default_rng(0)


def test_cross_entropy_and_risks_match_their_definitions():
    w, w_star = RNG.normal(size=(4, 3)), RNG.normal(size=(4, 3))
    x, y = RNG.normal(size=(50, 4)) * 3, RNG.integers(0, 2, 50).astype(float)
    h = np.mean(1 / (1 + np.exp(-x @ w)), axis=1)
    np.testing.assert_allclose(
        sigmoid_net.cross_entropy(w, x, y), -(y * np.log(h) + (1 - y) * np.log(1 - h)), rtol=1e-5
    )
    p = np.mean(1 / (1 + np.exp(-x @ w_star)), axis=1)
    ce, kl = sigmoid_net.risks(jnp.asarray(w), jnp.asarray(w_star), jnp.asarray(x))
    np.testing.assert_allclose(ce, np.mean(-(p * np.log(h) + (1 - p) * np.log(1 - h))), rtol=1e-4)
    entropy = np.mean(-(p * np.log(p) + (1 - p) * np.log(1 - p)))
    np.testing.assert_allclose(kl, ce - entropy, rtol=1e-3)
    assert float(kl) > 0 and abs(float(sigmoid_net.risks(w_star, w_star, x)[1])) < 1e-6


CFG = {"lam2": 0.2, "mu1": 1.5, "mu2": -0.5, "sigma1": 2.0, "sigma2": 0.5, "cov": 1}


@pytest.fixture(scope="module")
def mixture():
    cfg = {k: jnp.asarray(v) for k, v in CFG.items()}
    key = jax.random.PRNGKey(1)
    (g,) = jax.random.normal(key, (1, 4, 4))
    rot = gmm.rotation(g, 1)
    w_star = jnp.asarray(RNG.normal(size=(4, 2)), jnp.float32)
    data = training_set(key, 40000, 4, w_star, rot, cfg)
    return jax.tree.map(np.asarray, data), np.asarray(rot), w_star, cfg


def test_mixture_has_its_fractions_means_and_covariances(mixture):
    data, rot, w_star, _ = mixture
    x, group = data["x"], data["group"]
    assert abs(np.mean(group) - 0.2) < 0.01
    np.testing.assert_allclose(rot @ rot.T, np.eye(4), atol=1e-5)
    for g, (mu, s) in enumerate([(1.5, 2.0), (-0.5, 0.5)]):
        xs = x[group == g]
        cov = s**2 * rot.T @ np.diag([1.0, 1.1, 1.2, 1.3]) @ rot
        assert np.max(np.abs(xs.mean(axis=0) - mu)) < 4 * s / np.sqrt(len(xs))
        assert np.max(np.abs(np.cov(xs.T) - cov)) < 0.06 * np.max(np.abs(cov))
    assert abs(np.mean(data["y"]) - np.mean(np.asarray(sigmoid_net.prob(w_star, x)))) < 0.01  # y ~ Bern(H(W*, x))


def test_training_sets_nest_along_n(mixture):
    _, rot, w_star, cfg = mixture
    small = training_set(jax.random.PRNGKey(1), 100, 4, w_star, jnp.asarray(rot), cfg)
    for name, value in small.items():
        np.testing.assert_allclose(value, mixture[0][name][:100], rtol=1e-6, atol=1e-6, err_msg=name)


def test_local_init_lies_on_the_sphere_of_its_radius():
    w_star = jnp.ones((5, 3))
    w = gmm_imbalance.local_init(jax.random.PRNGKey(2), w_star, 7, 0.1)
    np.testing.assert_allclose(np.linalg.norm(w - w_star, axis=(1, 2)), 0.1, rtol=1e-5)
    assert len({round(float(v), 6) for v in w[:, 0, 0]}) == 7


def test_step_size_rule():
    config = EXP.complete({"n": 10, "lam2": 0.25, "mu1": 2.0, "mu2": -1.0, "sigma1": 3.0, "sigma2": 1.0})
    expected = 1 / (0.75 * (2 + 3) ** 2 + 0.25 * (1 + 1) ** 2)
    assert EXP.resolve(config)["eta0"] == pytest.approx(expected)
    assert EXP.resolve({**config, "step_rule": "fixed"})["eta0"] == 1.0


def run_steps(config, pad, steps=3):
    shape = static_shape(EXP, config, pad)
    dyn = {k: jnp.asarray(v) for k, v in traced_values(EXP, config).items()} | {"lr": jnp.asarray(1.0)}

    @jax.jit
    def go():
        params, problem = EXP.init(run_key(0, 5), shape, dyn)
        opt = EXP.optimizer(dyn)
        state = opt.init(params)
        for _ in range(steps):
            grads = jax.grad(EXP.loss)(params, problem, shape, dyn, None)
            updates, state = opt.update(grads, state, params)
            params = optax.apply_updates(params, updates)
        return params, problem, EXP.evaluate(params, problem, shape, dyn)

    return go()


CONFIG = {"d": 4, "K": 2, "replicas": 3, "n": 30, "n_test": 500, "lam2": 0.3, "mu1": 1.0, "mu2": -1.0}


@pytest.fixture(scope="module")
def padded_pair():
    return run_steps(CONFIG, lambda n, *_: n), run_steps(CONFIG, lambda n, *_: 2 * n + 5)


def test_padded_run_equals_unpadded_across_n(padded_pair):
    (small, _, small_metrics), (big, _, big_metrics) = padded_pair
    np.testing.assert_allclose(big["w"], small["w"], rtol=1e-5, atol=1e-6)
    for name, value in small_metrics.items():
        np.testing.assert_allclose(big_metrics[name], value, rtol=1e-4, atol=1e-6, err_msg=name)


def test_replicas_take_independent_gd_steps_on_one_training_set(padded_pair):
    (trained, problem, metrics), _ = padded_pair
    config = EXP.effective(CONFIG)
    shape = static_shape(EXP, config, lambda n, *_: n)
    dyn = {k: jnp.asarray(v) for k, v in traced_values(EXP, config).items()}

    @jax.jit
    def by_hand():  # replica 1 alone: W ← W − η_0 ∇f_n(W)
        w = EXP.init(run_key(0, 5), shape, dyn)[0]["w"][1]
        for _ in range(3):
            w = w - config["eta0"] * jax.grad(gmm_imbalance.empirical_risk)(w, problem["train"], 30)
        return w

    w = by_hand()
    np.testing.assert_allclose(trained["w"][1], w, rtol=1e-5, atol=1e-6)
    spread = np.sqrt(np.sum((trained["w"] - trained["w"].mean(axis=0)) ** 2) / 3)
    np.testing.assert_allclose(metrics["v_w"], spread, rtol=1e-5)
    assert float(metrics["excess_avg"]) > 0 and float(metrics["excess_g2"]) > 0
