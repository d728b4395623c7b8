"""The factual-recall experiment: sampler semantics, padding == no padding, parameter count, and learning."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxmem.experiments.nichani24 import factual_recall as fr
from jaxmem.experiments.nichani24 import facts
from jaxmem.plan.buckets import static_shape, traced_values
from helpers import assert_padded_matches, bucket_shape, run_program

EXP = fr.EXPERIMENT
EXACT = lambda n, *_: n  # noqa: E731
BIG = lambda n, *_: 2 * n + 3  # noqa: E731 - every size padded, by an awkward amount
SMALL = {"S": 5, "R": 3, "D": 3, "d": 12, "H": 2, "d_h": 4, "m": 10, "T": 8, "batch": 64, "test_size": 64}


def init(key, shape, dyn):
    return jax.jit(lambda k, dn: EXP.init(k, shape, dn))(key, dyn)


def one(config, pad):
    """(shape, dyn) of a single run as jnp values, for calling the experiment functions directly."""
    configs, shape = bucket_shape([config], pad, EXP)
    return shape, {k: jnp.asarray(v) for k, v in traced_values(EXP, configs[0]).items()}


@pytest.mark.parametrize(
    "config",
    [
        pytest.param(SMALL, marks=pytest.mark.slow),  # the default embeddings: also in the scaling test below
        # sphere embeddings (a norm over a padded axis), noise, distinct answers (S <= D) and the square
        # scaling's sizes from `size` (S = 5, R = 2): one pair of compiles for all four
        {
            **SMALL,
            "noise": 7,
            "distinct_answers": True,
            "embeddings": "sphere",
            "S": 0,
            "R": 0,
            "scaling": "square",
            "size": 5,
            "D": 5,
        },
    ],
)
def test_padded_run_equals_unpadded_run(config):
    steps = 20
    small = run_program([config], EXACT, 2, steps, [1e-2], stop=2.0, exp=EXP, eval_every=4)
    big = run_program([config], BIG, 2, steps, [1e-2], stop=2.0, exp=EXP, eval_every=4)
    assert_padded_matches(small, big, ("loss", "accuracy", "exact_accuracy"), steps)


def test_sampler_layout_and_active_tokens():
    config = {**SMALL, "noise": 6, "T": 10}
    shape, dyn = one(config, BIG)  # padded: the sampler must still use only active ids
    S, R, N, T = 5, 3, 6, 10
    x, s, r = facts.sample(jax.random.PRNGKey(3), 4096, shape, dyn)
    x, s, r = np.asarray(x), np.asarray(s), np.asarray(r)
    assert x.shape == (4096, T)
    assert np.all(x[:, -1] == S + R + N), "EOS at T-1"
    assert set(np.unique(s)) == set(range(S)) and set(np.unique(r)) == set(range(R))
    body = x[:, :-1]
    for i in range(len(x)):
        (locs,) = np.nonzero(body[i] < S)
        (rlocs,) = np.nonzero((body[i] >= S) & (body[i] < S + R))
        assert len(locs) == 1 and len(rlocs) == 1 and locs[0] != rlocs[0]
        assert body[i, locs[0]] == s[i] and body[i, rlocs[0]] == S + r[i]
    noise = body[(body >= S + R)]
    assert noise.min() == S + R and noise.max() == S + R + N - 1, "noise ids: exactly the active noise set"
    # subject and relation positions cover 0..T-2 roughly uniformly
    locs = np.argmax(body < S, axis=1)
    rlocs = np.argmax((body >= S) & (body < S + R), axis=1)
    for positions in (locs, rlocs):
        counts = np.bincount(positions, minlength=T - 1)
        assert counts.min() > 0.6 * len(x) / (T - 1) and counts.max() < 1.4 * len(x) / (T - 1)


def test_fact_dict_blocks_and_distinct():
    config = {**SMALL, "S": 6, "R": 4, "D": 8}
    for distinct in (False, True):
        shape, dyn = one({**config, "distinct_answers": distinct}, BIG)
        answers = np.asarray(facts.fact_dict(jax.random.PRNGKey(1), shape, dyn, shape["distinct_answers"]))[:6, :4]
        for r in range(4):
            assert np.all((answers[:, r] >= 8 * r) & (answers[:, r] < 8 * r + 8))
            if distinct:
                assert len(set(answers[:, r])) == 6


def test_sampled_batch_and_problem_equal_padded_vs_unpadded():
    key = jax.random.PRNGKey(7)
    (shape_s, dyn_s), (shape_b, dyn_b) = one(SMALL, EXACT), one(SMALL, BIG)
    xs, ss, rs = facts.sample(key, 256, shape_s, dyn_s)
    xb, sb, rb = facts.sample(key, 256, shape_b, dyn_b)
    assert np.array_equal(xs, xb) and np.array_equal(ss, sb) and np.array_equal(rs, rb)
    _, ps = init(key, shape_s, dyn_s)
    _, pb = init(key, shape_b, dyn_b)
    for name in ("test_x", "test_y"):
        assert np.array_equal(ps[name], pb[name]), name
    np.testing.assert_array_equal(np.asarray(pb["facts"])[:5, :3], ps["facts"])
    np.testing.assert_allclose(np.asarray(pb["wte"])[: ps["wte"].shape[0], :12], ps["wte"], rtol=1e-6)


def test_parameter_count_and_info_bits():
    config = EXP.complete({"S": 32, "R": 32, "D": 8, "d": 32, "H": 4, "d_h": 8, "m": 64})
    resolved = EXP.effective(config)
    assert EXP.cost("params", resolved) == 4 * 4 * 32 * 8 + 2 * 64 * 32
    vocab = 32 + 32 + 32 * 8 + 64 + 1  # S + R + |A| + |N| + EOS, the paper's vocabulary
    assert EXP.cost("bits", resolved) == pytest.approx(32 * 32 * 3 + 32 * 8 * np.log2(vocab / 8))
    shape, dyn = one(config, EXACT)
    params = jax.eval_shape(lambda k: EXP.init(k, shape, dyn)[0], jax.random.PRNGKey(0))
    counted = sum(p.size for name, p in params.items() if name != "b1")
    assert counted == EXP.cost("params", resolved)
    assert EXP.check({**config, "d_h": 0}) and EXP.check({**config, "T": 2}) and not EXP.check(config)


def test_tiny_training_run_learns(tmp_path):
    from jaxmem.spec import sweep as specmod
    from jaxmem.driver.sweep import run_sweep
    from jaxmem.persistence.store import load_results

    raw = {
        "experiment": "factual_recall",
        "seeds": [0],
        "fixed": {"S": 4, "R": 4, "D": 2, "d": 16, "H": 2, "d_h": 8, "m": 32, "T": 8, "batch": 128, "test_size": 256},
        "train": {"steps": 300, "eval_every": 20, "learning_rates": [1e-2]},
        "engine": {"record_trajectory": True},
    }
    spec = specmod.parse(raw, name="tiny_fr")
    run_sweep(spec, tmp_path / "out", quiet=True)
    # start accuracy straight from the experiment (same init key as the engine: run_key(seed, index))
    config = spec.points[0]
    shape, dyn = one(config, EXACT)
    untrained = jax.jit(lambda k: EXP.evaluate(*EXP.init(k, shape, dyn), shape, dyn))
    start = float(untrained(jax.random.PRNGKey(0))["accuracy"])
    runs = load_results(tmp_path / "out")
    final = float(runs["max_metric"].max())
    assert final > start + 0.3, (start, final)
    assert final >= 0.9, (start, final)


@pytest.mark.parametrize(
    "scaling, size, expected",
    [("linear", 9, (9, 9, 8)), ("square", 10, (10, 3, 8)), ("distinct", 6, (6, 6, 6))],
)
def test_scalings_set_the_task_sizes_from_size(scaling, size, expected):
    config = EXP.complete({**SMALL, "S": 0, "R": 0, "D": 8, "scaling": scaling, "size": size})
    assert not EXP.check(config)
    sizes = EXP.effective(config)
    assert (sizes["S"], sizes["R"], sizes["D"]) == expected
    assert traced_values(EXP, config)["S"] == expected[0] and traced_values(EXP, config)["R"] == expected[1]
    explicit = EXP.effective({**SMALL, "S": expected[0], "R": expected[1], "D": expected[2]})
    assert EXP.cost("bits", sizes) == EXP.cost("bits", explicit)
    assert EXP.cost("flops_per_step", sizes) == EXP.cost("flops_per_step", explicit)


def test_scaling_and_explicit_sizes_conflict_and_missing_sizes_are_reported():
    assert any("do not give S or R" in p for p in EXP.check(EXP.complete({**SMALL, "scaling": "linear", "size": 4})))
    assert any("needs size >= 1" in p for p in EXP.check(EXP.complete({**SMALL, "S": 0, "R": 0, "scaling": "linear"})))
    assert any("S and R are required" in p for p in EXP.check(EXP.complete({**SMALL, "S": 0})))
    assert any("only used with a scaling" in p for p in EXP.check(EXP.complete({**SMALL, "size": 3})))


def test_sizes_set_by_scaling_climb_the_searched_variables_ladder():
    config = EXP.complete({**SMALL, "S": 0, "R": 0, "scaling": "linear", "size": 5})
    pad = lambda n, field=None: n + (100 if field == "size" else 1)  # noqa: E731
    shape = static_shape(EXP, config, pad)
    assert shape["S"] == 105 and shape["R"] == 105 and shape["D"] == 4


@pytest.mark.slow  # the scaling's padding is in test_padded_run_equals_unpadded_run's sphere case
def test_padded_run_with_scaling_equals_unpadded_run():
    config = {**SMALL, "S": 0, "R": 0, "scaling": "square", "size": 7}
    small = run_program([config], EXACT, 2, 12, [1e-2], stop=2.0, exp=EXP, eval_every=4)
    big = run_program([config], BIG, 2, 12, [1e-2], stop=2.0, exp=EXP, eval_every=4)
    assert_padded_matches(small, big, ("loss", "accuracy", "exact_accuracy"), 12)


def test_search_row_of_a_square_scaling_counts_bits_at_the_integer_capacity(tmp_path):
    from jaxmem.spec import sweep as specmod
    from jaxmem.cli.views import _NoStore
    from jaxmem.driver.sweep import Sweep, Unit
    from jaxmem.plan.search import Bracket

    raw = {
        "experiment": "factual_recall",
        "fixed": {"scaling": "square", "d": 16, "H": 2, "d_h": 4, "m": 8, "T": 8},
        "train": {"steps": 8, "eval_every": 8},
        "search": {"variable": "size", "lo": "4", "hi": "16"},
    }
    spec = specmod.parse(raw, name="square")
    sweep = Sweep(spec, tmp_path, _NoStore(), None)
    row = sweep.searches.row(Unit(spec.points[0], 0), Bracket(lo=9, hi=10, lo_ok=True, hi_bad=True, done=True))
    assert row["capacity"] == 9.0
    assert row["bits"] == pytest.approx(
        EXP.cost("bits", EXP.effective({**spec.points[0], "S": 9, "R": 3, "scaling": "none"}))
    )


def test_search_row_counts_parameters_at_the_capacity_of_a_searched_width(tmp_path):
    from jaxmem.spec import sweep as specmod
    from jaxmem.cli.views import _NoStore
    from jaxmem.driver.sweep import Sweep, Unit
    from jaxmem.plan.search import Bracket

    raw = {
        "experiment": "factual_recall",
        "fixed": {"S": 4, "R": 4, "d": 16, "H": 2, "d_h": 4, "T": 8},
        "train": {"steps": 8, "eval_every": 8},
        "search": {"variable": "m", "lo": "2", "hi": "64"},
    }
    spec = specmod.parse(raw, name="width")
    sweep = Sweep(spec, tmp_path, _NoStore(), None)
    unit = Unit(spec.points[0], 0)
    row = sweep.searches.row(unit, Bracket(lo=12, hi=13, lo_ok=True, hi_bad=True, done=True))
    assert row["params"] == 4 * 2 * 16 * 4 + 2 * 12 * 16
    below = sweep.searches.row(unit, Bracket(lo=2, hi=64, lo_ok=False, hi_bad=False, censored="below", done=True))
    assert below["params"] == 4 * 2 * 16 * 4 + 2 * 2 * 16 and np.isnan(below["bits"])
