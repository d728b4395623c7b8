"""Chen & Li (2024), spec 003 E0: the softmax lemmas (R1), the gadget and the parity teacher (R3, R4),
the Phase I identities (R2), Algorithm 5's exact recovery (R7), the teacher sampler, and a padded
student equal to the unpadded one across n, m_S and m_T."""

import itertools
import math

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from jaxmem.experiments.chen_li24 import controls, inputs, mha_parity, mha_teacher, model, parity, phase1, phase6
from jaxmem.experiments.chen_li24 import student, teacher
from jaxmem.plan.buckets import static_shape, traced_values
from jaxmem.plan.runs import run_key

RNG = np.random.default_rng(0)
KNOBS = {**{n: f.default for n, f in teacher.FIELDS.items()}, "w_kind": 0}


def softmax(v):
    e = np.exp(v - v.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def all_inputs(k: int, d: int) -> np.ndarray:
    """Every X ∈ {±1}^{k×d}: expectations over the uniform distribution exactly."""
    return np.array(list(itertools.product([-1.0, 1.0], repeat=k * d))).reshape(-1, k, d)


def sampled_teacher(m, d, **knobs):
    cfg = {**KNOBS, "m_T": m, **knobs}
    return teacher.sample(jax.random.PRNGKey(3), m, d, {n: jnp.asarray(v) for n, v in cfg.items()})


# R1: softmax lemmas 3.6-3.8 (§3.4), 1e4 random instances each


def test_lemma_3_6_holds_for_the_top_entry_and_is_off_by_two_in_l1():
    """The proof bounds 1 − softmax(v)_{a*} by (k−1)/(e^τ+k−1); the ℓ1 distance to e_{a*} is twice that."""
    v = RNG.normal(size=(10000, 6)) * RNG.uniform(0.1, 20, size=(10000, 1))
    top = np.sort(v, axis=1)
    bound = 5 / (np.exp(top[:, -1] - top[:, -2]) + 5)
    gap = np.abs(softmax(v) - np.eye(6)[v.argmax(axis=1)]).sum(axis=1)
    assert np.all(gap <= 2 * bound + 1e-12) and np.any(gap > bound)
    assert np.allclose(gap, 2 * (1 - softmax(v).max(axis=1)))


def test_lemma_3_7_two_sparse_softmax():
    k, eps = 6, 0.05
    v = RNG.normal(size=(10000, k)) * 3
    order = np.argsort(v, axis=1)
    rest = np.take_along_axis(v, order[:, :-2], axis=1)
    shift = np.maximum(0.0, math.log(2 * k / eps) - (v.max(axis=1) - rest.max(axis=1)))
    np.put_along_axis(v, order[:, :-2], rest - shift[:, None], axis=1)  # v_{a1} − v_{a'} ≥ log(2k/ε)
    mask = np.zeros_like(v, bool)
    np.put_along_axis(mask, order[:, -2:], True, axis=1)
    assert np.all(np.abs(softmax(v) - softmax(np.where(mask, v, -np.inf))).sum(axis=1) <= eps)


def log_ratio_change(v, w):
    return np.abs(np.log(v[:, 0] / v[:, 1]) - np.log(w[:, 0] / w[:, 1]))


def test_lemma_3_8_holds_with_the_exact_constant_and_fails_as_printed_at_the_extreme():
    """The tight bound is log((1+3ε)/(1−3ε)) = 6ε + 18ε³ + ..., not 6ε: the proof's denominator assumes
    ε_i ≥ 0. v = (1/3, 1/3, 1/3), v' = (1/3 − ε, 1/3 + ε, 1/3) exceeds 6ε for every ε > 0."""
    eps = RNG.uniform(0, 1 / 6, size=20000)
    v = RNG.dirichlet(np.ones(3), size=20000)
    w = v + RNG.uniform(-1, 1, size=v.shape) * eps[:, None]
    ok = (v[:, 0] >= 1 / 3) & (v[:, 1] >= 1 / 3) & (w.min(axis=1) > 0)
    tight = np.log((1 + 3 * eps[ok]) / (1 - 3 * eps[ok]))
    assert ok.sum() > 1000 and np.all(log_ratio_change(v[ok], w[ok]) <= tight + 1e-12)
    e = np.array([0.01, 0.1, 1 / 6])
    extreme_v, extreme_w = np.full((3, 3), 1 / 3), np.stack([1 / 3 - e, 1 / 3 + e, np.full(3, 1 / 3)], axis=1)
    assert np.all(log_ratio_change(extreme_v, extreme_w) > 6 * e)


# R3: the gadget (Prop 11.3, 11.4) and the path-graph distance matrix (Lemma 11.6)


def test_gadget_is_within_exp_of_abs():
    z = np.linspace(-40, 40, 80001)
    assert parity.phi(0.0) == 0.0 and np.max(np.abs(parity.phi(z) - np.abs(z)) - np.exp(-np.abs(z) / 3)) < 0


def test_prop_11_4_four_head_identity():
    d, tau, s = 6, 1.3, 0.7
    v = RNG.normal(size=d - 1)
    w, w2 = np.append(tau, v), np.append(-tau, v)
    e1 = np.eye(d)[0]
    theta = np.stack([np.outer(e1, w), -np.outer(e1, w), np.outer(e1, w2), -np.outer(e1, w2)])
    proj = np.stack([np.outer(w, e1), -np.outer(w, e1), s * np.outer(w2, e1), -s * np.outer(w2, e1)])
    x = all_inputs(2, d)
    a, dz = x[:, :, 0], (x[:, 0, 1:] - x[:, 1, 1:]) @ v
    gate = parity.phi((a[:, 0] - a[:, 1]) * tau + dz) + s * parity.phi((a[:, 1] - a[:, 0]) * tau + dz)
    out = phase6.forward(theta, proj, x)
    assert np.max(np.abs(out[:, :, 0] - a * gate[:, None])) < 1e-12 and np.all(out[:, :, 1:] == 0)


@pytest.mark.parametrize("m", [3, 7, 20])
def test_lemma_11_6_distance_matrix_inverse_closed_form(m):
    dist = np.abs(np.subtract.outer(np.arange(m), np.arange(m))).astype(float)
    inv = -np.eye(m) + 0.5 * (np.eye(m, k=1) + np.eye(m, k=-1))
    inv[0, 0] = inv[-1, -1] = (2 - m) / (2 * m - 2)
    inv[0, -1] = inv[-1, 0] = 1 / (2 * m - 2)
    assert np.max(np.abs(dist @ inv - np.eye(m))) < 1e-13


# R4: the parity teacher (spec §4 recipe)


@pytest.mark.parametrize("variant", parity.VARIANTS)
@pytest.mark.parametrize(("d", "s", "rho"), [(5, 1, 4.0), (5, 2, 4.0), (6, 3, 8.0)])
def test_parity_teacher_is_exact_in_float64(variant, d, s, rho):
    theta, w = parity.heads(d, s, rho, variant)
    x = all_inputs(2, d)
    assert theta.shape[0] == parity.head_count(s, variant) == (4 if variant == "minimal" else 8) * (s + 1)
    assert np.max(np.abs(phase6.forward(theta, w, x) - parity.target(x, s))) < 1e-13
    assert abs(np.mean(np.sum(parity.target(x, s) ** 2, axis=(1, 2))) - 1.0) < 1e-12  # trivial error 1


def test_parity_teacher_in_float32_and_the_interpolation_gets_worse_conditioned_with_s():
    theta, w = (jnp.asarray(a, jnp.float32) for a in parity.heads(16, 3, 8.0, "minimal"))
    x = RNG.choice([-1.0, 1.0], size=(4096, 2, 16))
    assert np.max(np.abs(np.asarray(model.mha(theta, w, jnp.asarray(x, jnp.float32))) - parity.target(x, 3))) < 1e-4
    conds = [np.linalg.cond(parity.interpolation_matrix(s, 4.0)) for s in (1, 2, 3, 4)]
    assert conds == sorted(conds)


def test_gaussian_elimination_recovers_the_parity_support():
    d, s = 8, 2
    x = RNG.choice([-1.0, 1.0], size=(8 * d, 2, d))
    found = controls.parity_support(x, parity.target(x, s))
    assert found is not None and sorted(np.nonzero(found)[0]) == [0, 1, d - 1, d]
    assert controls.parity_support(x[:4], parity.target(x[:4], s)) is None  # too few draws: not unique


def test_polynomial_regression_of_the_parity_degree_fits_and_lower_degrees_do_not():
    d, s = 4, 1
    x, x_test = all_inputs(2, d), RNG.choice([-1.0, 1.0], size=(256, 2, d))
    y, y_test = parity.target(x, s), parity.target(x_test, s)
    assert controls.polynomial_error(x, y, x_test, y_test, 2 * s + 1) < 1e-20
    assert controls.polynomial_error(x, y, x_test, y_test, 2 * s) > 0.5


# R2: Phase I identities


def test_phase1_population_identities_are_exact_for_boolean_inputs():
    """(a) (1/k) E[XᵀJX] = I; (b) a teacher with Θ_i = 0 has (1/k) E[XᵀJY] = ΣW_i (enumerated)."""
    x = all_inputs(2, 4)
    assert np.array_equal(np.asarray(phase1.estimate(jnp.asarray(x), jnp.asarray(x))), np.eye(4))
    _, w = sampled_teacher(3, 4)
    y = model.mha(jnp.zeros((3, 4, 4)), w, jnp.asarray(x, jnp.float32))
    assert np.max(np.abs(phase1.estimate(jnp.asarray(x, jnp.float32), y) - w.sum(axis=0))) < 1e-6


@pytest.mark.parametrize("heads", [1, 3])
def test_one_gd_step_from_zero_on_uniform_heads_lands_on_the_phase1_estimate(heads):
    """The student's own loss at Θ = 0, W = 0: one full-batch GD step of size 1/(2 m_S) gives ΣW_i = Ŵ."""
    theta, w = sampled_teacher(2, 6)
    x = jnp.asarray(RNG.choice([-1.0, 1.0], size=(300, 4, 6)), jnp.float32)
    problem = {"x": x, "y": model.mha(theta, w, x)}
    params = {"theta": jnp.zeros((heads, 6, 6)), "w": jnp.zeros((heads, 6, 6))}
    grads = jax.grad(student.loss)(params, problem, 300, heads)
    stepped = params["w"] - grads["w"] / (2 * heads)
    target = phase1.estimate(x, problem["y"])
    assert float(jnp.linalg.norm(stepped.sum(axis=0) - target) / jnp.linalg.norm(target)) < 1e-6


# R7: Algorithm 5 with the exact attention matrices


def test_algorithm_5_recovers_the_projection_matrices_exactly():
    m, d, k = 3, 6, 4
    theta, w = (np.asarray(a, np.float64) for a in sampled_teacher(m, d))
    x = RNG.choice([-1.0, 1.0], size=(3 * m * d // k, k, d))  # N k ≥ m d, with room
    recovered = phase6.recover(theta, x, phase6.forward(theta, w, x))
    assert np.linalg.norm(recovered - w) / np.linalg.norm(w) < 1e-10


# The §1.4 sampler


def test_teacher_sampler_norms_ranks_and_nesting_along_heads():
    theta, w = sampled_teacher(4, 8, m_T=3, s_theta=2.5, r=3, lam=0.25)
    norms = np.linalg.norm(theta, axis=(1, 2))
    assert abs(norms[0] - 2.5) < 1e-5 and np.all(norms[1:3] <= 2.5 + 1e-5) and np.all(norms[1:3] >= 1.25 - 1e-5)
    assert norms[3] == 0 and np.linalg.norm(w[3]) == 0  # a padded head
    assert np.allclose(np.linalg.matrix_rank(np.asarray(theta[:3]), tol=1e-4), 3)
    assert abs(np.linalg.norm(w[0]) - 1) < 1e-5
    diag = teacher.diagnostics(theta, w, 3)
    assert abs(float(diag["r_theta"]) - 3) < 1e-3 and abs(float(diag["r_w"]) - 8) < 1e-2
    fewer, _ = sampled_teacher(4, 8, m_T=2, s_theta=2.5, r=3, lam=0.25)
    assert np.array_equal(fewer[:2], theta[:2])


def test_trace_shift_and_coherence_ablations_move_their_proxies():
    base = teacher.diagnostics(*sampled_teacher(3, 8), 3)
    shifted = teacher.diagnostics(*sampled_teacher(3, 8, trace_shift=3.0), 3)
    coherent = teacher.diagnostics(*sampled_teacher(3, 8, theta_coherence=0.9), 3)
    assert float(shifted["chi"]) > 2.0 > float(base["chi"])
    assert float(coherent["kappa"]) > 0.9 > float(base["kappa"])


# A padded student equals the unpadded one (n, m_S and m_T padded)


def setup(config, pad, exp=mha_teacher.EXPERIMENT):
    """The shape, traced values (lr 1e-2) and key of one run (of mha_teacher unless given)."""
    dyn = {k: jnp.asarray(v) for k, v in traced_values(exp, config).items()} | {"lr": jnp.asarray(1e-2)}
    return static_shape(exp, config, pad), dyn, run_key(0, 7)


def run_steps(config, pad, steps=5):
    exp = mha_teacher.EXPERIMENT
    shape, dyn, key = setup(config, pad)

    @jax.jit
    def go():
        params, problem = exp.init(key, shape, dyn)
        opt = exp.optimizer(dyn)
        state = opt.init(params)
        for _ in range(steps):
            grads = jax.grad(exp.loss)(params, problem, shape, dyn, None)
            updates, state = opt.update(grads, state, params)
            params = optax.apply_updates(params, updates)
        return params, exp.evaluate(params, problem, shape, dyn)

    return go()


TINY = {"d": 4, "k": 3, "m_T": 2, "m_S": 3, "n": 10, "n_test": 64, "n_val": 64}


@pytest.fixture(scope="module")
def padded_pair():
    return run_steps(TINY, lambda n, *_: n), run_steps(TINY, lambda n, *_: 2 * n + 3)


def test_padded_student_equals_unpadded(padded_pair):
    (small, small_metrics), (big, big_metrics) = padded_pair
    for name in ("theta", "w"):
        np.testing.assert_allclose(big[name][:3], small[name], rtol=1e-4, atol=1e-6)
        assert not np.any(big[name][3:]), "padded heads stay zero"
    for name, value in small_metrics.items():
        np.testing.assert_allclose(big_metrics[name], value, rtol=1e-4, atol=1e-6, err_msg=name)


# E7 and E8: the GD option, head specialisation, the random-features student


def test_gd_option_is_plain_gd_and_adam_stays_optax_adam():
    params = {"theta": jnp.asarray(RNG.normal(size=(2, 3, 3)), jnp.float32), "w": jnp.ones((2, 3, 3))}
    grads = jax.tree.map(lambda p: jnp.asarray(RNG.normal(size=p.shape), jnp.float32), params)
    lr = jnp.asarray(0.05)
    gd = mha_teacher.optimizer({"optimizer": jnp.asarray(1), "lr": lr})
    updates, _ = gd.update(grads, gd.init(params), params)
    for name in params:
        np.testing.assert_array_equal(optax.apply_updates(params, updates)[name], params[name] - lr * grads[name])
    adam, reference = mha_teacher.optimizer({"optimizer": jnp.asarray(0), "lr": lr}), optax.adam(lr)
    state, ref_state = adam.init(params), reference.init(params)
    for _ in range(3):
        updates, state = adam.update(grads, state, params)
        ref_updates, ref_state = reference.update(grads, ref_state, params)
        for name in params:
            np.testing.assert_array_equal(updates[name], ref_updates[name])


def test_specialisation_is_zero_for_a_student_equal_to_the_teacher():
    """Any order of the teacher's heads, with extra (padded or surplus) student heads; one head off."""
    theta, _ = sampled_teacher(4, 5, m_T=3)
    copy = jnp.concatenate([theta[2::-1], jnp.ones((2, 5, 5))])  # 3 teacher heads reversed, 1 surplus, 1 padded
    exact = student.specialisation(copy, theta, 4, 3)
    assert all(float(v) == 0 for v in exact.values())
    off = student.specialisation(copy.at[0].multiply(0.5), theta, 3, 3)  # teacher head 2 at half its norm
    assert float(off["head_error_min"]) == 0 and abs(float(off["head_error_max"]) - 0.5) < 1e-6
    assert abs(float(off["head_error_mean"]) - 0.5 / 3) < 1e-6


def test_random_features_student_keeps_theta_at_its_init_and_trains_w():
    config = {**TINY, "student": "random_features", "optimizer": "gd"}
    shape, dyn, key = setup(config, lambda n, *_: n)
    start, _ = mha_teacher.EXPERIMENT.init(key, shape, dyn)
    trained, _ = run_steps(config, lambda n, *_: n, steps=3)
    np.testing.assert_array_equal(trained["theta"], start["theta"])
    assert float(jnp.max(jnp.abs(trained["w"] - start["w"]))) > 1e-4


# Early stopping reads the validation set, success the test set: independent draws, so a run is not
# judged on the set that stopped it


def rows(x) -> set:
    return {tuple(np.asarray(r).ravel()) for r in x}


def test_validation_and_test_sets_are_separate_draws_measured_apart(padded_pair):
    """mha_teacher (TINY's shapes: its eager ops are compiled already) and mha_parity."""
    (_, metrics), _ = padded_pair
    assert float(metrics["val_error"]) != float(metrics["test_error"])
    shape, dyn, key = setup(TINY, lambda n, *_: n)
    _, problem = mha_teacher.EXPERIMENT.init(key, shape, dyn)
    assert problem["x_val"].shape == problem["x_test"].shape and not np.array_equal(problem["x_val"], problem["x_test"])
    parity_run = mha_parity.EXPERIMENT.effective({"d": 8, "s": 1, "n": 8, "n_test": 8, "n_val": 8})
    shape, dyn, key = setup(parity_run, lambda n, *_: n, mha_parity.EXPERIMENT)
    params, problem = mha_parity.EXPERIMENT.init(key, shape, dyn)
    assert not rows(problem["x_val"]) & rows(problem["x_test"])  # 8 + 8 of 2^16 inputs: none in common
    metrics = mha_parity.EXPERIMENT.evaluate(params, problem, shape, dyn)
    assert float(metrics["val_error"]) != float(metrics["test_error"])


def test_each_held_out_set_nests_along_its_own_size_and_ignores_the_others():
    """Shape-stable draws (both experiments draw their held-out sets with inputs.held_out)."""
    teacher_fn = lambda x: 2.0 * x  # noqa: E731
    key = run_key(0, 7)
    base, more_val, more_test = (
        inputs.held_out(key, {"test": t, "val": v}, 3, 4, "boolean", teacher_fn) for t, v in ((8, 8), (8, 16), (16, 8))
    )
    assert not rows(base["x_val"]) & rows(base["x_test"])
    np.testing.assert_array_equal(more_val["x_val"][:8], base["x_val"])
    np.testing.assert_array_equal(more_val["x_test"], base["x_test"])
    np.testing.assert_array_equal(more_test["x_test"][:8], base["x_test"])
    np.testing.assert_array_equal(more_test["x_val"], base["x_val"])
    np.testing.assert_array_equal(base["y_val"], 2.0 * base["x_val"])
