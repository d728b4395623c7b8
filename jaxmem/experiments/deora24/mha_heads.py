"""Optimisation and generalisation of multi-head attention against the number of heads H
(Deora, Ghaderi, Taheri & Thrampoulidis 2024; spec 002).

One run: the H-head classifier of Eq. (2) (model.py: d×d key–query W_h, T×d read-out U_h, output scale
1/H^c, c = 1/2 in the paper) trained full batch on the logistic loss of n DM1 or DM2 samples (data.py)
by GD, heavy-ball momentum or Adam (optim.py, a traced choice; η = lr·eta·H^lr_power, App. G's by default). Init (§1.6):
`zero` θ̃₀ = 0 (App. G), `first_step` the paper's θ̃⁽¹⁾ (Prop. 2: one GD step from 0 on n fresh
samples, per head ×α_h√H with α_h = ±1), `random` heads (U_h ~ N(0, s²/(Td)), W_h ~ N(0, s²/d²): the
RT-13 probe points, init_scale = s), or `optimal` (DM1): every head the optimal attention head θ_opt =
(U_opt, Γ W_opt) of eq. (9) with Γ = init_scale, U_h scaled by H^{c−1} so that Φ̃ = Φ(X; U_opt, Γ W_opt)
(Prop. 3, RT-14; train 0 steps).

`reduced = true` is the exact reduction (§1.9): identical heads are one group of multiplicity H (two
sign groups for `first_step`), with per-head gradients, so GD, momentum and Adam (ε included) follow the
full model's per-head numbers exactly, at the cost of one head whatever H. `reduced = false` trains all
H heads (padded to the bucket's H and masked): what the reduction is tested against (RT-02).

`loo = true` trains n + 1 replicas in the same run: replica 0 on all n samples and replica i on the
leave-one-out risk L̂^{¬i} = (1/n) Σ_{j≠i} ℓ_j (spec A18: 1/n, not 1/(n−1)); they are independent (the
loss is their sum and every optimiser is elementwise). `loo_stability` = (1/n) Σ_i ‖θ_K − θ_K^{¬i}‖
(Lemma 11). Every other metric is replica 0's.

Metrics (§4.2, spec A9–A11): loss (L̂), test_loss, gap (test − train loss), train_error, test_error,
margin = min_i y_i Φ̃(X_i)/‖Ũ‖_F (against γ_attn), margin_global = √2 min_i y_i Φ̃/‖θ̃‖, attn (DM1: the
mean softmax mass on the relevant tokens, over heads, samples and query rows), w_norm = (1/H) Σ_h ‖W_h‖,
u_norm = (1/√H) Σ_h ‖U_h‖, theta_dist = ‖θ̃ − θ̃₀‖, cos_w and cos_u (DM2: against W* and U* repeated
over the heads), grad_ratio = ‖∇L̂‖/L̂ and beta1 (Cor. 1(1)), lambda_min of ∇²L̂ (hessian = lanczos or
dense; full path only), lam_sqrtH = λ_min √H, hess_bound = −β₃ L̂/√H (Cor. 1(3)), r_hat = max ‖x_t‖,
accept (DM2: the rejection sampler's acceptance rate), loo_stability; the n-scaled n_loss, n_test_loss,
n_gap and n_loo (RT-10–12: bounded when the rates are 1/n); gd_ascent (1 when a GD step of the run's η
from θ̃_k raises L̂: Thm 1's descent violations, RT-17); and, for DM1, the theory quantities of theory.py
at θ̃₀ with the paper's direction θ̃⋆ (§5.5): ntk_margin γ, b_phi, and for K > 0 the realizability target
θ̃(1/K) = θ̃₀ + g₀(1/K) θ̃⋆ (Prop. 7): target_loss, target_ratio = K·target_loss (≤ 1: Assumption 2 (i)
holds at ε = 1/K), g0, thm1_bound = 2L̂(θ̃(1/K)) + 5‖θ̃(1/K) − θ̃₀‖²/(4ηK) (Thm 1, read at k = K),
thm1_ratio = L̂/thm1_bound (≤ 1 when it holds) and dist_ratio = ‖θ̃_k − θ̃₀‖/‖θ̃(1/K) − θ̃₀‖ (Thm 1: ≤ 4);
for first_step, u_bar_error = ‖ū − ζu⋆/4‖ (Lemma 2, erratum E1; RT-15). With ntk_iters > 0:
ntk_max_margin, the NTK max-margin at θ̃₀ per unit ‖θ̃⋆‖ (§5.9 by Frank–Wolfe; √2× it is §5.9's γ_NTK, the
scale of ntk_margin), and its duality gap ntk_max_margin_gap (RT-15, RT-18's limit, RT-19's separability).
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp

from jaxmem.experiments import draws
from jaxmem.experiments.deora24 import data, hessian, theory
from jaxmem.experiments.deora24.model import empirical_loss, heads, norms, output, per_head, real
from jaxmem.experiments.deora24.optim import OPTIMIZERS, optimizer, paper_steps
from jaxmem.experiments.interface import Costs, Experiment, size, static, traced

FIELDS = {
    "data": static(str, "dm1 (tokenised mixture) | dm2 (planted teacher)", "dm1", ("dm1", "dm2")),
    "H": size("attention heads", maximum=draws.COLS_LIMIT),
    "reduced": static(bool, "the exact head reduction (§1.9): one group of H identical heads", False),
    "n": size("training samples", maximum=draws.ROWS_LIMIT),
    "n_test": static(int, "test samples", 300, minimum=1),
    "T": static(int, "tokens per sample", 10, minimum=2),
    "d": static(int, "token dimension", 4, minimum=1),
    "M": static(int, "DM1: irrelevant patterns ν_1..ν_M", 2, minimum=1),
    "relevant": static(int, "DM1: relevant tokens per sample, ζT", 1, minimum=1),
    "S": traced(float, "DM1: pattern norm (signal strength)", 2.0, minimum=0.0),
    "sigma": traced(float, "DM1: noise standard deviation", 0.1, minimum=0.0),
    "reject_margin": traced(float, "DM2: keep samples with |Φ(X; W*, U*)| above this (App. G: 0.2)", 0.2),
    "init": static(
        str,
        "zero | first_step (θ̃⁽¹⁾, Prop. 2) | random (RT-13) | optimal (θ_opt of eq. 9, RT-14)",
        "zero",
        ("zero", "first_step", "random", "optimal"),
    ),
    "init_scale": traced(float, "random: U_h ~ N(0, s²/(Td)), W_h ~ N(0, s²/d²); optimal: Γ", 1.0, minimum=0.0),
    "c": traced(float, "output scale 1/H^c (Eq. 2: 1/2)", 0.5),
    "optimizer": traced(str, "gd | momentum (heavy ball) | adam", "gd", OPTIMIZERS),
    "eta": traced(float, "step η = lr · eta · H^lr_power; 0 = App. G's: gd 1, momentum 0.1, adam 0.06", 0.0),
    "lr_power": traced(float, "η ∝ H^lr_power (1/2: η ∝ √H); < 0 = App. G's: gd, momentum 1/2, adam 0", -1.0),
    "momentum": traced(float, "heavy-ball β", 0.9, minimum=0.0),
    "attention_step": traced(
        float, "multiplier on W's updates (0: W stays at θ̃₀; from 0 the mean-pooling model, RT-18)", 1.0, minimum=0.0
    ),
    "adam_eps": traced(float, "Adam ε", 1e-8, minimum=0.0),
    "K": traced(int, "freeze the parameters after K steps (0 = never)", 0, minimum=0),
    "loo": static(bool, "train the n leave-one-out replicas alongside (Lemma 11)", False),
    "hessian": static(str, "λ_min of ∇²L̂: none | lanczos | dense", "none", ("none", "lanczos", "dense")),
    "lanczos_iters": static(int, "Lanczos iterations (HVPs) per evaluation", 40, minimum=2),
    "ntk_iters": static(int, "Frank–Wolfe iterations for the NTK max-margin at θ̃₀ (0 = off)", 0, minimum=0),
}
DATA_FIELDS = ("data", "n_test", "T", "d", "M", "relevant", "S", "sigma", "reject_margin")
SAME_PROBLEM_ACROSS = tuple(n for n in FIELDS if n not in DATA_FIELDS)  # one seed: the same data for every H,
# optimiser, init and n (training sets nest along n: the draws are shape-stable)


def check(config) -> list[str]:
    problems = []
    if config["data"] == "dm1" and config["d"] < config["M"] + 2:
        problems.append(f"DM1 needs d >= M + 2 orthogonal patterns, got d = {config['d']}, M = {config['M']}")
    if config["data"] == "dm1" and config["relevant"] >= config["T"]:
        problems.append(f"DM1 needs relevant < T, got relevant = {config['relevant']}, T = {config['T']}")
    if config["reduced"] and config["init"] == "random":
        problems.append("init = random: the heads differ, so there is no reduction (reduced = false)")
    if config["init"] == "optimal" and config["data"] != "dm1":
        problems.append("init = optimal: θ_opt (eq. 9) is built from DM1's patterns (data = dm1)")
    if config["reduced"] and config["hessian"] != "none":
        problems.append("hessian: λ_min is computed on the full path only (reduced = false)")
    return problems


def groups(shape) -> int:
    """Parameter groups: H heads (full path), or one (two for first_step) on the reduced path."""
    if not shape["reduced"]:
        return shape["H"]
    return 2 if shape["init"] == "first_step" else 1


def sample(key, n: int, count, shape, dyn, planted) -> dict:
    """n samples of the run's data model, the first `count` real, with their loss weights 1/count."""
    if shape["data"] == "dm1":
        out = data.dm1(key, n, shape, dyn)
    else:
        out = data.dm2(key, n, count, shape, dyn, planted)
    out["weights"] = jnp.where(draws.active_mask(n, count), 1.0 / count, 0.0).astype(out["X"].dtype)
    return out


def first_step(key, phase1, shape, dyn, scale) -> tuple[dict, jax.Array, jax.Array]:
    """θ̃⁽¹⁾ = −α_h √H ∇_{θ_h} L̂_{n₁}(0) (Prop. 2, A15: n₁ = n): W⁽¹⁾ = 0, U_h⁽¹⁾ = −α_h √H H^{-c} g
    with g the one-head gradient at 0. Returns the group parameters, their multiplicities and signs α."""
    T, d, G = shape["T"], shape["d"], groups(shape)
    zero = {"U": jnp.zeros((1, T, d), phase1["X"].dtype), "W": jnp.zeros((1, d, d), phase1["X"].dtype)}
    one = jnp.ones(1, phase1["X"].dtype)
    g = jax.grad(empirical_loss)(zero, phase1["X"], phase1["y"], phase1["weights"], one, 1.0)["U"][0]
    (u,) = draws.uniform_matrices(key, [(1, shape["H"])])
    plus = (u[0] < 0.5) & draws.active_mask(shape["H"], dyn["H"])
    step = -jnp.sqrt(real(dyn["H"])) * scale * g
    if shape["reduced"]:
        alpha, counts = jnp.array([1.0, -1.0]), real(jnp.stack([jnp.sum(plus), dyn["H"] - jnp.sum(plus)]))
    else:
        alpha, counts = jnp.where(plus, 1.0, -1.0), real(draws.active_mask(G, dyn["H"]))
    U = real(alpha)[:, None, None] * step[None] * (counts > 0)[:, None, None]
    return {"U": U, "W": jnp.zeros((G, d, d), U.dtype)}, counts, real(alpha)


def start(key, phase1, shape, dyn, scale) -> tuple[dict, jax.Array, jax.Array]:
    """Initial group parameters, multiplicities and signs α (±1 for first_step, else 1): zero, first_step
    from the `phase1` samples, random heads, or θ_opt."""
    T, d, G = shape["T"], shape["d"], groups(shape)
    if shape["init"] == "first_step":
        return first_step(key, phase1, shape, dyn, scale)
    counts = real(jnp.full(1, dyn["H"]) if shape["reduced"] else draws.active_mask(G, dyn["H"]))
    alpha, live = jnp.ones_like(counts), (counts > 0)[:, None, None]
    if shape["init"] == "zero":
        return {"U": jnp.zeros((G, T, d), counts.dtype), "W": jnp.zeros((G, d, d), counts.dtype)}, counts, alpha
    if shape["init"] == "optimal":
        head = theory.optimal_head(T, d, shape["M"], real(dyn["S"]), real(dyn["init_scale"]))
        per_head = {"U": head["U"] / (scale * real(dyn["H"])), "W": head["W"]}  # Φ̃ = Φ(X; U_opt, Γ W_opt)
        return jax.tree.map(lambda p: p[None] * live, per_head), counts, alpha
    g_u, g_w = draws.normal_matrices(key, [(G, T, d), (G, d, d)])
    s = dyn["init_scale"]
    return {"U": real(g_u) * s / math.sqrt(T * d) * live, "W": real(g_w) * s / d * live}, counts, alpha


def replicas(params, weights, shape) -> tuple[dict, jax.Array]:
    """With `loo`: n + 1 copies of the parameters and their sample weights (replica i > 0 drops sample
    i − 1, keeping the 1/n normaliser); else the parameters and weights as they are."""
    if not shape["loo"]:
        return params, weights
    n = weights.shape[0]
    keep = 1.0 - jnp.concatenate([jnp.zeros((1, n)), jnp.eye(n)])
    return jax.tree.map(lambda p: jnp.broadcast_to(p, (n + 1,) + p.shape), params), weights * keep


def init(key, shape, dyn):
    """Data (train, test, and DM2's planted head), the heads' multiplicities and the initial heads."""
    T, d, n = shape["T"], shape["d"], shape["n"]
    planted = (  # DM2's teacher; DM1 never reads it (zeros: no draw to compile)
        data.teacher(jax.random.fold_in(key, 3), T, d)
        if shape["data"] == "dm2"
        else {"W": jnp.zeros((1, d, d), real(0.0).dtype), "U": jnp.zeros((1, T, d), real(0.0).dtype)}
    )
    train = sample(jax.random.fold_in(key, 0), n, dyn["n"], shape, dyn, planted)
    test = sample(jax.random.fold_in(key, 1), shape["n_test"], shape["n_test"], shape, dyn, planted)
    phase1 = (
        sample(jax.random.fold_in(key, 2), n, dyn["n"], shape, dyn, planted) if shape["init"] == "first_step" else None
    )
    scale = real(dyn["H"]) ** (-dyn["c"])
    theta0, counts, alpha = start(jax.random.fold_in(key, 4), phase1, shape, dyn, scale)
    params, train["loo_weights"] = replicas(theta0, train["weights"], shape)
    problem = {
        "train": train,
        "test": test,
        "planted": planted,
        "counts": counts,
        "scale": scale,
        "theta0": theta0,
        "alpha": alpha,
        "probe": probe(jax.random.fold_in(key, 5), counts, shape),
        "ntk": ntk_max_margin(theta0, train, counts, scale, shape),
    }
    return params, problem


def ntk_max_margin(theta0, train, counts, scale, shape) -> dict:
    """The NTK max-margin at θ̃₀ per unit ‖θ̃⋆‖ and its duality gap (theory.max_margin, §5.9; NaN when
    ntk_iters = 0). §5.9's γ_NTK (‖θ̃⋆‖ = √2, like ntk_margin) is √2 times it. At θ̃₀ = 0 the NTK is the
    mean-pooling linear model's (∇_W Φ̃ = 0, E11), so this is that model's max U-normalised margin: the
    large-H limit of `margin` under constant-η GD (RT-18)."""
    if shape["ntk_iters"] == 0:
        return {"margin": real(jnp.nan), "gap": real(jnp.nan)}
    features = theory.ntk_features(theta0, train["X"], train["y"], counts, scale)
    margin, gap = theory.max_margin(features, train["weights"] > 0, shape["ntk_iters"])
    return {"margin": margin, "gap": gap}


def probe(key, counts, shape) -> dict:
    """The Lanczos start vector: Gaussian on the live heads (zeros, no draw, unless hessian = lanczos)."""
    G, T, d = groups(shape), shape["T"], shape["d"]
    if shape["hessian"] != "lanczos":
        return {"U": jnp.zeros((G, T, d), counts.dtype), "W": jnp.zeros((G, d, d), counts.dtype)}
    g_u, g_w = draws.normal_matrices(key, [(G, T, d), (G, d, d)])
    live = (counts > 0)[:, None, None]
    return {"U": real(g_u) * live, "W": real(g_w) * live}


def loss(params, problem, shape, dyn, key=None):
    """L̂ (full batch, deterministic) with per-head gradients; with `loo`, the sum over the replicas."""
    train, counts, scale = problem["train"], problem["counts"], problem["scale"]

    def one(p, weights):
        return empirical_loss(per_head(p, counts), train["X"], train["y"], weights, counts, scale)

    return jax.vmap(one)(params, train["loo_weights"]).sum() if shape["loo"] else one(params, train["weights"])


def cosine_to_planted(params, counts, planted, key) -> jax.Array:
    """cos(W̃, W̃*) with W̃* the planted head repeated over the H heads (Fig. 4 caption)."""
    inner = counts @ jnp.sum(params[key] * planted[key], axis=(1, 2))
    size = jnp.sqrt(counts @ jnp.sum(params[key] ** 2, axis=(1, 2))) * jnp.sqrt(jnp.sum(counts))
    return inner / jnp.maximum(size * jnp.linalg.norm(planted[key]), 1e-30)


def relevant_mass(A, relevant, weights, counts) -> jax.Array:
    """Mean attention on the relevant tokens over heads, samples and query rows (spec A10)."""
    mass = jnp.einsum("igts,is->ig", A, relevant.astype(A.dtype)) / A.shape[-1]
    return jnp.sum(weights[:, None] * mass * counts) / jnp.sum(counts)


def curvature(params, problem, shape) -> jax.Array:
    """λ_min(∇²L̂(θ̃)) on the full path, by Lanczos or densely (hessian.py); NaN when off."""
    if shape["hessian"] == "none":
        return real(jnp.nan)
    train, counts, scale = problem["train"], problem["counts"], problem["scale"]
    risk = lambda p: empirical_loss(p, train["X"], train["y"], train["weights"], counts, scale)  # noqa: E731
    if shape["hessian"] == "dense":
        live = jax.tree.map(lambda p: jnp.broadcast_to((counts > 0)[:, None, None], p.shape), params)
        return hessian.dense_min(risk, params, live)
    return hessian.hvp_min(risk, params, problem["probe"], shape["lanczos_iters"])


def loo_stability(params, counts, n) -> jax.Array:
    """(1/n) Σ_i ‖θ̃_K − θ̃_K^{¬i}‖ over the n true leave-one-out replicas (Lemma 11)."""
    diff = jax.tree.map(lambda p: p[1:] - p[:1], params)
    dist = jnp.sqrt((jnp.sum(diff["U"] ** 2, axis=(2, 3)) + jnp.sum(diff["W"] ** 2, axis=(2, 3))) @ counts)
    return jnp.sum(jnp.where(jnp.arange(dist.shape[0]) < n, dist, 0.0)) / n


def bounds(r_hat, head_max, T, d) -> tuple[jax.Array, jax.Array]:
    """β₁ = √T R(2R²‖θ̃‖_{2,∞} + 1) and β₃ = 2√T d R³(3√d R²‖θ̃‖_{2,∞} + 1) (Cor. 1, R = max(R̂, 1))."""
    R = jnp.maximum(r_hat, 1.0)
    beta1 = math.sqrt(T) * R * (2 * R**2 * head_max + 1)
    beta3 = 2 * math.sqrt(T) * d * R**3 * (3 * math.sqrt(d) * R**2 * head_max + 1)
    return beta1, beta3


def step_size(dyn) -> jax.Array:
    """η = lr · eta · H^lr_power (optim.optimizer)."""
    return dyn["lr"] * dyn["eta"] * real(dyn["H"]) ** dyn["lr_power"]


THEOREM_METRICS = (  # theorem_checks' metrics
    "ntk_margin",
    "b_phi",
    "target_loss",
    "target_ratio",
    "g0",
    "thm1_bound",
    "thm1_ratio",
    "dist_ratio",
    "u_bar_error",
)


def theorem_checks(p, problem, shape, dyn, loss_now, moved) -> dict:
    """DM1: γ and B_Φ of the paper's θ̃⋆ at θ̃₀ and, for K > 0, the Prop. 7 target θ̃(1/K) with Thm 1's
    bound at K (theory.py); NaN otherwise."""
    nan = real(jnp.nan)
    names = THEOREM_METRICS
    if shape["data"] != "dm1":
        return dict.fromkeys(names, nan)
    counts, scale, K = problem["counts"], problem["scale"], jnp.maximum(real(dyn["K"]), 1.0)
    direction = theory.paper_direction(problem["alpha"], counts, shape["T"], shape["d"], shape["M"], real(dyn["S"]))
    target = theory.realizability(problem["theta0"], direction, problem["train"], counts, scale, 1.0 / K)
    distance = jnp.sqrt(2.0) * target["g0"]  # ‖θ̃(ε) − θ̃₀‖ = g₀ ‖θ̃⋆‖
    bound = theory.thm1_bound(target["loss"], distance**2, step_size(dyn), K)
    live = dyn["K"] > 0
    return {
        "ntk_margin": target["gamma"],
        "b_phi": target["b_phi"],
        "target_loss": jnp.where(live, target["loss"], nan),
        "target_ratio": jnp.where(live, target["loss"] * K, nan),  # L̂(θ̃(ε))/ε: ≤ 1 is Assumption 2 (i)
        "g0": jnp.where(live, target["g0"], nan),
        "thm1_bound": jnp.where(live, bound, nan),
        "thm1_ratio": jnp.where(live, loss_now / bound, nan),
        "dist_ratio": jnp.where(live, moved / distance, nan),
        "u_bar_error": phase_one_error(problem, shape, dyn) if shape["init"] == "first_step" else nan,
    }


def phase_one_error(problem, shape, dyn) -> jax.Array:
    """‖ū − ζu⋆/4‖ (Lemma 2 with erratum E1): θ̃⁽¹⁾'s rows are α_h H^{1/2−c} ū with ū = (1/(2n₁T)) Σ_i y_i Σ_t
    x_{i,t}, whose mean is ζu⋆/4 (u⋆ = μ₊ − μ₋, ζ = relevant/T); the error falls like n₁^{-1/2}."""
    counts, H = problem["counts"], real(dyn["H"])
    rows = jnp.einsum("g,gd->d", counts * problem["alpha"], problem["theta0"]["U"][:, 0]) / H
    u_bar = rows * H ** (dyn["c"] - 0.5)
    u_star, _ = theory.targets(1, shape["d"], shape["M"], real(dyn["S"]))
    return jnp.linalg.norm(u_bar - shape["relevant"] / shape["T"] * u_star[0] / 4)


def evaluate(params, problem, shape, dyn) -> dict:
    train, test, counts, scale = problem["train"], problem["test"], problem["counts"], problem["scale"]
    p = jax.tree.map(lambda a: a[0], params) if shape["loo"] else params
    w, active = train["weights"], train["weights"] > 0
    margins = train["y"] * output(p, train["X"], counts, scale)
    test_margins = test["y"] * output(p, test["X"], counts, scale)
    L = jnp.sum(w * jax.nn.softplus(-margins))
    test_loss = jnp.mean(jax.nn.softplus(-test_margins))
    size = norms(p, counts)
    moved = norms(jax.tree.map(jnp.subtract, p, problem["theta0"]), counts)["theta"]
    min_margin = jnp.min(jnp.where(active, margins, jnp.inf))
    group_grads = jax.grad(empirical_loss)(p, train["X"], train["y"], w, counts, scale)
    grads = jax.tree.map(lambda g: g / jnp.maximum(counts, 1.0)[:, None, None], group_grads)  # one head's (§1.9)
    grad_norm = norms(grads, counts)["theta"]
    r_hat = jnp.max(jnp.where(active[:, None], jnp.linalg.norm(train["X"], axis=2), 0.0))
    beta1, beta3 = bounds(r_hat, size["head_max"], shape["T"], shape["d"])
    H = jnp.sum(counts)
    lam = curvature(p, problem, shape)
    dm1 = shape["data"] == "dm1"
    nan = real(jnp.nan)
    descended = jax.tree.map(lambda a, g: a - step_size(dyn) * g, p, grads)
    n = real(dyn["n"])
    stability = loo_stability(params, counts, dyn["n"]) if shape["loo"] else nan
    return {
        "loss": L,
        "test_loss": test_loss,
        "gap": test_loss - L,
        "train_error": jnp.sum(w * (margins <= 0)),
        "test_error": jnp.mean((test_margins <= 0).astype(L.dtype)),
        "margin": min_margin / jnp.maximum(size["U"], 1e-30),
        "margin_global": math.sqrt(2) * min_margin / jnp.maximum(size["theta"], 1e-30),
        "attn": relevant_mass(heads(p, train["X"])[1], train["relevant"], w, counts) if dm1 else nan,
        "w_norm": jnp.sqrt(jnp.sum(p["W"] ** 2, axis=(1, 2))) @ counts / H,
        "u_norm": jnp.sqrt(jnp.sum(p["U"] ** 2, axis=(1, 2))) @ counts / jnp.sqrt(H),
        "theta_dist": moved,
        "cos_w": nan if dm1 else cosine_to_planted(p, counts, problem["planted"], "W"),
        "cos_u": nan if dm1 else cosine_to_planted(p, counts, problem["planted"], "U"),
        "grad_ratio": grad_norm / jnp.maximum(L, 1e-300),
        "beta1": beta1,
        "lambda_min": lam,
        "lam_sqrtH": lam * jnp.sqrt(H),
        "hess_bound": -beta3 * L / jnp.sqrt(H),
        "r_hat": r_hat,
        "accept": nan if dm1 else train["accept"],
        "loo_stability": stability,
        "n_loss": n * L,
        "n_test_loss": n * test_loss,
        "n_gap": n * (test_loss - L),
        "n_loo": n * stability,
        "gd_ascent": real(empirical_loss(descended, train["X"], train["y"], w, counts, scale) > L),
        "ntk_max_margin": problem["ntk"]["margin"],
        "ntk_max_margin_gap": problem["ntk"]["gap"],
        **theorem_checks(p, problem, shape, dyn, L, moved),
    }


METRICS = (
    "loss",
    "test_loss",
    "gap",
    "train_error",
    "test_error",
    "margin",
    "margin_global",
    "attn",
    "w_norm",
    "u_norm",
    "theta_dist",
    "cos_w",
    "cos_u",
    "grad_ratio",
    "beta1",
    "lambda_min",
    "lam_sqrtH",
    "hess_bound",
    "r_hat",
    "accept",
    "loo_stability",
    "n_loss",
    "n_test_loss",
    "n_gap",
    "n_loo",
    "gd_ascent",
    "ntk_max_margin",
    "ntk_max_margin_gap",
    *THEOREM_METRICS,
)


def num_params(config) -> float:
    """H(dT + d²): every head's U_h and W_h (§1.3)."""
    return config["H"] * (config["d"] * config["T"] + config["d"] ** 2)


def flops_per_step(config) -> float:
    """Forward and backward (≈ 3× the forward's 2(Td² + 2T²d + Td) per head and sample) of the heads
    actually computed (one or two on the reduced path), times the LOO replicas."""
    T, d, n = config["T"], config["d"], config["n"]
    heads_computed = groups(config)
    replicas_ = n + 1 if config["loo"] else 1
    return 6.0 * (T * d * d + 2 * T * T * d + T * d) * heads_computed * n * replicas_


EXPERIMENT = Experiment(
    name="mha_heads",
    doc="H-head attention classifier (Eq. 2) on DM1/DM2: rates, margins, curvature and stability vs H (Deora 24)",
    fields=FIELDS,
    init=init,
    loss=loss,
    evaluate=evaluate,
    metrics=METRICS,
    optimizer=optimizer,
    check=check,
    resolve=paper_steps,
    costs=Costs(params=num_params, flops_per_step=flops_per_step),
    same_problem_across=SAME_PROBLEM_ACROSS,
)
