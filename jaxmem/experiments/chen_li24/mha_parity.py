"""E3 of spec 003: a multi-head attention student trained on the parity hard instances of the lower
bound (§11; spec §4 with the corrected scaling of §7.15): k = 2 Boolean tokens, a degree-(2s+1) parity
written as 4s+4 (minimal) or 8s+8 (paper) heads (parity.py). SQ learners need d^{Ω(s)} samples (Thm 11.2):
the spec's pilot (R13) learns s = 1 at d = 16, n = 2048 and not s = 2.

Normalised test error 1 is the trivial predictor (E‖F‖² = 1). The teacher is fixed by (d, s, ρ, variant);
a seed draws the training set, the test and validation sets and the student. The host reference runs the E3 controls on
the run's own training set (controls.py): Gaussian elimination over GF(2) (non-SQ) and multilinear
polynomial regression of degree 2s+1 where its features fit.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from jaxmem.experiments import draws
from jaxmem.experiments.chen_li24 import controls, inputs, model, parity, student
from jaxmem.experiments.interface import Costs, Experiment, HostRun, Reference, host, size, static, traced

K = 2  # tokens: the lower bound holds already at k = 2
MAX_FEATURES = 8000  # the polynomial control is skipped (NaN) past this many monomials

FIELDS = {
    "d": static(int, "token dimension (coordinate 0 is the a-bit)", minimum=2),
    "s": static(int, "parity half-size |S|: the teacher is a degree-(2s+1) parity", minimum=1),
    "rho": static(float, "interpolation scale ρ (spec §4: 2–8 all fine)", 4.0, minimum=0.0),
    "variant": static(str, "minimal (4s+4 heads) or paper (8s+8 heads)", "minimal", parity.VARIANTS),
    "heads_ratio": host(int, "student heads per teacher head", 1, minimum=1),
    "n": size("training samples", maximum=draws.COLS_LIMIT),
    "n_test": static(int, "held-out samples of the test set (success)", default=4096, minimum=1),
    "n_val": static(int, "held-out samples of the validation set (early stopping)", default=4096, minimum=1),
    "init_theta": traced(float, "student Θ init scale: entries N(0, (init_theta/d)²)", 0.5, minimum=0.0),
}
DERIVED = {
    "m_T": host(int, "teacher heads: 4s+4 (minimal) or 8s+8 (paper)"),
    "m_S": size("student heads: heads_ratio · m_T"),
}


def resolve(config) -> dict:
    m_T = parity.head_count(config["s"], config["variant"])
    return {**config, "m_T": m_T, "m_S": config["heads_ratio"] * m_T}


def check(config) -> list[str]:
    return [f"s = {config['s']} needs d ≥ s + 1, got d = {config['d']}"] if config["s"] >= config["d"] else []


def init(key, shape, dyn):
    """The fixed parity teacher, a training set of n, test and validation sets of Boolean tokens, the student."""
    d = shape["d"]
    theta, w = (jnp.asarray(a, jnp.float32) for a in parity.heads(d, shape["s"], shape["rho"], shape["variant"]))
    x = inputs.tokens(jax.random.fold_in(key, 1), shape["n"], K, d, "boolean")
    x = jnp.where(draws.active_mask(shape["n"], dyn["n"])[:, None, None], x, 0.0)
    sizes = {"test": shape["n_test"], "val": shape["n_val"]}
    held_out = inputs.held_out(key, sizes, K, d, "boolean", lambda x: model.mha(theta, w, x))
    problem = {"x": x, "y": model.mha(theta, w, x), **held_out}
    params = student.init(jax.random.fold_in(key, 3), shape["m_S"], d, dyn["m_S"], dyn["init_theta"])
    return params, problem


def loss(params, problem, shape, dyn, key=None):
    return student.loss(params, problem, dyn["n"], dyn["m_S"])


def evaluate(params, problem, shape, dyn) -> dict:
    return student.errors(params, problem, dyn["n"], dyn["m_S"])


def host_check(run: HostRun) -> dict:
    """The E3 controls on this run's training set (float64, from the exact teacher)."""
    cfg = run.config
    _, problem = init(run.key, run.shape, {k: jnp.asarray(v) for k, v in run.dyn.items()})
    x = np.asarray(problem["x"], np.float64)[: cfg["n"]]
    x_test = np.asarray(problem["x_test"], np.float64)
    found = controls.parity_support(x, parity.target(x, cfg["s"]))
    truth = np.zeros(2 * (cfg["d"] - 1), np.uint8)
    truth[: cfg["s"]] = truth[cfg["d"] - 1 : cfg["d"] - 1 + cfg["s"]] = 1
    degree = 2 * cfg["s"] + 1
    features = controls.monomial_count(K * cfg["d"], degree)
    poly = float("nan")
    if features <= MAX_FEATURES:
        poly = controls.polynomial_error(x, parity.target(x, cfg["s"]), x_test, parity.target(x_test, cfg["s"]), degree)
    return {
        "gauss_elim_recovers": float(found is not None and np.array_equal(found, truth)),
        "gauss_elim_draws": int(np.sum(x[:, 0, 0] != x[:, 1, 0])),
        "poly_features": features,
        "poly_test_error": poly,
    }


EXPERIMENT = Experiment(
    name="mha_parity",
    doc="MHA student on the parity hard instances of the lower bound (Chen & Li 24 §11, E3)",
    fields=FIELDS,
    init=init,
    loss=loss,
    evaluate=evaluate,
    metrics=("loss", "val_error", "test_error", "test_error_abs", "train_error"),
    resolve=resolve,
    derived=DERIVED,
    check=check,
    costs=Costs(
        params=lambda c: 2.0 * c["m_S"] * c["d"] ** 2,
        flops_per_step=lambda c: 12.0 * c["m_S"] * K * c["d"] * (c["d"] + K) * c["n"],
    ),
    reference=Reference(check=host_check),
)
