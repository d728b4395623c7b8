"""H. Li thesis (spec 001), chapter 4: the network of Eq. (4.1) and its risks, the two-group Gaussian
mixture with Bernoulli labels (C1), the local init, the η_0 rule (C2), replicas trained independently
on one training set, and a padded run equal to the unpadded one across n."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from jaxmem.experiments.li_thesis import gmm, gmm_imbalance, sigmoid_net, tensor_init, theory
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


def test_curvature_step_is_one_over_the_top_hessian_eigenvalue(padded_pair):
    (_, problem, _), _ = padded_pair
    w = jnp.asarray(RNG.normal(size=(4, 2)), jnp.float32)
    rule = gmm_imbalance.STEPS.index("curvature")

    @jax.jit
    def both(w):
        risk = lambda v: gmm_imbalance.empirical_risk(v.reshape(4, 2), problem["train"], 30)  # noqa: E731
        scales = gmm_imbalance.step_scales(jnp.stack([w, w]), problem["train"], 30, rule)
        return jax.hessian(risk)(w.ravel()), scales, gmm_imbalance.step_scales(w[None], problem["train"], 30, 0)

    hessian, scales, theory_rule = both(w)
    np.testing.assert_allclose(scales, 1 / np.max(np.linalg.eigvalsh(np.asarray(hessian, np.float64))), rtol=1e-3)
    assert np.all(np.asarray(theory_rule) == 1.0)


def test_rho_matches_a_direct_integration():
    u, sigma = np.array([0.3, -1.0, 2.0]), 0.7
    z = np.linspace(-14, 14, 200001)[None, :] + u[:, None]
    density = np.exp(-((z - u[:, None]) ** 2) / 2) / np.sqrt(2 * np.pi)
    slope = theory.sigmoid_slope(sigma * z)

    def mean(f):
        return np.trapezoid(f * density, z, axis=1)

    a0, a2, b0, b2 = mean(slope), mean(slope * z**2), mean(slope**2), mean(slope**2 * z**2)
    first = min((u[j] ** 2 + 1) * (b0[i] - a0[i] ** 2) for i in range(3) for j in range(3) if j != i)
    expected = min(first, np.min(b2 - a2**2 / (u**2 + 1)))
    assert theory.rho(u, sigma) == pytest.approx(expected, rel=1e-6)


@pytest.mark.slow
def test_score_moments_are_the_mixture_density_derivatives():
    """S_j = (−1)^j ∇^j p / p (C.2): the closed forms of tensor_init against derivatives of p."""
    d, rng = 3, np.random.default_rng(3)
    means = jnp.asarray(rng.normal(size=(2, d)))
    roots = rng.normal(size=(2, d, d)) / 2 + np.eye(d)
    precisions = jnp.asarray(np.linalg.inv(roots @ roots.transpose(0, 2, 1)))
    weights = jnp.asarray([0.3, 0.7])

    def density(x):
        diff = x - means
        quad = jnp.einsum("ld,lde,le->l", diff, precisions, diff)
        return jnp.sum(weights * jnp.sqrt(jnp.linalg.det(precisions)) * jnp.exp(-quad / 2))

    x, c = jnp.asarray(rng.normal(size=(4, d))), jnp.asarray(rng.normal(size=4))
    p = jax.vmap(density)(x)
    grad2 = jax.vmap(jax.hessian(density))(x) / p[:, None, None]
    grad3 = -jax.vmap(jax.jacfwd(jax.hessian(density)))(x) / p[:, None, None, None]
    r, h = tensor_init.scores(x, means, precisions, jnp.log(weights))
    np.testing.assert_allclose(jnp.einsum("nl,nld->nd", r, h), -jax.vmap(jax.grad(density))(x) / p[:, None], rtol=1e-4)
    np.testing.assert_allclose(
        tensor_init.second_moment(c, r, h, precisions), np.einsum("n,nab->ab", c, grad2), rtol=1e-3
    )
    a, proj = jnp.asarray([0.6, 0.0, 0.8]), jnp.asarray(rng.normal(size=(d, 2)))
    along = np.einsum("n,nabc,c->ab", c, grad3, a)
    np.testing.assert_allclose(tensor_init.third_along(a, c, r, h, precisions), along, rtol=1e-3, atol=1e-5)
    projected = np.einsum("n,nabc,ai,bj,ck->ijk", c, grad3, proj, proj, proj)
    np.testing.assert_allclose(tensor_init.third_moment(proj, c, r, h, precisions), projected, rtol=1e-3, atol=1e-5)


def test_tensor_power_method_recovers_an_orthogonal_decomposition():
    basis = np.linalg.qr(RNG.normal(size=(3, 3)))[0]
    tensor = sum(c * np.einsum("a,b,c->abc", v, v, v) for c, v in zip((2.0, -1.0, 0.5), basis.T))
    found = np.asarray(tensor_init.power_components(jnp.asarray(tensor, jnp.float32), jax.random.PRNGKey(0)))
    np.testing.assert_allclose(np.sort(np.max(np.abs(found @ basis), axis=1)), 1.0, atol=1e-4)
