"""Padding and masking: a run padded into a larger bucket equals the unpadded run (same key)."""

import jax.numpy as jnp
import numpy as np
import pytest

from helpers import assert_padded_matches, run_program

EXACT = lambda n, *_: n  # noqa: E731
BIG = lambda n, *_: 2 * n + 3  # noqa: E731 - every size padded, by an awkward amount


@pytest.mark.parametrize(
    "config",
    [
        {"model": "linear", "d": 8, "N": 30},
        {"model": "lowrank", "d": 8, "m": 4, "N": 20},
        pytest.param({"model": "mlp", "d": 8, "m": 12, "N": 40}, marks=pytest.mark.slow),  # the mlp: also below
        {"model": "mlp", "d": 6, "m": 10, "N": 40, "M": 8},
    ],
)
def test_padded_run_equals_unpadded_run(config):
    steps = 40  # a short horizon: training is chaotic, so float rounding grows over thousands of steps
    small = run_program([config], EXACT, 2, steps, [1e-2], stop=2.0)
    big = run_program([config], BIG, 2, steps, [1e-2], stop=2.0)
    assert_padded_matches(small, big, ("loss", "accuracy"), steps)


def test_slot_position_and_slot_count_do_not_change_a_run():
    """Bitwise, from two slots on (the engine never compiles a program with one slot per device)."""
    run = {"model": "mlp", "d": 8, "m": 16, "N": 50}
    others = [{"model": "mlp", "d": 8, "m": 16, "N": 20}, {"model": "mlp", "d": 7, "m": 9, "N": 45}]
    pad = lambda n, *_: 64  # noqa: E731
    alone = run_program([run], pad, 2, 256, [3e-2])  # slot 2 vacant
    crowded = run_program(others + [run], pad, 4, 256, [3e-2] * 3)
    for name in alone.params:
        assert np.array_equal(np.asarray(alone.params[name][0]), np.asarray(crowded.params[name][2])), name
    assert int(alone.step[0]) == int(crowded.step[2])
    assert float(alone.best[0]) == float(crowded.best[2])


def test_diverging_run_is_frozen_and_never_poisons_its_neighbours():
    # The authors' -log(softmax(.)) overflows at their lr = 1000; at lr = 0.01 it trains normally.
    run = {"model": "linear", "d": 16, "N": 40, "loss_form": "log_of_softmax"}
    pad = lambda n, *_: 64  # noqa: E731
    alone = run_program([run], pad, 2, 200, [1e-2], stop=2.0)
    mixed = run_program([run, run], pad, 2, 200, [1e-2, 1000.0], stop=2.0)
    assert not bool(alone.diverged[0]) and not bool(mixed.diverged[0])
    assert bool(mixed.diverged[1]) and bool(mixed.done[1]) and int(mixed.step[1]) < 200
    assert all(bool(jnp.all(jnp.isfinite(leaf[1]))) for leaf in mixed.params.values()), "diverged run kept NaN params"
    for name in alone.params:
        assert np.array_equal(np.asarray(alone.params[name][0]), np.asarray(mixed.params[name][0])), name
    assert int(alone.step[0]) == int(mixed.step[0]) == 200


def test_padded_rows_never_send_nan_into_the_gradient():
    """Issue 12 item 9: with the authors' log(softmax(.)), a padded input row (zero embedding) of the
    mlp still has logits relu(b)·W₂·Uᵀ; where their softmax underflows, log(0) masked only afterwards
    gave a NaN gradient. Masking before the softmax keeps it finite and the active rows' unchanged."""
    import jax

    from jaxmem.experiments.nichani24.assoc_memory import _target_nll, mean_target_nll

    z = jax.random.normal(jax.random.PRNGKey(0), (6, 5))
    z = z.at[4:, 0].set(-200.0)  # padded rows 4, 5: target 0 underflows in float32
    y, rows = jnp.array([0, 1, 2, 3, 0, 0]), jnp.arange(6) < 4
    naive = jax.grad(lambda z: jnp.sum(jnp.where(rows, _target_nll(z, y, "log_of_softmax"), 0.0)) / 4)(z)
    assert not bool(jnp.all(jnp.isfinite(naive)))  # the trap, reproduced
    grad = jax.grad(lambda z: mean_target_nll(z, y, rows, 4, "log_of_softmax"))(z)
    assert bool(jnp.all(jnp.isfinite(grad))) and not bool(jnp.any(grad[4:]))
    active = jax.grad(lambda z: mean_target_nll(z, y[:4], rows[:4], 4, "log_of_softmax"))(z[:4])
    np.testing.assert_array_equal(np.asarray(grad[:4]), np.asarray(active))


@pytest.mark.slow
@pytest.mark.parametrize("loss_form", ["log_softmax", "log_of_softmax"])
def test_long_padded_run_stays_finite_like_the_unpadded_run(loss_form):
    """The replayed false divergence: d = 8, N = 88, padded, went NaN at step 6267 (log_of_softmax)."""
    config = {"model": "mlp", "d": 8, "m": 16, "N": 88, "loss_form": loss_form}
    steps = 8192
    small = run_program([config], EXACT, 2, steps, [3e-2], stop=2.0, eval_every=256)
    big = run_program([config], BIG, 2, steps, [3e-2], stop=2.0, eval_every=256)
    assert not bool(small.diverged[0]) and not bool(big.diverged[0])
    assert int(small.step[0]) == int(big.step[0]) == steps
    assert abs(float(small.last["accuracy"][0]) - float(big.last["accuracy"][0])) <= 2 / 88
