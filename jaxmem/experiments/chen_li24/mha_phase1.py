"""E1 of spec 003: the Phase I estimator's bias against d, k, s_Θ and N (no training).

Per run: a §1.4 teacher, N fresh samples in chunks, Ŵ = (1/(kN)) Σ XᵀJY (phase1.py) against ΣW_i.
Metrics: the relative error, its bias and Monte-Carlo parts, c_bias = bias/√(k/d) (pilot law R8:
≈ 0.46 at s_Θ = 4) and c_v = N·noise²/d (pilot ≈ 1.5: noise ≈ √(c_v d/N)), and the teacher's proxies.
float32 (the engine's precision); the chunk sums keep the rounding far below the MC noise.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxmem.experiments.chen_li24 import inputs, phase1, teacher
from jaxmem.experiments.interface import Costs, Experiment, size, static, traced

FIELDS = {
    "d": static(int, "token dimension", minimum=1),
    "k": static(int, "tokens per input", minimum=1),
    "m_T": size("teacher heads"),
    "N": traced(int, "samples (a multiple of chunk, at least two chunks)", minimum=2),
    "chunk": static(int, "samples per chunk of the streamed sum", default=4096, minimum=1),
    "inputs": traced(str, "token distribution (spec §1.2)", "boolean", inputs.KINDS),
    **teacher.FIELDS,
}


def check(config) -> list[str]:
    problems = teacher.check(config)
    if config["N"] % config["chunk"] or config["N"] < 2 * config["chunk"]:
        problems.append(f"N = {config['N']} is not a multiple (≥ 2) of chunk = {config['chunk']}")
    return problems


def init(key, shape, dyn):
    """The teacher and its Phase I estimate, all computed here: nothing is trained."""
    d, k = shape["d"], shape["k"]
    theta, w = teacher.sample(jax.random.fold_in(key, 0), shape["m_T"], d, teacher.knobs(dyn))
    chunks = dyn["N"] // shape["chunk"]
    mean, variance = phase1.streamed(jax.random.fold_in(key, 1), theta, w, chunks, shape["chunk"], k, dyn["inputs"])
    error, bias, noise = phase1.bias(mean, variance, jnp.sum(w, axis=0))
    metrics = {"phase1_error": error, "phase1_bias": bias, "phase1_noise": noise}
    metrics["c_bias"] = bias / jnp.sqrt(k / d)
    metrics["c_v"] = dyn["N"] * noise**2 / d
    return {}, {**metrics, **teacher.diagnostics(theta, w, dyn["m_T"])}


def evaluate(params, problem, shape, dyn) -> dict:
    return dict(problem)


METRICS = ("phase1_error", "phase1_bias", "phase1_noise", "c_bias", "c_v")
METRICS += ("kappa", "lam_hat", "r_theta", "nu", "chi", "kappa_w", "r_w", "lam_w_hat")

EXPERIMENT = Experiment(
    name="mha_phase1",
    doc="Phase I moment estimate of ΣW_i (Eq. 2): bias vs d, k, s_Θ, N (Chen & Li 24, E1)",
    fields=FIELDS,
    init=init,
    evaluate=evaluate,
    metrics=METRICS,
    check=check,
    costs=Costs(
        params=lambda c: 2.0 * c["m_T"] * c["d"] ** 2,
        flops_per_step=lambda c: 4.0 * c["m_T"] * c["k"] * c["d"] * (c["d"] + c["k"]) * c["N"],
    ),
    same_problem_across=("N",),
)
