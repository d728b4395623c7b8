"""Chapter 7 of the H. Li thesis (cot_tasks, cot_model, cot_transformer): Example 1's numbers (R7.1),
the task generator, the prompts' layout, chain-of-thought inference on a hand-built model that attends
to S_k*, and a short trained run whose attention concentrates on same-input same-step columns."""

from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import sgd_trained

from jaxmem.experiments.li_thesis import cot_model, cot_tasks
from jaxmem.experiments.li_thesis import cot_transformer as cot
from jaxmem.spec import sweep as specmod

KEY = jax.random.PRNGKey(0)
SWEEPS = sorted((Path(__file__).parent.parent / "sweeps" / "li_thesis").glob("ch7_*.toml"))
SMALL = {"dx": 16, "M": 8, "M_test": 4, "K": 3, "l_tr": 8, "l_ts": 8, "n_test": 48, "batch": 30}


@jax.jit
def generate(perm, u, tau, rho, sink):
    """A_k of the C.9-4 generator for a 3-step task and its realised statistics."""
    a = cot_tasks.transition_matrices(perm, u, tau, rho, sink, 3)
    return a, cot_tasks.task_statistics(a, cot_tasks.step_targets(perm, 3))


def split(config):
    full = cot.EXPERIMENT.complete(config)
    shape = {k: v for k, v in full.items() if cot.FIELDS[k].kind in ("size", "static")}
    dyn = {k: jnp.asarray(cot.FIELDS[k].traced_value(v)) for k, v in full.items() if cot.FIELDS[k].kind != "static"}
    return shape, {**dyn, "lr": jnp.asarray(1.0)}


def test_example_1_of_the_thesis():
    a = jnp.array([[[0.6, 0.4], [0.4, 0.6]], [[0.4, 0.6], [0.8, 0.2]]])
    stats = cot_tasks.task_statistics(a, jnp.array([[0, 1], [1, 0]]))  # f_1 = id, f_2 = swap
    np.testing.assert_allclose(stats["b"], [[0.56, 0.44], [0.64, 0.36]], atol=1e-6)
    np.testing.assert_allclose([stats["tau"], stats["tau_o"], stats["rho"]], [0.36, 0.56, 1 / 3], atol=1e-6)
    assert not bool(stats["condition"])


def test_cycle_tasks_advance_one_then_two_then_three_places():
    perm = jax.random.permutation(KEY, 10)
    chain = np.asarray(cot_tasks.exact_chain(perm, jnp.arange(10), 3))
    position = np.argsort(np.asarray(perm))
    np.testing.assert_array_equal((position[chain[:, 3]] - position[chain[:, 0]]) % 10, 6)
    assert np.array_equal(np.sort(chain[:, 1]), np.arange(10))  # each f_k is a permutation


@pytest.mark.parametrize(("tau", "rho"), [(0.5, 0.8), (0.1, 0.8), (0.5, 0.95)])
def test_generator_realises_tau_and_rho(tau, rho):
    perm = jax.random.permutation(KEY, 10)
    a, stats = generate(perm, jax.random.uniform(KEY, (3, 10, 10)), tau, rho, -1)
    np.testing.assert_allclose(np.asarray(a).sum(-1), 1.0, atol=1e-6)
    np.testing.assert_allclose([stats["tau"], stats["rho"]], [tau, rho], atol=1e-5)


def test_sink_mode_sends_every_rows_first_chunk_to_one_pattern():
    perm = jax.random.permutation(KEY, 10)
    a, stats = generate(perm, jax.random.uniform(KEY, (3, 10, 10)), 0.2, 0.4, 7)
    a, targets = np.asarray(a), np.asarray(cot_tasks.step_targets(perm, 3))
    rows = targets != 7
    chunk = 0.6 * 0.2 ** (1 / 3)
    np.testing.assert_allclose(a[:, :, 7][rows], chunk, rtol=1e-5)
    assert not bool(stats["condition"])  # 1 − ρ > p^{K−1}: the sink wins the K-step vote (C.9-5)


def test_noise_is_orthogonal_to_the_test_patterns_with_the_asked_norm():
    patterns = cot_tasks.tsr_patterns(10, 30)
    np.testing.assert_allclose(patterns @ patterns.T, np.eye(10), atol=1e-6)
    delta = cot_tasks.orthogonal_noise(jax.random.normal(KEY, (50, 30)), patterns, 0.2)
    np.testing.assert_allclose(delta @ patterns.T, 0.0, atol=1e-6)
    np.testing.assert_allclose(np.linalg.norm(delta, axis=-1), 0.2, rtol=1e-5)


def test_training_prompts_follow_7_1():
    shape, dyn = split(SMALL)
    data = jax.jit(lambda d: cot.training_prompts(KEY, 6, shape, d))(dyn)
    k = np.arange(6) % 3 + 1
    np.testing.assert_array_equal(np.argmax(data["query"][:, -3:], axis=-1), k - 1)  # c_k on the query
    np.testing.assert_array_equal(np.asarray(data["mask"][:, -2:]), np.arange(2)[None] < (k - 1)[:, None])
    np.testing.assert_allclose(np.asarray(data["query"][:, 16:32]), 0.0)  # (z_{k−1}; 0)
    prefix = np.asarray(data["keys"][:, -2:])
    np.testing.assert_allclose(prefix[k == 3][:, 1, :16], prefix[k == 3][:, 0, 16:32])  # z_1 chains on


def test_chain_of_thought_follows_the_matching_columns_of_a_hand_built_model():
    """W = λ (input·input + c·c): each step attends to the step-k columns whose input is the query's."""
    shape, dyn = split({**SMALL, "l_ts": 8})
    dyn = {**dyn, "tau": jnp.asarray(1.0), "noise": jnp.asarray(0.0), "alpha_test": jnp.asarray(1.0)}
    test = jax.jit(lambda d: cot.test_prompts(KEY, {**shape, "n_test": 8}, d))(dyn)
    dim, dx = cot.dim(shape), shape["dx"]
    w = jnp.zeros((dim, dim)).at[:dx, :dx].set(jnp.eye(dx)).at[2 * dx :, 2 * dx :].set(jnp.eye(3))
    patterns = cot_tasks.tsr_patterns(shape["M_test"], dx)
    cot_all = jax.vmap(cot_model.chain_of_thought, in_axes=(None, 0, None, 0, None, None, None))
    answers, attn = jax.jit(lambda *a: cot_all(*a, 3, dx))(
        {"w": 40.0 * w}, test["cot"], test["mask"], test["query_chain"][:, 0], patterns
    )
    np.testing.assert_array_equal(answers, test["query_chain"][:, 1:])
    mass = cot.categories(attn, test, answers, 3)
    assert float(jnp.min(mass[..., 0])) > 0.99


def test_bad_configs_are_named():
    problems = " ".join(cot.check(cot.EXPERIMENT.complete({"l_ts": 40, "l_tr": 32, "M_test": 12, "alpha": 1.0})))
    assert "l_ts = 40 exceeds l_tr = 32" in problems and "2M' ≤ M" in problems and "α = 1" in problems


@pytest.fixture(scope="module")
def trained():
    shape, dyn = split(SMALL)
    params, problem = cot.init(KEY, shape, dyn)
    final = sgd_trained(cot, params, problem, shape, dyn, KEY, 400)
    evaluate = jax.jit(lambda p, d: cot.evaluate(p, problem, shape, d))
    return params, final, dyn, evaluate


def test_training_concentrates_cot_attention_on_same_input_same_step_columns(trained):
    initial, final, dyn, evaluate = trained
    before, after = evaluate(initial, dyn), evaluate(final, dyn)
    assert float(after["loss"]) < 0.2 * float(before["loss"]) and float(after["train_error"]) < 0.05
    assert float(after["att_same_same"]) > 0.8 > 0.4 > float(before["att_same_same"])
    assert float(after["att_other_other"]) < 0.05 < float(before["att_other_other"])
    assert float(after["cot_error"]) < float(before["cot_error"])
    one = evaluate(final, {**dyn, "l_ts": jnp.asarray(1)})  # test-time l_ts from dyn: fewer examples, more error
    assert float(one["cot_error"]) > float(after["cot_error"])


PRESETS = [(path, preset) for path in SWEEPS for preset in specmod.read_toml(path).get("presets", {})]


@pytest.mark.parametrize("path, preset", PRESETS, ids=lambda v: v if isinstance(v, str) else v.stem)
def test_ch7_sweeps_load_and_keep_l_ts_within_l_tr(path, preset):
    spec = specmod.load(path, preset=preset)
    assert spec.points and not spec.skipped and spec.experiment == "cot_transformer"
    test_time = dict(spec.final_eval)
    assert not set(test_time) & set(spec.axes)
    for point in spec.points:
        l_tr = point["l_tr"] if spec.search is None else 1  # a search over l_tr may probe 1
        assert max(test_time.get("l_ts", [point["l_ts"]])) <= l_tr
