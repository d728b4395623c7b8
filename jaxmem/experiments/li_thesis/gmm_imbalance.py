"""Chapter 4 of the thesis (spec §3): a one-hidden-layer sigmoid network (4.1) learning a teacher W*
from n samples of a two-group Gaussian mixture with group imbalance, by full-batch GD (4.6) on the
cross-entropy (4.3) from `replicas` initialisations of the same data.

One run holds one teacher and training set and `replicas` students W_1..W_R (Algorithm 1 with the
local init of Sec 4.5.1: W* + r·G/‖G‖_F, the sphere of radius r = 0.1, spec C3). The loss is the
sum of the replicas' losses, so each takes its own GD step. Step size (spec C2): η = lr·η_0 with
η_0 = 1/Σ_l λ_l(‖μ_l‖_∞ + ‖Σ_l‖^{1/2})² (`step_rule = "theory"`), η = lr (`"fixed"`), or η = lr/L̂_r
with L̂_r the largest eigenvalue of ∇²f_n at replica r's W_0 (`"curvature"`: the classical 1/L step,
the same O(·) rule with its constant measured instead of bounded); ξ = 0 (C10). Metrics: V_W (the
spread of the R converged students, E4.1's success V_W ≤ 1e-3), ‖W − W*‖_F (mean over replicas),
the gradient norm (the linear-rate trajectory of E4.3–E4.4), and the average and group-2 risks on a
Monte-Carlo test set per group drawn in `init`: the cross-entropy under the teacher's labels and the
excess risk (KL to the teacher, spec C6). Default dtypes: a sweep's `[train] precision = "float64"`
makes it float64 (spec C4).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import optax

from jaxmem.experiments import draws
from jaxmem.experiments.interface import Costs, Experiment, size, static, traced
from jaxmem.experiments.li_thesis import gmm, sigmoid_net, tensor_init

TEACHERS = ("normal", "uniform")  # W* entries N(0, 1) (Sec 4.5.1) or U[−0.1, 0.1] (C.1.1)
STEPS = ("theory", "fixed", "curvature")
INITS = ("local", "tensor")  # W* + r·G/‖G‖_F (Sec 4.5.1), or Subroutine 1 (C.1.1; every replica the same)
FIELDS = {
    "d": static(int, "input dimension (Sec 4.5.1: 5)", 5, minimum=1),
    "K": static(int, "hidden neurons (Sec 4.5.1: 3)", 3, minimum=1),
    "replicas": static(int, "students trained from independent inits on the same data (E4.1: 20)", 1, minimum=1),
    "n": size("training samples (a nested prefix of one training set)", maximum=draws.ROWS_LIMIT),
    "n_test": static(int, "Monte-Carlo points per group for the risks (spec C6: ≥ 1e5)", 100000, minimum=1),
    "lam2": traced(float, "λ_2: the fraction of group 2 (the minority when < ½)", 0.5, minimum=0.0),
    "mu1": traced(float, "μ_1 = mu1·1", 1.0),
    "mu2": traced(float, "μ_2 = mu2·1", 0.0),
    "sigma1": traced(float, "Σ_1 = sigma1²·ΛᵀDΛ", 1.0, minimum=0.0),
    "sigma2": traced(float, "Σ_2 = sigma2²·ΛᵀDΛ", 1.0, minimum=0.0),
    "cov": traced(str, "ΛᵀDΛ: the identity, or Fig 4.4's rotated D = diag(1, 1.1, ...)", "identity", gmm.COVARIANCES),
    "teacher": traced(str, "W* entries", "normal", TEACHERS),
    "init_radius": traced(float, "‖W_0 − W*‖_F of the local init (spec C3: 0.1)", 0.1, minimum=0.0),
    "init_mode": static(str, "local init near W*, or the tensor initialisation (Subroutine 1)", "local", INITS),
    "step_rule": traced(str, "η = lr·η_0 (spec C2), η = lr, or η = lr/L̂ (L̂ = λ_max ∇²f_n(W_0))", "theory", STEPS),
}
DERIVED = {"eta0": traced(float, "η_0 = 1/Σ_l λ_l(‖μ_l‖_∞ + ‖Σ_l‖^{1/2})² (spec C2), or 1 (fixed, curvature)")}


def resolve(config) -> dict:
    top = 1.0 + 0.1 * (config["d"] - 1) if config["cov"] == "rotated" else 1.0
    lam = (1.0 - config["lam2"], config["lam2"])
    spread = [(abs(config[f"mu{g}"]) + config[f"sigma{g}"] * top**0.5) ** 2 for g in (1, 2)]
    eta0 = 1.0 / (lam[0] * spread[0] + lam[1] * spread[1]) if config["step_rule"] == "theory" else 1.0
    return {**config, "eta0": eta0}


def check(config) -> list[str]:
    return [] if config["lam2"] <= 1.0 else [f"lam2 = {config['lam2']} > 1"]


def teacher(key, d: int, k: int, kind) -> jnp.ndarray:
    """W* (d, K): N(0, 1) or U[−0.1, 0.1] entries."""
    (g,) = draws.normal_matrices(key, [(d, k)])
    (u,) = draws.uniform_matrices(key, [(d, k)])
    return jnp.where(kind == 0, g, 0.2 * u - 0.1)


def local_init(key, w_star, replicas: int, radius) -> jnp.ndarray:
    """W* + r·G/‖G‖_F per replica (replicas, d, K)."""
    (g,) = draws.normal_matrices(key, [(replicas, *w_star.shape)])
    return w_star + radius * g / jnp.linalg.norm(g, axis=(1, 2), keepdims=True)


def top_curvature(w, train, n) -> jnp.ndarray:
    """L̂ = λ_max ∇²f_n(W): the largest eigenvalue of the full (dK × dK) Hessian."""
    flat = jax.hessian(lambda v: empirical_risk(v.reshape(w.shape), train, n))(w.ravel())
    return jnp.linalg.eigvalsh(flat)[-1]


def step_scales(w, train, n, rule) -> jnp.ndarray:
    """Per replica the factor on its gradient: 1/L̂_r for the curvature rule, else 1 (η_0 is in the
    optimizer's step)."""
    curvature = jax.vmap(top_curvature, (0, None, None))(w, train, n)
    return jnp.where(rule == STEPS.index("curvature"), 1.0 / curvature, jnp.ones_like(curvature))


def tensor_estimate(key, train, n, k: int, lam_rot, cfg) -> jnp.ndarray:
    """W_0 of Subroutine 1 from the first n samples, with the mixture's own parameters (footnote 14:
    they could be estimated by EM); symmetric (C.4) when μ_1 = −μ_2, Σ_1 = Σ_2 and λ = ½."""
    d = lam_rot.shape[0]
    means = jnp.stack([cfg["mu1"] * jnp.ones(d), cfg["mu2"] * jnp.ones(d)])
    base = lam_rot.T @ jnp.diag(1.0 / gmm.spectrum(d, cfg["cov"])) @ lam_rot  # (ΛᵀDΛ)^{-1}
    precisions = jnp.stack([base / cfg["sigma1"] ** 2, base / cfg["sigma2"] ** 2])
    weights = jnp.stack([1.0 - cfg["lam2"], cfg["lam2"]])
    symmetric = (cfg["mu1"] == -cfg["mu2"]) & (cfg["sigma1"] == cfg["sigma2"]) & (cfg["lam2"] == 0.5)
    return tensor_init.estimate(key, train["x"], train["y"], n, k, means, precisions, weights, symmetric)


def init(key, shape, dyn):
    """Teacher, rotation Λ, training set, Monte-Carlo test points per group, the students and their
    step factors."""
    d, k = shape["d"], shape["K"]
    w_star = teacher(jax.random.fold_in(key, 0), d, k, dyn["teacher"])
    (g_rot,) = draws.normal_matrices(jax.random.fold_in(key, 1), [(d, d)])
    lam_rot = gmm.rotation(g_rot, dyn["cov"])
    train = gmm.training_set(jax.random.fold_in(key, 2), shape["n"], d, w_star, lam_rot, dyn)
    test = gmm.group_samples(jax.random.fold_in(key, 3), shape["n_test"], d, lam_rot, dyn)
    w = local_init(jax.random.fold_in(key, 4), w_star, shape["replicas"], dyn["init_radius"])
    if shape["init_mode"] == "tensor":
        w = jnp.broadcast_to(tensor_estimate(jax.random.fold_in(key, 5), train, dyn["n"], k, lam_rot, dyn), w.shape)
    scales = step_scales(w, train, dyn["n"], dyn["step_rule"])
    return {"w": w}, {"train": train, "test": test, "w_star": w_star, "step_scale": scales}


def empirical_risk(w, train, n):
    """f_n(W) of (4.2) over the first n samples."""
    ce = sigmoid_net.cross_entropy(w, train["x"], train["y"])
    return jnp.sum(jnp.where(draws.active_mask(ce.shape[0], n), ce, 0.0)) / n


def loss(params, problem, shape, dyn, key=None):
    """Σ over replicas of s_r·f_n(W_r): each replica gets its own full-batch gradient, scaled by its
    step factor s_r (1/L̂_r for the curvature rule, else 1)."""
    risks = jax.vmap(empirical_risk, (0, None, None))(params["w"], problem["train"], dyn["n"])
    return jnp.sum(problem["step_scale"] * risks)


def evaluate(params, problem, shape, dyn) -> dict:
    w, w_star = params["w"], problem["w_star"]
    risk, grads = jax.vmap(jax.value_and_grad(empirical_risk), (0, None, None))(w, problem["train"], dyn["n"])
    spread = jnp.sqrt(jnp.sum((w - jnp.mean(w, axis=0)) ** 2) / w.shape[0])
    errors = jnp.linalg.norm(w - w_star, axis=(1, 2))
    per_group = jax.vmap(jax.vmap(sigmoid_net.risks, (None, None, 0)), (0, None, None))  # replicas × groups
    ce, kl = (jnp.mean(r, axis=0) for r in per_group(w, w_star, problem["test"]))  # (2,) each
    lam = jnp.stack([1.0 - dyn["lam2"], dyn["lam2"]])
    return {
        "loss": jnp.mean(risk),
        "v_w": spread,
        "error_w": jnp.mean(errors),
        "rel_error_w": jnp.mean(errors) / jnp.linalg.norm(w_star),
        "grad_norm": jnp.max(jnp.linalg.norm(grads, axis=(1, 2))),
        "excess_avg": lam @ kl,
        "excess_g2": kl[1],
        "ce_avg": lam @ ce,
        "ce_g2": ce[1],
    }


def optimizer(dyn):
    """Full-batch GD (4.6) with η = lr·η_0 (times the per-replica factor of `loss`)."""
    return optax.sgd(dyn["lr"] * dyn["eta0"])


EXPERIMENT = Experiment(
    name="gmm_imbalance",
    doc="One-hidden-layer sigmoid net on a two-group Gaussian mixture, GD from local inits (H. Li thesis ch. 4)",
    fields=FIELDS,
    init=init,
    loss=loss,
    evaluate=evaluate,
    metrics=("loss", "v_w", "error_w", "rel_error_w", "grad_norm", "excess_avg", "excess_g2", "ce_avg", "ce_g2"),
    optimizer=optimizer,
    resolve=resolve,
    derived=DERIVED,
    check=check,
    costs=Costs(
        params=lambda c: c["d"] * c["K"],
        flops_per_step=lambda c: 10.0 * c["n"] * c["d"] * c["K"] * c["replicas"],
    ),
    same_problem_across=(
        "n",
        "lam2",
        "mu1",
        "mu2",
        "sigma1",
        "sigma2",
        "init_radius",
        "init_mode",
        "step_rule",
        "replicas",
    ),
)
