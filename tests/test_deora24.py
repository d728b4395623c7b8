"""mha_heads (Deora et al. 2024, spec 002): autodiff gradients and Hessian blocks against the closed forms of
Lemma 1 / 4 (RT-01), the exact head reduction against the full H-head model in
float64 (RT-02, with the first-step init's two sign groups), padded-equals-unpadded across H and n,
Lanczos on a known spectrum (against the dense Hessian: slow), the leave-one-out replicas, the data
models, θ_opt of eq. (9), the paper's NTK direction θ̃⋆ and the NTK max-margin (Frank–Wolfe), and the
shipped sweep specs.

Everything runs in float64 on tiny shapes, and every static shape compiles once: `Programs` keeps one
trainer (steps traced) and one evaluation per shape for the whole module, compiled with LLVM's
optimisations off (`compiled`: on these shapes compiling, not running, is the cost)."""

from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from jaxmem.experiments.deora24 import hessian, model, theory
from jaxmem.experiments.deora24 import mha_heads as mh
from jaxmem.plan.buckets import host_run
from jaxmem.spec import sweep as specmod

EXP = mh.EXPERIMENT
TINY = {"data": "dm1", "T": 5, "d": 4, "n": 12, "n_test": 8}
FULL = {**TINY, "H": 4, "reduced": False}
STEPS = 40
PER_HEAD_METRICS = (
    "loss",
    "margin",
    "theta_dist",
    "grad_ratio",
    "gd_ascent",
    "ntk_margin",
    "target_loss",
    "u_bar_error",
)
FAST_COMPILE = {"xla_backend_optimization_level": 0}
SWEEPS = sorted((Path(__file__).resolve().parents[1] / "sweeps" / "deora24").glob("*.toml"))


def compiled(fn, *args):
    """`fn` compiled for `args`' shapes with the backend's optimisations off (about 40 % less compile time)."""
    return jax.jit(fn).lower(*args).compile(compiler_options=FAST_COMPILE)


def as_dyn(values: dict, lr: float) -> dict:
    dyn = {k: jnp.asarray(v, jnp.float64 if isinstance(v, float) else jnp.int32) for k, v in values.items()}
    return {**dyn, "lr": jnp.asarray(lr, jnp.float64)}


def setup(config: dict, shape=None, seed: int = 0):
    """The run's key, static shape (unpadded unless given) and float64 traced values, as the engine has them."""
    run = host_run(EXP, EXP.complete(config), seed)
    return run.key, shape or run.shape, as_dyn(run.dyn, 1.0)


class Programs:
    """One compiled trainer, init and evaluation per static shape, shared by every test."""

    def __init__(self):
        self.trainers, self.inits, self.evaluations = {}, {}, {}

    @staticmethod
    def _key(shape) -> tuple:
        return tuple(sorted(shape.items()))

    def train(self, config: dict, shape=None, steps: int = STEPS):
        """(trained params, problem, initial params) of `config` after `steps` steps (traced: one compile)."""
        key, shape, dyn = setup(config, shape)
        if self._key(shape) not in self.trainers:
            self.trainers[self._key(shape)] = compiled(trainer(shape), key, dyn, steps)
        return self.trainers[self._key(shape)](key, dyn, steps)

    def start(self, config: dict, shape=None):
        """(initial params, problem): the shape's trainer at 0 steps if it has one, else init alone."""
        key, shape, dyn = setup(config, shape)
        if self._key(shape) in self.trainers:
            _, problem, params = self.trainers[self._key(shape)](key, dyn, 0)
            return params, problem
        if self._key(shape) not in self.inits:
            self.inits[self._key(shape)] = compiled(lambda k, d: EXP.init(k, shape, d), key, dyn)
        return self.inits[self._key(shape)](key, dyn)

    def evaluate(self, config: dict, params, problem, shape=None) -> dict:
        _, shape, dyn = setup(config, shape)
        if self._key(shape) not in self.evaluations:
            evaluate = lambda p, q, d: EXP.evaluate(p, q, shape, d)  # noqa: E731
            self.evaluations[self._key(shape)] = compiled(evaluate, params, problem, dyn)
        return {k: float(v) for k, v in self.evaluations[self._key(shape)](params, problem, dyn).items()}


def trainer(shape):
    """(key, dyn, steps) -> (params after `steps` optimiser steps, problem, initial params); the optimiser
    is traced, so GD, momentum and Adam share the compile."""

    def train(key, dyn, steps):
        params, problem = EXP.init(key, shape, dyn)
        opt = EXP.optimizer(dyn)

        def step(_, carry):
            p, s = carry
            updates, s = opt.update(jax.grad(EXP.loss)(p, problem, shape, dyn), s, p)
            return optax.apply_updates(p, updates), s

        trained, _ = jax.lax.fori_loop(0, steps, step, (params, opt.init(params)))
        return trained, problem, params

    return train


@pytest.fixture(scope="module", autouse=True)
def x64():
    with jax.enable_x64(True):
        yield


@pytest.fixture(scope="module")
def programs(x64):
    return Programs()


def outputs(params, problem, X) -> np.ndarray:
    return np.asarray(model.output(params, X, problem["counts"], problem["scale"]))


def softmax_jacobian(a: np.ndarray) -> np.ndarray:
    """φ'(g) = diag(a) − a aᵀ at a = softmax(g)."""
    return np.diag(a) - np.outer(a, a)


def closed_forms(U, W, X, b, c, e) -> dict:
    """One head's Lemma 1 / Lemma 4 closed forms (spec 002 §1.7), float64: ∇_U Φ = φ(XWXᵀ)X, ∇_W Φ =
    Σ_t x_t u_tᵀ Xᵀ φ'(g_t) X with g_t = XWᵀx_t, and the Hessian blocks as bilinear forms:
    ∇_W⟨e, ∇_U Φ b⟩ = Σ_t x_t e_t bᵀ Xᵀ φ'(g_t) X and ∇_W⟨c, ∇_W Φ b⟩ = Σ_t (cᵀx_t) x_t d_tᵀ φ'(g_t) X,
    d_t = diag(Xb) X u_t − X u_t bᵀXᵀφ(g_t) − X b u_tᵀXᵀφ(g_t)."""
    A = np.stack([np.exp(g - g.max()) / np.exp(g - g.max()).sum() for g in X @ W @ X.T])  # row t = φ(g_t)
    jac = [softmax_jacobian(a) for a in A]
    Xb = X @ b
    grad_w = sum(np.outer(x, u @ X.T @ J @ X) for x, u, J in zip(X, U, jac))
    mixed = sum(e_t * np.outer(x, b @ X.T @ J @ X) for x, e_t, J in zip(X, e, jac))
    curvature = 0.0
    for x, u, a, J in zip(X, U, A, jac):
        Xu = X @ u
        d_t = Xb * Xu - Xu * (b @ X.T @ a) - Xb * (u @ X.T @ a)
        curvature = curvature + (c @ x) * np.outer(x, d_t @ J @ X)
    return {"grad_U": A @ X, "grad_W": grad_w, "UW": mixed, "WW": curvature}


@pytest.mark.parametrize("T, d, H", [(4, 3, 1), (7, 5, 3)])
def test_autodiff_gradients_and_hessian_blocks_are_the_closed_forms(T, d, H):
    """RT-01: autodiff ∇_U, ∇_W and the Hessian blocks of the H-head model (Eq. 2, model.output) equal
    H^{-1/2} times one head's closed forms (rel. err < 1e-10 in float64); ∇²_U = 0, and heads do not
    interact (the Hessian is block-diagonal across heads)."""
    rng = np.random.default_rng(T * d + H)
    X, U, W = rng.normal(size=(T, d)), rng.normal(size=(H, T, d)), 0.5 * rng.normal(size=(H, d, d))
    b, c, e = rng.normal(size=d), rng.normal(size=d), rng.normal(size=T)
    scale = H**-0.5
    phi = lambda p: model.output(p, jnp.asarray(X)[None], jnp.ones(H), scale)[0]  # noqa: E731
    params = {"U": jnp.asarray(U), "W": jnp.asarray(W)}
    grads, hess = jax.jit(lambda p: (jax.grad(phi)(p), jax.hessian(phi)(p)))(params)
    grads, hess = jax.tree.map(np.asarray, (grads, hess))

    def close(got, want):
        assert np.linalg.norm(got - want) <= 1e-10 * np.linalg.norm(want), (got, want)

    for h in range(H):
        want = {k: scale * v for k, v in closed_forms(U[h], W[h], X, b, c, e).items()}
        close(grads["U"][h], want["grad_U"])
        close(grads["W"][h], want["grad_W"])
        close(np.einsum("t,j,tjkl->kl", e, b, hess["U"]["W"][h, :, :, h]), want["UW"])
        close(np.einsum("i,j,ijkl->kl", c, b, hess["W"]["W"][h, :, :, h]), want["WW"])
        others = np.arange(H) != h
        for row, col in (("W", "W"), ("U", "W"), ("W", "U")):
            assert not hess[row][col][h][..., others, :, :].any(), (row, col)  # heads do not interact
    assert not hess["U"]["U"].any()  # Φ is linear in U


@pytest.mark.parametrize("init", ["zero", pytest.param("first_step", marks=pytest.mark.slow)])
def test_the_reduction_equals_the_full_model_in_float64(programs, init):
    """RT-02: H identical heads ≡ one group of multiplicity H with per-head gradients, for GD (η = √H),
    heavy ball and Adam (whose ε needs no rescaling in per-head coordinates); the first-step init as two
    sign groups. Compared on held-out inputs after STEPS steps: max |ΔΦ̃| < 1e-10; for the first-step init
    also the metrics that use the per-head gradient (‖∇L̂‖/L̂, a GD step's ascent) and θ̃⋆."""
    for optimizer in mh.OPTIMIZERS:
        full_cfg = {**FULL, "init": init, "optimizer": optimizer, "K": STEPS}
        reduced_cfg = {**TINY, "H": 4, "reduced": True, "init": init, "optimizer": optimizer, "K": STEPS}
        p_full, problem, start = programs.train(full_cfg)
        p_red, prob_red, _ = programs.train(reduced_cfg)
        full, red = outputs(p_full, problem, problem["test"]["X"]), outputs(p_red, prob_red, problem["test"]["X"])
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
            full_metrics = programs.evaluate(full_cfg, p_full, problem)
            reduced_metrics = programs.evaluate(reduced_cfg, p_red, prob_red)
            for name in PER_HEAD_METRICS:
                assert abs(full_metrics[name] - reduced_metrics[name]) < 1e-9 * max(1.0, abs(full_metrics[name])), name


def test_padded_heads_and_samples_change_nothing(programs):
    """A run padded to more heads and samples (masked) equals the unpadded one: first-step heads (signs
    α_h from shape-stable draws), training and every metric (λ_min with padded heads: the slow test). The
    padded shape is the reduction test's full-model program."""
    config = {**FULL, "H": 3, "n": 11, "init": "first_step"}
    _, unpadded, _ = setup(config)
    padded = {**unpadded, "H": 4, "n": 12}
    values = []
    for shape in (unpadded, padded):
        params, problem, _ = programs.train(config, shape)
        values.append(programs.evaluate(config, params, problem, shape))
    assert values[0]["loss"] < 0.5
    for name in ("loss", "test_loss", "margin", "attn", "w_norm", "u_norm", "grad_ratio", "gd_ascent", "ntk_margin"):
        assert abs(values[0][name] - values[1][name]) < 1e-10 * max(1.0, abs(values[0][name])), name


@pytest.mark.slow  # four float64 Hessian compiles (~20 s); the exact-spectrum test below stays in the default run
def test_lanczos_finds_the_dense_minimum(programs):
    """λ_min by Lanczos over HVPs equals the dense Hessian's at a random point with negative curvature,
    and both ignore padded heads (lifted out of the spectrum; kept out of the Krylov space)."""
    config = {**TINY, "H": 2, "init": "random", "hessian": "dense", "init_scale": 3.0}
    key, shape, dyn = setup(config)
    params, problem = EXP.init(key, shape, dyn)
    dense = float(jax.jit(lambda p, q: mh.curvature(p, q, shape))(params, problem))
    assert dense < 0
    lanczos_shape = {**shape, "hessian": "lanczos", "lanczos_iters": 40}
    params, problem = EXP.init(key, lanczos_shape, dyn)  # the same heads, and the Lanczos start vector
    lanczos = float(jax.jit(lambda p, q: mh.curvature(p, q, lanczos_shape))(params, problem))
    assert abs(lanczos - dense) < 1e-8 * abs(dense)
    for padded in ({**shape, "H": 4, "n": 16}, {**lanczos_shape, "H": 4, "n": 16}):
        params, problem = EXP.init(key, padded, dyn)
        assert abs(float(jax.jit(lambda p, q: mh.curvature(p, q, padded))(params, problem)) - dense) < 1e-8 * abs(dense)


def test_lanczos_is_exact_on_a_known_spectrum():
    eigenvalues = np.array([-3.0, -1.0, 0.5, 2.0, 7.0])
    q, _ = np.linalg.qr(np.random.default_rng(0).normal(size=(5, 5)))
    matrix = jnp.asarray(q @ np.diag(eigenvalues) @ q.T)
    lowest = compiled(lambda m: hessian.lanczos_min(lambda v: m @ v, jnp.ones(5, m.dtype), 8), matrix)(matrix)
    assert abs(float(lowest) + 3.0) < 1e-12


def test_leave_one_out_replicas_are_separate_runs(programs):
    """Replica i + 1 of a `loo` run is GD on L̂^{¬i} = (1/n) Σ_{j≠i} ℓ_j, run by itself."""
    config = {**TINY, "n": 6, "H": 1, "reduced": True, "loo": True, "optimizer": "gd", "lr_power": 0.0}
    params, problem, _ = programs.train(config)
    metrics = programs.evaluate(config, params, problem)
    train, i = problem["train"], 2
    weights = train["weights"].at[i].set(0.0)

    def step(p, _):
        grads = jax.grad(model.empirical_loss)(p, train["X"], train["y"], weights, problem["counts"], 1.0)
        return jax.tree.map(lambda a, g: a - g, p, grads), None

    start = {"U": jnp.zeros_like(params["U"][0]), "W": jnp.zeros_like(params["W"][0])}
    alone, _ = compiled(lambda s: jax.lax.scan(step, s, None, length=STEPS), start)(start)
    assert np.max(np.abs(np.asarray(params["U"][i + 1]) - np.asarray(alone["U"]))) < 1e-12
    assert np.max(np.abs(np.asarray(params["W"][i + 1]) - np.asarray(params["W"][0]))) > 1e-6
    distance = np.sqrt(
        sum(np.sum((np.asarray(v[1:]) - np.asarray(v[:1])) ** 2, axis=(1, 2, 3)) for v in params.values())
    )
    assert abs(metrics["loo_stability"] - distance[: config["n"]].mean()) < 1e-12
    assert abs(metrics["n_loo"] - config["n"] * metrics["loo_stability"]) < 1e-12


def test_dm1_and_dm2_follow_app_g(programs):
    """DM1: one relevant token holding μ_y, attention 1/T and loss log 2 at θ̃ = 0; DM2: labels are the
    planted head's sign, with |Φ*| above the rejection margin."""
    config = {**TINY, "H": 4, "reduced": True, "init": "zero"}
    initial, problem = programs.start(config)
    metrics = programs.evaluate(config, initial, problem)
    assert abs(metrics["loss"] - np.log(2)) < 1e-12 and abs(metrics["attn"] - 1 / TINY["T"]) < 1e-12
    train = problem["train"]
    assert (np.asarray(train["relevant"]).sum(axis=1) == 1).all()
    mu = np.asarray(train["X"])[np.asarray(train["relevant"])]
    assert np.allclose(mu[:, 0] - mu[:, 1], 2.0 * np.asarray(train["y"]))
    _, problem = programs.start({**TINY, "data": "dm2", "n": 64, "H": 1})
    logit = np.asarray(model.heads(problem["planted"], problem["train"]["X"])[0][:, 0])
    assert (np.abs(logit) > 0.2).all() and (np.sign(logit) == np.asarray(problem["train"]["y"])).all()
    assert 0.0 < float(problem["train"]["accept"]) < 1.0  # some candidates rejected, some kept


def test_optimal_head_saturates_attention_as_prop3_says(programs):
    """init = optimal is θ_opt = (U_opt, Γ W_opt) of eq. (9) for every head, Φ̃ = Φ(X; U_opt, Γ W_opt): on
    noise-free DM1 every query row puts e^{gΓ}/(e^{gΓ} + T − ζT) on the relevant token (g = S²/√(2(M+1)),
    §2.4), and the U-normalised margin tends to γ_attn = S√T/√2 (Prop. 3, RT-14)."""
    T, S, M = TINY["T"], 2.0, 2
    g = S**2 / np.sqrt(2 * (M + 1))
    for gamma in (0.5, 2.0, 20.0):
        config = {**TINY, "H": 4, "reduced": True, "init": "optimal", "sigma": 0.0, "init_scale": gamma}
        initial, problem = programs.start(config)
        metrics = programs.evaluate(config, initial, problem)
        assert abs(metrics["attn"] - np.exp(g * gamma) / (np.exp(g * gamma) + T - 1)) < 1e-12
        head = theory.optimal_head(T, TINY["d"], M, S, gamma)
        single = np.asarray(model.heads(jax.tree.map(lambda a: a[None], head), problem["train"]["X"])[0][:, 0])
        assert np.allclose(outputs(initial, problem, problem["train"]["X"]), single, atol=1e-12)
    assert abs(metrics["margin"] - S * np.sqrt(T / 2)) < 1e-9


def test_the_paper_ntk_direction_has_one_margin_for_every_h(programs):
    """θ̃⋆ of §5.5 (‖θ̃⋆‖ = √2) at θ̃⁽¹⁾: its NTK margin γ = min_i y_i ⟨∇Φ̃(X_i), θ̃⋆⟩ is the central
    difference of Φ̃ along θ̃⋆, and the same on the full model and on the two-group reduction (E10: it
    does not depend on α); the Prop. 7 target θ̃₀ + g₀(ε) θ̃⋆ reaches L̂ ≤ ε on these data."""

    def check(theta0, problem, h=1e-4):
        counts, train, scale = problem["counts"], problem["train"], problem["scale"]
        direction = theory.paper_direction(problem["alpha"], counts, TINY["T"], TINY["d"], 2, 2.0)
        target = theory.realizability(theta0, direction, train, counts, scale, 1e-3)
        moved = [jax.tree.map(lambda a, b: a + s * h * b, theta0, direction) for s in (1, -1)]
        slope = model.output(moved[0], train["X"], counts, scale) - model.output(moved[1], train["X"], counts, scale)
        return target, model.norms(direction, counts)["theta"], jnp.min(train["y"] * slope / (2 * h))

    margins = []
    for config in ({**FULL, "init": "first_step"}, {**TINY, "H": 4, "reduced": True, "init": "first_step"}):
        start = programs.start(config)
        target, norm, central = compiled(check, *start)(*start)
        assert abs(float(norm) - np.sqrt(2)) < 1e-12
        assert abs(float(target["gamma"]) - float(central)) < 1e-7
        assert float(target["gamma"]) > 0 and float(target["loss"]) <= 1e-3
        margins.append(float(target["gamma"]))
    assert abs(margins[0] - margins[1]) < 1e-12


def ntk_at_start(theta0, problem, iters: int = 3000):
    """The NTK features at θ̃₀ and the NTK max-margin with its duality gap."""
    train, counts, scale = problem["train"], problem["counts"], problem["scale"]
    features = theory.ntk_features(theta0, train["X"], train["y"], counts, scale)
    return features, mh.ntk_max_margin(theta0, train, counts, scale, {"ntk_iters": iters})


@pytest.mark.slow  # two jacrev + Frank–Wolfe compiles (~2–3 s of CPU); the sweeps' runs exercise the same code
def test_the_ntk_max_margin_at_zero_is_the_mean_pooling_models(programs):
    """At θ̃₀ = 0 the NTK features are those of the mean-pooling linear model (∇_U Φ̃ ∝ 1_T x̄ᵀ, ∇_W Φ̃ = 0;
    E11), per head as on H identical heads, so the NTK max-margin (§5.9) is that model's max U-normalised
    margin, the same on the full model and on the reduction (RT-18's limit); Frank–Wolfe closes its duality
    gap."""
    margins = []
    for config in ({**FULL, "init": "zero"}, {**TINY, "H": 4, "reduced": True, "init": "zero"}):
        start = programs.start(config)
        features, found = compiled(ntk_at_start, *start)(*start)
        train, counts = start[1]["train"], np.asarray(start[1]["counts"])
        n, p_u = len(train["y"]), TINY["T"] * TINY["d"]
        y_pooled = np.asarray(train["y"])[:, None, None] * np.asarray(train["X"]).mean(1)[:, None, :]
        pooled = np.broadcast_to(y_pooled, (n, TINY["T"], TINY["d"])).reshape(n, -1)  # y_i 1_T x̄_iᵀ
        u_block, w_block = np.split(np.asarray(features), [len(counts) * p_u], axis=1)
        expected = np.sqrt(counts / counts.sum())[None, :, None] * pooled[:, None, :]  # √counts_g H^{-1/2} 1_T x̄ᵀ
        assert np.allclose(u_block.reshape(n, len(counts), p_u), expected, atol=1e-12) and np.all(w_block == 0)
        assert 0 < float(found["margin"]) and float(found["gap"]) < 1e-9
        margins.append(float(found["margin"]))
    assert abs(margins[0] - margins[1]) < 1e-10


def test_attention_step_zero_trains_the_mean_pooling_model(programs):
    """attention_step = 0 keeps W at θ̃₀ = 0 while U trains: the mean-pooling linear model, RT-18's limit
    (the trainer of the reduced zero-init shape, shared with the reduction test: attention_step is traced)."""
    config = {**TINY, "H": 4, "reduced": True, "init": "zero", "optimizer": "gd", "attention_step": 0.0}
    trained, problem, _ = programs.train(config)
    assert not np.asarray(trained["W"]).any() and np.asarray(trained["U"]).any()
    moving, _, _ = programs.train({**config, "attention_step": 1.0})
    assert np.asarray(moving["W"]).any()


@pytest.mark.parametrize("path", SWEEPS, ids=lambda p: p.stem)
def test_shipped_sweeps_load(path):
    for preset in ("quick", "paper"):
        spec = specmod.load(path, preset)
        assert spec.experiment == "mha_heads" and spec.points
