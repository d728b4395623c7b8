"""Chapter 6 of the H. Li thesis (icl_task, icl_model, icl_learners, icl_transformer): the prompt
generator's distribution and nesting, masking and pruning of the one-layer transformer, the classical
learners, and a short trained run that learns in context (unseen tasks ≈ 0 error, attention on N*)."""

from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import sgd_trained

from jaxmem.experiments.li_thesis import icl_learners, icl_model, icl_task
from jaxmem.experiments.li_thesis import icl_transformer as icl
from jaxmem.spec import sweep as specmod

KEY = jax.random.PRNGKey(0)
SWEEPS = sorted((Path(__file__).parent.parent / "sweeps" / "li_thesis").glob("ch6_*.toml"))


def split(config):
    """(shape, dyn) of a config as the engine hands them to the experiment."""
    full = icl.EXPERIMENT.complete(config)
    shape = {k: v for k, v in full.items() if icl.FIELDS[k].kind in ("size", "static")}
    dyn = {k: jnp.asarray(icl.FIELDS[k].traced_value(v)) for k, v in full.items() if icl.FIELDS[k].kind != "static"}
    return shape, {**dyn, "lr": jnp.asarray(1.0)}


def in_domain(key, count, length, alpha, m1=6, dx=30, tasks=(0, 6)):
    rel, irr = icl_task.relevant_patterns(m1, dx, 3.0), icl_task.irrelevant_patterns(m1, dx, 3.0)
    pairs = icl_task.ordered_pairs(m1, KEY)
    draw = jax.jit(lambda k, a: icl_task.prompts(k, count, length, rel, irr, dx - m1, pairs, tasks, a, 0.5, 30))
    return draw(key, alpha), pairs


def test_tasks_start_with_the_cyclic_ones_and_cover_every_ordered_pair():
    pairs = np.asarray(icl_task.ordered_pairs(6, KEY))
    assert [tuple(p) for p in pairs[:6]] == [(j, (j + 1) % 6) for j in range(6)]
    assert len({tuple(p) for p in pairs}) == len(pairs) == 30 and all(a != b for a, b in pairs)


def test_contexts_follow_alpha_and_labels_follow_the_task():
    data, pairs = in_domain(KEY, 400, 50, 0.6)
    a = np.asarray(data["pattern"][:, :1])
    context, y = np.asarray(data["pattern"][:, 1:]), np.asarray(data["contexts"][..., 30])
    query, z = np.asarray(data["pattern"][:, 0]), np.asarray(data["z"])
    assert abs(np.mean(context == a) - 0.3) < 0.02  # the query's pattern: α/2
    assert abs(np.mean(z > 0) - 0.5) < 0.06
    assert np.all(y[context == query[:, None]] == np.broadcast_to(z[:, None], y.shape)[context == query[:, None]])
    assert np.array_equal(np.asarray(data["same"]), context == a)
    assert set(np.unique(context)) == set(range(6))


def test_prompts_nest_along_their_length_and_tokens_have_the_data_model_norms():
    short, _ = in_domain(KEY, 8, 5, 0.8)
    long, _ = in_domain(KEY, 8, 12, 0.8)
    np.testing.assert_array_equal(short["contexts"], long["contexts"][:, :5])
    np.testing.assert_array_equal(short["query"], long["query"])
    x = np.asarray(long["contexts"][..., :6])  # the relevant coordinates: exactly β e_j
    assert np.allclose(np.sort(x, axis=-1)[..., -1], 3.0) and np.allclose(np.sum(x, axis=-1), 3.0)
    assert np.all(np.abs(long["contexts"][..., 6:30]).max(axis=-1) <= 1.5 + 1e-6)  # |κ| β ≤ K β


def test_out_of_domain_patterns_are_orthogonal_with_norm_beta_and_s1_as_asked():
    for s1 in (-1.28, 0.2, 1.0, 1.28):
        mu = np.asarray(icl_task.ood_patterns(6, 30, 3.0, s1))
        np.testing.assert_allclose(mu @ mu.T, 9.0 * np.eye(3), atol=1e-3)
        a, b = icl_task.ood_coefficients(s1)
        np.testing.assert_allclose([float(a + b), mu[0, 4] / 3 + mu[0, 5] / 3], [s1, s1], atol=1e-5)


def test_masked_contexts_do_not_change_the_output_and_pruning_zeroes_it():
    params, a = icl_model.init(KEY, 16, 60, 30, 0.2)
    params = jax.tree.map(lambda w: w + 0.3 * jax.random.normal(KEY, w.shape), params)
    contexts = jax.random.normal(jax.random.fold_in(KEY, 1), (9, 60))
    query = jax.random.normal(jax.random.fold_in(KEY, 2), (60,))
    forward = jax.jit(icl_model.forward)
    f_small, attn = forward(params, a, contexts[:5], query, jnp.ones(5, bool))
    f_padded, attn_padded = forward(params, a, contexts, query, jnp.arange(9) < 5)
    np.testing.assert_allclose(f_small, f_padded, rtol=1e-6)
    np.testing.assert_allclose(attn_padded[5:], 0.0)
    norms = jnp.arange(16.0)
    keep = icl_model.prune_keep(norms, 0.25, 0, jnp.zeros(16))
    assert np.array_equal(np.asarray(keep), np.arange(16) >= 4)
    assert np.array_equal(np.asarray(icl_model.prune_keep(norms, 0.25, 1, jnp.zeros(16))), np.arange(16) < 12)
    f_none, _ = icl_model.forward(
        params, a * icl_model.prune_keep(norms, 1.0, 2, jnp.arange(16.0)), contexts, query, jnp.ones(9, bool)
    )
    assert float(f_none) == 0.0


def test_classical_learners_fit_a_separable_prompt():
    x = jnp.array([[2.0, 0.1], [1.5, -0.2], [-2.0, 0.3], [-1.0, -0.1], [9.0, 9.0]])
    y = jnp.array([1.0, 1.0, -1.0, -1.0, -1.0])
    mask = jnp.array([1.0, 1.0, 1.0, 1.0, 0.0])  # the last context is padding: a misleading point
    for query, label in (([1.2, 0.0], 1.0), ([-1.4, 0.2], -1.0), ([2.5, -0.3], 1.0)):
        out = jax.jit(icl_learners.predictions)(x, y, mask, jnp.array(query))
        assert all(float(v) * label > 0 for v in out.values()), out


def test_logistic_newton_reaches_the_regularised_optimum():
    x = jax.random.normal(KEY, (12, 3))
    y = jnp.sign(x[:, 0] + 0.5 * jax.random.normal(jax.random.fold_in(KEY, 1), (12,)))
    gram = x @ x.T + 1.0
    beta = icl_learners.newton_fit(gram, y, jnp.ones(12), logistic=True)

    def objective(b):
        return 0.5 * b @ gram @ b + jnp.sum(jnp.logaddexp(0.0, -y * (gram @ b)))

    grad = jax.grad(objective)(beta)
    assert float(jnp.linalg.norm(grad)) < 1e-4


def test_bad_configs_are_named():
    problems = icl.check(icl.EXPERIMENT.complete({"M1": 6, "n_train_tasks": 30, "alpha_test": 1.5, "s1": 1.5}))
    text = " ".join(problems)
    assert "no unseen task" in text and "alpha_test" in text and "|s1|" in text


@pytest.fixture(scope="module")
def trained():
    """A small model trained 150 SGD steps on the B.7 task (m = 32), with its problem and config."""
    shape, dyn = split({"m": 32, "n_test": 96, "n_val": 96, "batch": 32, "l_ts": 16, "l_tr": 16})
    params, problem = icl.init(KEY, shape, dyn)
    final = sgd_trained(icl, params, problem, shape, dyn, KEY, 150)
    evaluate = jax.jit(lambda p, d: icl.evaluate(p, problem, shape, d))
    return params, final, dyn, evaluate


def test_training_learns_unseen_tasks_in_context(trained):
    initial, final, dyn, evaluate = trained
    before, after = evaluate(initial, dyn), evaluate(final, dyn)
    assert float(before["id_error"]) > 0.3 and float(after["id_error"]) <= 0.01  # R6.1
    assert float(before["val_error"]) > 0.3 and float(after["val_error"]) <= 0.02  # other prompts of the same law
    assert float(before["val_error"]) != float(before["id_error"])  # its own stream, not the test prompts
    assert float(before["id_attention"]) < 0.6 < 0.9 < float(after["id_attention"])  # Cor 6.4.3
    assert float(after["cos_mu"]) > 0.8 and float(after["cos_q"]) > 0.8  # Prop 6.4.5
    assert float(after["ood_error"]) < 0.3 and float(after["ood_attention"]) > float(before["ood_attention"])


def test_test_time_fields_are_read_from_dyn(trained):
    _, final, dyn, evaluate = trained
    one = evaluate(final, {**dyn, "l_ts": jnp.asarray(1)})
    assert float(one["id_error"]) > 0.3  # one context: its label is the query's only half the time
    pruned = evaluate(final, {**dyn, "prune_rate": jnp.asarray(1.0)})
    assert float(pruned["id_error"]) == 1.0 and float(pruned["id_hinge"]) == 1.0
    low = evaluate(final, {**dyn, "l_ts": jnp.asarray(4), "alpha_test": jnp.asarray(0.3)})
    high = evaluate(final, {**dyn, "l_ts": jnp.asarray(4), "alpha_test": jnp.asarray(1.0)})
    assert float(low["id_error"]) > float(high["id_error"])  # fewer same-pattern contexts: more error


@pytest.mark.parametrize("preset", ["quick", "paper"])
@pytest.mark.parametrize("path", SWEEPS, ids=lambda p: p.stem)
def test_ch6_sweeps_load_and_test_time_axes_are_final_eval(path, preset):
    spec = specmod.load(path, preset=preset)
    assert spec.points and not spec.skipped and spec.experiment == "icl_transformer"
    test_time = {"l_ts", "alpha_test", "s1", "ood_noise", "prune_rate", "prune_order"}
    assert not test_time & set(spec.axes)  # what is read off a trained model is never a training axis
