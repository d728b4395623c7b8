"""mha_heads (Deora et al. 2024, spec 002): the exact head reduction against the full H-head model in
float64 (RT-02, with the first-step init's two sign groups), padded-equals-unpadded across H and n,
Lanczos against the dense Hessian, the leave-one-out replicas, and the shipped sweep specs."""

from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from jaxmem.experiments.deora24 import hessian, model
from jaxmem.experiments.deora24 import mha_heads as mh
from jaxmem.plan.buckets import host_run, padder, static_shape
from jaxmem.spec import sweep as specmod

EXP = mh.EXPERIMENT
TINY = {"data": "dm1", "T": 5, "d": 4, "n": 12, "n_test": 8}
STEPS = 40
SWEEPS = sorted((Path(__file__).resolve().parents[1] / "sweeps" / "deora24").glob("*.toml"))


def as_dyn(values: dict, lr: float) -> dict:
    dyn = {k: jnp.asarray(v, jnp.float64 if isinstance(v, float) else jnp.int32) for k, v in values.items()}
    return {**dyn, "lr": jnp.asarray(lr, jnp.float64)}


def setup(config: dict, shape=None, seed: int = 0):
    """The run's key, static shape (unpadded unless given) and float64 traced values, as the engine has them."""
    run = host_run(EXP, EXP.complete(config), seed)
    return run.key, shape or run.shape, as_dyn(run.dyn, 1.0)


def make_trainer(shape):
    """A jitted float64 trainer for one static shape: (key, dyn) -> (params, problem, metrics) after
    STEPS steps, and the initial params. The optimiser is traced: GD, momentum and Adam share its compile."""

    @jax.jit
    def train(key, dyn):
        params, problem = EXP.init(key, shape, dyn)
        opt = EXP.optimizer(dyn)

        def step(carry, _):
            p, s = carry
            updates, s = opt.update(jax.grad(EXP.loss)(p, problem, shape, dyn), s, p)
            return (optax.apply_updates(p, updates), s), None

        (trained, _), _ = jax.lax.scan(step, (params, opt.init(params)), None, length=STEPS)
        return trained, problem, EXP.evaluate(trained, problem, shape, dyn), params

    return train


@pytest.fixture(scope="module")
def x64():
    with jax.enable_x64(True):
        yield


def outputs(params, problem, X) -> np.ndarray:
    return np.asarray(model.output(params, X, problem["counts"], problem["scale"]))


@pytest.mark.parametrize("init", ["zero", "first_step"])
def test_the_reduction_equals_the_full_model_in_float64(x64, init):
    """RT-02: H identical heads ≡ one group of multiplicity H with per-head gradients, for GD (η = √H),
    heavy ball and Adam (whose ε needs no rescaling in per-head coordinates); the first-step init as two
    sign groups. Compared on held-out inputs after STEPS steps: max |ΔΦ̃| < 1e-10."""
    H = 4
    config = {**TINY, "H": H, "init": init}
    trainers = {r: make_trainer(setup({**config, "reduced": r})[1]) for r in (False, True)}
    for optimizer in mh.OPTIMIZERS:
        results = {}
        for reduced, train in trainers.items():
            key, _, dyn = setup({**config, "reduced": reduced, "optimizer": optimizer})
            params, problem, _, initial = train(key, dyn)
            results[reduced] = outputs(params, problem, problem["test"]["X"]), params, problem, initial
        (full, p_full, _, start), (red, p_red, prob_red, _) = results[False], results[True]
        assert np.max(np.abs(red)) > 1.0, "the runs moved"
        assert np.max(np.abs(full - red)) < 1e-10, optimizer
        heads = {k: np.asarray(v) for k, v in p_full.items()}
        if init == "zero":  # every head stayed identical
            assert np.max(np.abs(heads["U"] - heads["U"][:1])) < 1e-12
        else:  # θ̃⁽¹⁾ (Prop. 2): W⁽¹⁾ = 0, identical rows, heads ±1 × one vector; then two sign groups
            U0 = np.asarray(start["U"])
            assert not np.asarray(start["W"]).any()
            assert np.allclose(U0, U0[:, :1, :]) and np.allclose(np.abs(U0), np.abs(U0[:1])) and U0.any()
            plus = np.isclose(heads["U"], p_red["U"][0]).all(axis=(1, 2))
            minus = np.isclose(heads["U"], p_red["U"][1]).all(axis=(1, 2))
            assert (plus | minus).all()
            assert [plus.sum(), minus.sum()] == list(np.asarray(prob_red["counts"]).astype(int))
            assert np.isclose(heads["U"][plus].sum(), heads["U"][plus][:1].sum() * plus.sum())


def test_padded_heads_and_samples_change_nothing(x64):
    """A run padded to more heads and samples (masked) equals the unpadded one: random heads (the draws
    are shape-stable) and the dense Hessian with padded directions lifted out."""
    config = {**TINY, "H": 3, "n": 11, "init": "random", "hessian": "dense"}
    padded = static_shape(EXP, config, padder(2.0))
    assert (padded["H"], padded["n"]) == (4, 16)
    values = []
    for shape in (None, padded):
        key, shape, dyn = setup(config, shape)
        values.append(make_trainer(shape)(key, dyn)[2])
    for name in ("loss", "test_loss", "margin", "attn", "w_norm", "u_norm", "grad_ratio", "lambda_min"):
        assert abs(float(values[0][name]) - float(values[1][name])) < 1e-10 * max(1.0, abs(float(values[0][name])))


@pytest.mark.slow  # two float64 Hessian compiles (~10 s); the exact-spectrum test below stays in the default run
def test_lanczos_finds_the_dense_minimum(x64):
    """λ_min by Lanczos over HVPs equals the dense Hessian's at a random point with negative curvature."""
    key, shape, dyn = setup({**TINY, "H": 2, "init": "random", "hessian": "dense", "init_scale": 3.0})
    params, problem = EXP.init(key, shape, dyn)
    dense = float(jax.jit(lambda p, q: mh.curvature(p, q, shape))(params, problem))
    assert dense < 0
    lanczos_shape = {**shape, "hessian": "lanczos", "lanczos_iters": 40}
    lanczos = float(jax.jit(lambda p, q: mh.curvature(p, q, lanczos_shape))(params, problem))
    assert abs(lanczos - dense) < 1e-8 * abs(dense)


def test_lanczos_is_exact_on_a_known_spectrum(x64):
    eigenvalues = jnp.array([-3.0, -1.0, 0.5, 2.0, 7.0])
    q, _ = jnp.linalg.qr(jax.random.normal(jax.random.PRNGKey(0), (5, 5)))
    matrix = q @ jnp.diag(eigenvalues) @ q.T
    assert abs(float(hessian.lanczos_min(lambda v: matrix @ v, jnp.ones(5), 8)) + 3.0) < 1e-12


def test_leave_one_out_replicas_are_separate_runs(x64):
    """Replica i + 1 of a `loo` run is GD on L̂^{¬i} = (1/n) Σ_{j≠i} ℓ_j, run by itself."""
    config = {**TINY, "n": 6, "H": 1, "reduced": True, "loo": True, "optimizer": "gd", "lr_power": 0.0}
    key, shape, dyn = setup(config)
    params, problem, metrics, _ = make_trainer(shape)(key, dyn)
    train, i = problem["train"], 2
    weights = train["weights"].at[i].set(0.0)

    def step(p, _):
        grads = jax.grad(model.empirical_loss)(p, train["X"], train["y"], weights, problem["counts"], 1.0)
        return jax.tree.map(lambda a, g: a - g, p, grads), None

    start = {"U": jnp.zeros_like(params["U"][0]), "W": jnp.zeros_like(params["W"][0])}
    alone, _ = jax.lax.scan(step, start, None, length=STEPS)
    assert np.max(np.abs(np.asarray(params["U"][i + 1]) - np.asarray(alone["U"]))) < 1e-12
    assert np.max(np.abs(np.asarray(params["W"][i + 1]) - np.asarray(params["W"][0]))) > 1e-6
    distance = np.sqrt(
        sum(np.sum((np.asarray(v[1:]) - np.asarray(v[:1])) ** 2, axis=(1, 2, 3)) for v in params.values())
    )
    assert abs(float(metrics["loo_stability"]) - distance[: config["n"]].mean()) < 1e-12


def test_dm1_and_dm2_follow_app_g():
    """DM1: one relevant token holding μ_y, attention 1/T and loss log 2 at θ̃ = 0; DM2: labels are the
    planted head's sign, with |Φ*| above the rejection margin."""
    key, shape, dyn = setup({**TINY, "n": 64, "H": 1})
    params, problem = EXP.init(key, shape, dyn)
    metrics = EXP.evaluate(params, problem, shape, dyn)
    assert abs(float(metrics["loss"]) - np.log(2)) < 1e-6 and abs(float(metrics["attn"]) - 0.2) < 1e-6
    train = problem["train"]
    assert (np.asarray(train["relevant"]).sum(axis=1) == 1).all()
    mu = np.asarray(train["X"])[np.asarray(train["relevant"])]
    assert np.allclose(mu[:, 0] - mu[:, 1], 2.0 * np.asarray(train["y"]))
    key, shape, dyn = setup({**TINY, "data": "dm2", "n": 64, "H": 1})
    _, problem = EXP.init(key, shape, dyn)
    logit = np.asarray(model.heads(problem["planted"], problem["train"]["X"])[0][:, 0])
    assert (np.abs(logit) > 0.2).all() and (np.sign(logit) == np.asarray(problem["train"]["y"])).all()
    assert 0.0 < float(problem["train"]["accept"]) < 1.0  # some candidates rejected, some kept


@pytest.mark.parametrize("path", SWEEPS, ids=lambda p: p.stem)
def test_shipped_sweeps_load(path):
    for preset in ("quick", "paper"):
        spec = specmod.load(path, preset)
        assert spec.experiment == "mha_heads" and spec.points
