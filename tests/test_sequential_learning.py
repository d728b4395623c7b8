"""The sequential-learning experiment (Nichani et al. §5): init values, the structured dictionary,
padding == no padding, sampled vs population agreement, and the Lemma 4 invariant under GD."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxmem.experiments.nichani24 import sequential_learning as sl
from jaxmem.plan.buckets import traced_values
from helpers import assert_padded_matches, bucket_shape, run_program

EXP = sl.EXPERIMENT
EXACT = lambda n, *_: n  # noqa: E731
BIG = lambda n, *_: 2 * n + 3  # noqa: E731 - every size padded, by an awkward amount
FIG5 = {"S": 16, "R": 4, "D": 8, "noise": 20, "T": 32}
INITS = ("constant", "balanced")
SMALL = {"S": 5, "R": 3, "D": 3, "noise": 7, "T": 8, "d": 12, "batch": 64, "test_size": 64, "init_scale": 0.3}


def one(config, pad=EXACT):
    """(shape, dyn) of a single run as jnp values, for calling the experiment functions directly."""
    configs, shape = bucket_shape([config], pad, EXP)
    return shape, {k: jnp.asarray(v) for k, v in traced_values(EXP, configs[0]).items()}


def init(config, seed=0):
    shape, dyn = one(config)
    params, problem = jax.jit(lambda k: EXP.init(k, shape, dyn))(jax.random.PRNGKey(seed))
    return shape, dyn, params, problem


@pytest.mark.parametrize("model", sl.MODELS)
def test_init_predicts_uniformly(model):
    """Spec §6.4 item 1: L(0) = ln|A|, relation-only ln(|A|/D), subject-only ln(|A|/R); eq. (16) at
    p̂ = uniform is Σ_a (p*(a|r) − 1/|A|)² = 1/D − 1/|A|. Both inits (traced: one compile)."""
    R, D = FIG5["R"], FIG5["D"]
    answers = R * D
    configs = {scheme: EXP.complete({**FIG5, "model": model, "init": scheme, "test_size": 256}) for scheme in INITS}
    shape, _ = one(configs["constant"])  # the init scheme is traced: one shape, one compile
    untrained = jax.jit(lambda k, dyn: EXP.evaluate(*EXP.init(k, shape, dyn), shape, dyn))
    expected = {
        "loss": math.log(answers),
        "relation_loss": math.log(answers / D),
        "subject_loss": math.log(answers / R),
        "hallucination": 1 / D - 1 / answers,
    }
    for scheme, config in configs.items():
        metrics = untrained(jax.random.PRNGKey(0), one(config)[1])
        if model in sl.REDUCED:
            kq = config["init_scale"] * (math.sqrt(answers + 1) if scheme == "balanced" else 1.0)
            expected.update(invariant_drift=0.0, kq_subject_max=kq, kq_noise_max=kq)
        for name, value in expected.items():
            np.testing.assert_allclose(float(metrics[name]), value, rtol=1e-5, atol=1e-12, err_msg=(scheme, name))
    params = jax.eval_shape(lambda k: EXP.init(k, shape, one(config)[1])[0], jax.random.PRNGKey(0))
    assert EXP.cost("params", EXP.effective(config)) == sum(p.size for p in params.values())


def test_structured_dictionary_makes_p_star_uniform_on_block_r():
    _, _, _, problem = init({**FIG5, "model": "population"})
    S, R, D = FIG5["S"], FIG5["R"], FIG5["D"]
    facts, p_star = np.asarray(problem["facts"]), np.asarray(problem["p_star"])
    assert np.array_equal(facts[0::2], facts[1::2]), "subjects 2k and 2k+1 share their answers"
    for r in range(R):
        block = np.zeros(R * D)
        block[r * D : (r + 1) * D] = 1 / D
        np.testing.assert_allclose(p_star[r], block, atol=1e-7)
        assert np.array_equal(np.asarray(problem["in_r"])[r], block > 0)
    in_s = np.asarray(problem["in_s"])
    assert np.all(in_s.sum(1) == R) and np.all(in_s[np.arange(S), facts[:, 0]])


def test_random_dictionary_stays_in_blocks_and_sets_follow_it():
    _, _, _, problem = init({**FIG5, "model": "linear_attention", "dictionary": "random"})
    facts, p_star = np.asarray(problem["facts"]), np.asarray(problem["p_star"])
    D = FIG5["D"]
    assert np.all(facts // D == np.arange(FIG5["R"])[None, :])
    for r in range(FIG5["R"]):
        expected = np.bincount(facts[:, r], minlength=p_star.shape[1]) / FIG5["S"]
        np.testing.assert_allclose(p_star[r], expected, atol=1e-7)


@pytest.mark.parametrize(
    "model, dictionary, scheme",
    [
        ("linear_attention", "structured", "constant"),
        pytest.param("softmax_head", "random", "balanced", marks=pytest.mark.slow),  # ~9 s
        pytest.param("population", "random", "balanced", marks=pytest.mark.slow),  # ~10 s; the model also below
    ],
)
def test_padded_run_equals_unpadded_run(model, dictionary, scheme):
    config = {**SMALL, "model": model, "dictionary": dictionary, "init": scheme}
    steps = 20
    small = run_program([config], EXACT, 2, steps, [1.0], stop=2.0, exp=EXP, eval_every=4)
    big = run_program([config], BIG, 2, steps, [1.0], stop=2.0, exp=EXP, eval_every=4)
    metrics = sl.METRICS if model in sl.REDUCED else sl.METRICS[:5]
    assert_padded_matches(small, big, metrics, steps)
    assert float(big.last["loss"][0]) < math.log(9) - 0.05, "the runs must actually have trained"


def test_population_model_matches_sampled_linear_attention():
    """SGD on sampled sequences and GD on the population loss follow the same trajectory (spec §6.3): with
    α = 0.01 and lr 0.5, after 300 steps the relations are learned and the subjects are escaping."""
    config = {**FIG5, "init_scale": 0.01, "batch": 1024, "test_size": 4096}
    steps = 300
    runs = {
        model: run_program([{**config, "model": model}], EXACT, 1, steps, [0.5], stop=2.0, exp=EXP, eval_every=100)
        for model in ("population", "linear_attention")
    }
    exact, sampled = ({k: float(v[0]) for k, v in runs[m].last.items()} for m in ("population", "linear_attention"))
    assert exact["loss"] < math.log(FIG5["D"]) and exact["relation_loss"] < 0.1, exact
    for name in ("loss", "relation_loss", "subject_loss", "hallucination"):
        assert abs(exact[name] - sampled[name]) < 0.02, (name, exact[name], sampled[name])


def test_invariant_is_conserved_as_gd_approaches_gradient_flow():
    """Lemma 4: W_KQ(z)² − ‖W_OV(·, z)‖² is constant under gradient flow; GD with step lr changes it by
    O(lr²) per step, so at a fixed time t = lr·steps the drift is O(lr) and halves with lr, while the
    relation weights have grown by orders of magnitude."""
    config = {**FIG5, "model": "population", "init": "balanced", "init_scale": 0.01}
    time = 80.0
    drift = {}
    for lr in (0.1, 0.05):
        state = run_program([config], EXACT, 1, int(time / lr), [lr], stop=2.0, exp=EXP, eval_every=100)
        last = {k: float(v[0]) for k, v in state.last.items()}
        assert last["relation_loss"] < 0.5, last  # the relations have escaped the origin
        kq = np.asarray(state.params["W_KQ"][0])
        assert kq.max() ** 2 > 1e3 * last["invariant_drift"], (kq.max(), last["invariant_drift"])
        drift[lr] = last["invariant_drift"]
    assert 0.35 < drift[0.05] / drift[0.1] < 0.65, drift
