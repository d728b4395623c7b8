"""The blocked cross-entropy and argmax (jaxmem/experiments/blocked_softmax.py) equal the dense ones,
hold no N × M buffer, train the memory families the same, and are chosen where dense logits do not fit."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from helpers import run_steps
from jaxmem.experiments import pallas_softmax
from jaxmem.experiments.blocked_softmax import blocked_argmax, blocked_cross_entropy, logits_bytes
from jaxmem.experiments.interface import Costs
from jaxmem.experiments.nichani24 import assoc_memory, factual_recall
from jaxmem.experiments.nichani24.assoc_memory import mean_target_nll
from jaxmem.plan.buckets import static_shape
from jaxmem.plan.loss_blocks import DENSE, choose_loss_path

N, M, D = 13, 11, 5
ROWS, CLASSES = jnp.arange(N) < 10, jnp.arange(M) < 9  # 3 padded rows, 2 padded classes


def problem(seed=0):
    """Features (the last padded row's logits underflow a softmax, as relu(b)·W₂ can), weights, targets."""
    k = jax.random.split(jax.random.PRNGKey(seed), 3)
    features = 3.0 * jax.random.normal(k[0], (N, D))
    features = features.at[N - 1].set(100.0 * jax.random.normal(k[1], (D,)))
    weights = jax.random.normal(k[2], (M, D))
    return features, weights, jnp.where(ROWS, jnp.arange(N) % 9, 0)


def dense_loss(features, weights, targets, form="log_softmax", rows=ROWS, classes=CLASSES):
    """assoc_memory's dense loss: the reference."""
    z = jnp.where(classes[None, :], features @ weights.T, -jnp.inf)
    return mean_target_nll(z, targets, rows, jnp.sum(rows), form)


def blocked_loss(features, weights, targets, block, form="log_softmax", rows=ROWS, classes=CLASSES, kernel="xla"):
    nll = blocked_cross_entropy(features, weights, targets, rows, classes, block, form, kernel)
    return jnp.sum(nll) / jnp.sum(rows)


dense_grads = jax.jit(jax.value_and_grad(dense_loss, (0, 1)), static_argnums=3)
blocked_grads = jax.jit(jax.value_and_grad(blocked_loss, (0, 1)), static_argnums=(3, 4, 7))


@pytest.mark.parametrize(
    "block, form, kernel",
    [
        (1, "log_softmax", "xla"),
        (4, "log_softmax", "xla"),  # 4 does not divide M
        (16, "log_softmax", "xla"),
        (4, "log_of_softmax", "xla"),
        (4, "log_of_softmax", "pallas"),  # interpreted on a CPU: tiles of 16 rows and 16 classes, width 16
    ],
)
def test_blocked_loss_and_gradients_equal_the_dense_ones(block, form, kernel):
    features, weights, targets = problem()
    want, (want_f, want_w) = dense_grads(features, weights, targets, form)
    got, (got_f, got_w) = blocked_grads(features, weights, targets, block, form, ROWS, CLASSES, kernel)
    np.testing.assert_allclose(got, want, rtol=1e-6)
    np.testing.assert_allclose(got_f, want_f, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got_w, want_w, rtol=1e-5, atol=1e-6)
    per_row = jax.jit(blocked_cross_entropy, static_argnums=(5, 6, 7))
    rows = per_row(features, weights, targets, ROWS, CLASSES, block, form, kernel)
    assert not bool(jnp.any(rows[~ROWS])) and not bool(jnp.any(got_f[~ROWS])), "padded rows are not exactly 0"
    assert bool(jnp.all(jnp.isfinite(got_f))) and bool(jnp.all(jnp.isfinite(got_w)))


@pytest.mark.parametrize("kernel", ["xla", "pallas"])
def test_the_authors_form_overflows_blocked_as_dense(kernel):
    """log(softmax(.)) of an active row whose target probability underflows: loss inf, gradients NaN
    (how the engine sees the lr = 1000 runs diverge), blocked as dense, by either kernel."""
    features, weights, targets = problem()
    features = features.at[0].set(50.0 * weights[1] - 50.0 * weights[targets[0]])
    dense = dense_grads(features, weights, targets, "log_of_softmax")
    blocked = blocked_grads(features, weights, targets, 4, "log_of_softmax", ROWS, CLASSES, kernel)
    assert float(dense[0]) == float(blocked[0]) == np.inf
    for want, got in zip(dense[1], blocked[1]):
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
        assert bool(jnp.any(jnp.isnan(got)))


def test_blocked_argmax_equals_jnp_argmax_with_ties_and_nan():
    features, weights, _ = problem()
    weights = weights.at[7].set(weights[2]).at[4].set(weights[3])  # ties across and inside blocks of 3
    weights = weights.at[9].set(10 * weights[2])  # a padded class that would win
    features = features.at[0].set(weights[2]).at[1].set(jnp.nan)
    classes = jnp.arange(M) < 9
    dense = jax.jit(lambda f, w: jnp.argmax(jnp.where(classes[None, :], f @ w.T, -jnp.inf), axis=1))
    blocked = jax.jit(blocked_argmax, static_argnums=3)
    assert int(dense(features, weights)[0]) == 2 and int(dense(features, weights)[1]) == 0
    for block in (1, 3, 4, 16):
        np.testing.assert_array_equal(blocked(features, weights, classes, block), dense(features, weights))
    nan_class = weights.at[5].set(jnp.nan)  # NaN logits in one class: every row's argmax (NumPy's rule)
    np.testing.assert_array_equal(blocked(features, nan_class, classes, 3), dense(features, nan_class))


@pytest.mark.parametrize("kernel", ["xla", "pallas"])
def test_vmapped_over_runs_and_under_shard_map_like_the_engine(kernel):
    """Runs with their own true sizes (traced masks) in one vmapped value_and_grad, inside a shard_map over
    the runs axis (the engine's program); each equals its own dense loss."""
    runs = [problem(seed) for seed in range(2)]
    features, weights, targets = (jnp.stack(parts) for parts in zip(*runs))
    rows, classes = jnp.stack([ROWS, jnp.arange(N) < 7]), jnp.stack([CLASSES, jnp.arange(M) < 6])
    targets = jnp.minimum(targets, jnp.array([8, 5])[:, None])

    def one(f, w, y, r, c):
        return jax.value_and_grad(blocked_loss, (0, 1))(f, w, y, 4, "log_softmax", r, c, kernel)

    mesh = Mesh(np.array(jax.devices()[:1]), ("runs",))
    # Pallas' interpreter cannot type-check varying axes (its grid loop drops them); on a GPU the kernels
    # lower under the engine's check (test_the_fused_kernels_lower_to_triton_under_the_engines_shard_map).
    check = kernel == "xla"
    sharded = jax.shard_map(jax.vmap(one), mesh=mesh, in_specs=P("runs"), out_specs=P("runs"), check_vma=check)
    mapped = jax.jit(sharded)
    on_mesh = lambda a: jax.device_put(a, NamedSharding(mesh, P("runs")))  # noqa: E731
    loss, (d_f, d_w) = mapped(*map(on_mesh, (features, weights, targets, rows, classes)))
    for i in range(2):
        want, (want_f, want_w) = dense_grads(features[i], weights[i], targets[i], "log_softmax", rows[i], classes[i])
        np.testing.assert_allclose(loss[i], want, rtol=1e-6)
        np.testing.assert_allclose(d_f[i], want_f, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(d_w[i], want_w, rtol=1e-5, atol=1e-6)


def test_the_fused_kernels_lower_to_triton_under_the_engines_shard_map(monkeypatch):
    """The Pallas path as a GPU would compile it, lowered here for CUDA: vmapped over runs inside a
    shard_map that checks varying axes (the engine's training program), with a block, a width and row and
    class counts that are no powers of two (padded to tiles): three Triton kernels, no interpreter."""
    monkeypatch.setattr(pallas_softmax, "interpret", lambda: False)
    rows, classes, width, runs = 40, 37, 12, 2

    def loss(f, w, y, r, c):
        return jnp.sum(blocked_cross_entropy(f, w, y, r, c, 20, "log_softmax", "pallas"))

    mesh = jax.sharding.AbstractMesh((1,), ("runs",))
    grads = jax.vmap(jax.value_and_grad(loss, (0, 1)))
    program = jax.jit(jax.shard_map(grads, mesh=mesh, in_specs=P("runs"), out_specs=P("runs"), check_vma=True))
    shapes = [((runs, rows, width), jnp.float32), ((runs, classes, width), jnp.float32), ((runs, rows), jnp.int32)]
    shapes += [((runs, rows), bool), ((runs, classes), bool)]
    triton = "__gpu$xla.gpu.triton"
    to_cuda = jax.export.export(
        program, platforms=["cuda"], disabled_checks=[jax.export.DisabledSafetyCheck.custom_call(triton)]
    )
    with jax.default_matmul_precision("highest"):
        module = to_cuda(*(jax.ShapeDtypeStruct(*s) for s in shapes)).mlir_module()
    names = ("softmax_statistics", "softmax_feature_grad", "softmax_weight_grad")
    assert module.count(f"@{triton}") == 3 and all(f'name = "{n}"' in module for n in names)


def test_blocked_loss_holds_no_n_by_m_buffer():
    """XLA's temporaries of a jitted value_and_grad at N = M = 4096, d = 16: dense holds the N × M logits
    (twice), blocked (B = 256) far less; both as `logits_bytes` states them to the planner."""
    n, block = 4096, 256
    f = w = jax.ShapeDtypeStruct((n, 16), jnp.float32)
    y, rows = jnp.arange(n), jnp.arange(n) < n - 5

    def temp(loss):
        return jax.jit(jax.value_and_grad(loss, (0, 1))).lower(f, w).compile().memory_analysis().temp_size_in_bytes

    dense = temp(lambda f, w: dense_loss(f, w, y, rows=rows, classes=rows))
    blocked = temp(lambda f, w: blocked_loss(f, w, y, block, rows=rows, classes=rows))
    assert dense >= n * n * 4 and blocked < n * n * 4 / 4, (dense, blocked)
    assert 0.7 < dense / logits_bytes(n, n, 0) < 1.4 and 0.7 < blocked / logits_bytes(n, n, block) < 1.4


def test_assoc_memory_trains_the_same_with_a_loss_block():
    """The mlp memory padded (M = N = 40 in 83 outputs, blocks of 16 that do not divide them): 20 Adam
    steps and the metrics, blocked as dense."""
    config = {"model": "mlp", "d": 6, "m": 10, "N": 40}
    pad = lambda n, *_: 2 * n + 3  # noqa: E731
    dense_params, dense = run_steps(assoc_memory.EXPERIMENT, config, pad, 3e-2, steps=20)
    params, metrics = run_steps(assoc_memory.EXPERIMENT, {**config, "loss_block": 16}, pad, 3e-2, steps=20)
    for name in dense_params:
        np.testing.assert_allclose(params[name], dense_params[name], rtol=1e-4, atol=2e-5, err_msg=name)
    for name in dense:
        np.testing.assert_allclose(metrics[name], dense[name], atol=1e-5, err_msg=name)


def test_a_loss_block_is_no_part_of_a_runs_identity():
    """Derived, not a field: a spec's points (their ids and problem keys) are what they were; the program's
    static shape carries it, dense by default."""
    exp = assoc_memory.EXPERIMENT
    config = {"model": "linear", "d": 8, "N": 30}
    assert "loss_block" not in exp.complete(config) and "loss_block" not in exp.fields
    assert static_shape(exp, config, lambda n, *_: n)["loss_block"] == 0
    assert static_shape(exp, {**config, "loss_block": 64}, lambda n, *_: n)["loss_block"] == 64


def test_planner_picks_the_blocked_loss_when_dense_logits_exceed_the_budget():
    """fig1_mlp's largest point: N = M = m·d = 64,800, 4 slots: dense logits 2 × 4 × 16.8 GB."""
    exp = assoc_memory.EXPERIMENT
    config = exp.effective({"model": "mlp", "d": 90, "m": 720, "N": 64_800})
    dense = 4 * logits_bytes(64_800, 64_800, 0)
    assert choose_loss_path(exp, config, dense, slots=4).block == 0
    assert choose_loss_path(exp, config, 80e9, slots=4).block == 32_768  # 4·2·64800·B·4 bytes <= 80 GB
    assert choose_loss_path(exp, config, 2e9, slots=4).block == 512
    assert choose_loss_path(exp, config, 1e3, slots=4).block == 1  # nothing fits: the least memory
    facts = factual_recall.EXPERIMENT  # Fig 8: R·D = 300² answers; the exact set (27 × 300 rows) is the largest
    config = facts.effective({"scaling": "distinct", "size": 300, "d": 64, "H": 8, "d_h": 8, "m": 64})
    assert choose_loss_path(facts, config, 2 * 8100 * 90_000 * 4, slots=1).block == 0
    assert choose_loss_path(facts, config, 1e9, slots=1).block == 8192  # 2·8100·B·4 bytes <= 1 GB
    assert choose_loss_path(dataclasses.replace(exp, derived={}), config, 1e3, slots=4) == DENSE  # no loss_block
    assert choose_loss_path(dataclasses.replace(exp, costs=Costs()), config, 1e3, slots=4) == DENSE  # no estimate
