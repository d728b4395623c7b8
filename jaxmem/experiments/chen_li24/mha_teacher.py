"""E2, E5, E6 of spec 003: a multi-head attention student learning a random MHA teacher (Eq. 1) from n
samples. How small can n be (n* for ε_rel ≤ 1e-2, spec §5 E2)?

The teacher is the §1.4 sampler (teacher.py) with its ablation knobs; inputs are Boolean or Gaussian
(inputs.py); the student has m_S distinct heads (student.py), trained full batch by Adam (optax's
defaults, the spec's pilot) or plain GD (E7's "gradient flow" runs), a traced choice, at step lr. The
`student` "random_features" freezes every Θ_i at its init and trains the W_i only (E8, cf. [FGBM23]).
Keys (spec §7.17): teacher, training set, test set, validation set and student init each have their own
stream of the run's key (the searches stop early on the validation error and judge the test error); n,
m_S, the init scales, the optimiser and the student kind leave the teacher and data unchanged
(`same_problem_across`), so the training sets of one seed nest along n and the students of m_S = m_T and
2m_T see the same teacher. float32 throughout (the engine's precision; the spec's pilots used
float64, which matters only for targets below ~1e-5).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import optax

from jaxmem.experiments import draws
from jaxmem.experiments.chen_li24 import inputs, model, student, teacher
from jaxmem.experiments.interface import Costs, Experiment, host, size, static, traced
from jaxmem.experiments.optimizers import select_by_index

OPTIMIZERS = ("adam", "gd")
STUDENTS = ("full", "random_features")

FIELDS = {
    "d": static(int, "token dimension", minimum=1),
    "k": static(int, "tokens per input (sequence length)", minimum=1),
    "m_T": size("teacher heads"),
    "m_S": size("student heads"),
    "n": size("training samples (a nested prefix of one training set)", maximum=draws.COLS_LIMIT),
    "n_test": static(int, "held-out samples for ε_rel: the test set (success)", default=4096, minimum=1),
    "n_val": static(int, "held-out samples of the validation set (early stopping)", default=4096, minimum=1),
    "inputs": traced(str, "token distribution (spec §1.2)", "boolean", inputs.KINDS),
    **teacher.FIELDS,
    "init_theta": traced(float, "student Θ init scale: entries N(0, (init_theta/d)²)", 0.5, minimum=0.0),
    "init_w": traced(float, "student W init scale: entries N(0, (init_w/d)²)", 1.0, minimum=0.0),
    "optimizer": traced(str, "adam (optax defaults) or plain gd, at step lr", "adam", OPTIMIZERS),
    "student": static(str, "full, or random_features: Θ_i frozen at init, W_i trained (E8)", "full", STUDENTS),
}
DERIVED = {"n_cnt": host(float, "2 m_T d / k: the n at which n·k·d data match 2 m_T d² parameters (§3)")}


def resolve(config) -> dict:
    return {**config, "n_cnt": 2.0 * config["m_T"] * config["d"] / config["k"]}


def init(key, shape, dyn):
    """Teacher, nested training set, test and validation sets and student, each from its own stream of `key`."""
    d, k = shape["d"], shape["k"]
    theta, w = teacher.sample(jax.random.fold_in(key, 0), shape["m_T"], d, teacher.knobs(dyn))
    x = inputs.tokens(jax.random.fold_in(key, 1), shape["n"], k, d, dyn["inputs"])
    x = jnp.where(draws.active_mask(shape["n"], dyn["n"])[:, None, None], x, 0.0)
    sizes = {"test": shape["n_test"], "val": shape["n_val"]}
    held_out = inputs.held_out(key, sizes, k, d, dyn["inputs"], lambda x: model.mha(theta, w, x))
    problem = {"x": x, "y": model.mha(theta, w, x), **held_out}
    problem["theta"], problem["sum_w"] = theta, jnp.sum(w, axis=0)
    problem["diagnostics"] = teacher.diagnostics(theta, w, dyn["m_T"])
    params = student.init(jax.random.fold_in(key, 3), shape["m_S"], d, dyn["m_S"], dyn["init_theta"], dyn["init_w"])
    return params, problem


def trained(params, shape):
    """The parameters the loss differentiates: a random-features student's Θ gets no gradient (E8)."""
    if shape["student"] == "random_features":
        return {**params, "theta": jax.lax.stop_gradient(params["theta"])}
    return params


def loss(params, problem, shape, dyn, key=None):
    return student.loss(trained(params, shape), problem, dyn["n"], dyn["m_S"])


def optimizer(dyn) -> optax.GradientTransformation:
    """Adam with optax's defaults (β 0.9/0.999, the spec's pilot; equal to optax.adam) or plain GD,
    by dyn["optimizer"], at step lr (spec §5 "Optimizer")."""
    directions = (optax.scale_by_adam(), optax.identity())
    return optax.chain(select_by_index(dyn["optimizer"], directions), optax.scale(-dyn["lr"]))


def evaluate(params, problem, shape, dyn) -> dict:
    """Errors (student.errors), the ΣW error of the student's heads, head specialisation
    (student.specialisation) and the teacher's proxies."""
    w = jnp.where(student.heads(shape["m_S"], dyn["m_S"]), params["w"], 0.0)
    gap = jnp.linalg.norm(jnp.sum(w, axis=0) - problem["sum_w"]) / jnp.linalg.norm(problem["sum_w"])
    heads = student.specialisation(params["theta"], problem["theta"], dyn["m_S"], dyn["m_T"])
    errors = student.errors(params, problem, dyn["n"], dyn["m_S"])
    return {**errors, "sum_w_error": gap, **heads, **problem["diagnostics"]}


def flops_per_step(config) -> float:
    """Forward plus backward ≈ 12 m k d (d + k) FLOPs per sample (spec §5 "Cost model")."""
    return 12.0 * config["m_S"] * config["k"] * config["d"] * (config["d"] + config["k"]) * config["n"]


METRICS = ("loss", "val_error", "test_error", "test_error_abs", "train_error", "sum_w_error")
METRICS += ("head_error_min", "head_error_mean", "head_error_max")
METRICS += ("kappa", "lam_hat", "r_theta", "nu", "chi", "kappa_w", "r_w", "lam_w_hat")

EXPERIMENT = Experiment(
    name="mha_teacher",
    doc="Multi-head attention student learning a random MHA teacher from n samples (Chen & Li 24, E2/E5/E6)",
    fields=FIELDS,
    init=init,
    loss=loss,
    evaluate=evaluate,
    metrics=METRICS,
    resolve=resolve,
    derived=DERIVED,
    optimizer=optimizer,
    check=teacher.check,
    costs=Costs(params=lambda c: 2.0 * c["m_S"] * c["d"] ** 2, flops_per_step=flops_per_step),
    same_problem_across=("n", "m_S", "init_theta", "init_w", "optimizer", "student"),
)
