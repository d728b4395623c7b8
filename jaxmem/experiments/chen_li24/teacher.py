"""Random non-degenerate teachers (spec §1.4, following §4 and App. C) and their assumption proxies.

Head i: Θ_i = s_Θ c_i U_i V_iᵀ/√r with Haar d×r frames (‖Θ_i‖_F = s_Θ c_i, effective rank r: A1, A3),
c_1 = 1 and c_i = √Uniform[λ, 1] (A1); W_i = w_i Q_i/√d with Q_i Haar-orthogonal (A8–A10; or a
normalised Gaussian, or rank ⌊d/m_T⌋). The ablation knobs of §5 E6 violate one assumption each:
`theta_coherence` ρ mixes every Θ_i with a shared Θ_0 (A2), `trace_shift` t adds t‖Θ_i‖_F/√d · I (A5),
`smooth` σ adds s_Θ σ/d · N(0, 1) entries (the A7 smoothing of App. C), `w_coherence` mixes the W_i
with a shared W_0 (A8). Every head is drawn from its own counters, so the teachers nest along m_T.
Heads are not sorted by norm: F is a sum over heads, and head 1 is the largest by construction.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxmem.experiments import draws
from jaxmem.experiments.interface import traced

W_KINDS = ("orthogonal", "gaussian", "lowrank")
FIELDS = {  # the sampler's traced knobs (with m_T, a size, they are `sample`'s cfg)
    "s_theta": traced(float, "‖Θ_1‖_F, the inverse temperature (A6)", 4.0, minimum=0.0),
    "r": traced(int, "effective rank r_Θ of every Θ_i (A3)", 4, minimum=1),
    "lam": traced(float, "λ: ‖Θ_i‖_F² ≥ λ‖Θ_1‖_F² (A1)", 1.0, minimum=0.0),
    "lam_w": traced(float, "λ': ‖W_i‖_F² ≥ λ' (A10)", 1.0, minimum=0.0),
    "smooth": traced(float, "App. C smoothing σ: Θ_i += s_Θ σ/d · N(0, 1) (A7)", 0.0, minimum=0.0),
    "trace_shift": traced(float, "A5 ablation: Θ_i += t‖Θ_i‖_F/√d · I", 0.0),
    "theta_coherence": traced(float, "A2 ablation: Θ_i mixed with a shared Θ_0 by ρ", 0.0, minimum=0.0),
    "w_kind": traced(str, "projection matrices (A8/A9)", "orthogonal", W_KINDS),
    "w_coherence": traced(float, "A8 ablation: W_i mixed with a shared W_0 by ρ", 0.0, minimum=0.0),
}


def low_rank(gu, gv, rank):
    """U_r V_rᵀ/√r from the first `rank` (traced) columns of two Haar frames: ‖·‖_F = 1, effective rank r."""
    keep = jnp.arange(gu.shape[-1]) < rank
    u = draws.haar(gu) * keep
    return jnp.einsum("mir,mjr->mij", u, draws.haar(gv)) / jnp.sqrt(rank)


def unit(m):
    """Each head scaled to unit Frobenius norm."""
    return m / jnp.maximum(jnp.linalg.norm(m, axis=(-2, -1), keepdims=True), 1e-30)


def mix(heads, shared, rho):
    """normalize((1 − ρ) M_i + ρ M_0) (spec §1.4, the coherence ablation)."""
    return unit((1.0 - rho) * heads + rho * shared)


def projection(ga, gb, kind, rank):
    """Unit-norm projection matrices of W_KINDS[kind] (traced): Q/√d with Q Haar-orthogonal (r_W = d),
    G/‖G‖_F (r_W ≈ d/4), or rank `rank` (the MHA-like "lowrank_p" of §1.4)."""
    d = ga.shape[-1]
    return jnp.select([kind == 0, kind == 1], [draws.haar(ga) / jnp.sqrt(d), unit(ga)], low_rank(ga, gb, rank))


def check(config) -> list[str]:
    return [f"r = {config['r']} > d = {config['d']}"] if config["r"] > config["d"] else []


def knobs(dyn) -> dict:
    """The run's traced values that `sample` reads."""
    return {name: dyn[name] for name in ("m_T", *FIELDS)}


def sample(key, m: int, d: int, cfg) -> tuple[jnp.ndarray, jnp.ndarray]:
    """The teacher (Θ, W), each (m, d, d), zero past the m_T active heads. `cfg` holds m_T and FIELDS."""
    g = draws.normal_matrices(key, [(m, d, d)] * 5 + [(1, d, d)] * 4)
    u_theta, u_w = draws.uniform_matrices(jax.random.fold_in(key, 1), [(1, m), (1, m)])
    first = jnp.arange(m) == 0
    c = jnp.where(first, 1.0, jnp.sqrt(cfg["lam"] + (1.0 - cfg["lam"]) * u_theta[0]))
    wn = jnp.where(first, 1.0, jnp.sqrt(cfg["lam_w"] + (1.0 - cfg["lam_w"]) * u_w[0]))
    shape = mix(low_rank(g[0], g[1], cfg["r"]), low_rank(g[5], g[6], cfg["r"]), cfg["theta_coherence"])
    theta = cfg["s_theta"] * c[:, None, None] * shape + cfg["s_theta"] * cfg["smooth"] / d * g[4]
    norms = jnp.linalg.norm(theta, axis=(-2, -1), keepdims=True)
    theta = theta + cfg["trace_shift"] * norms / jnp.sqrt(d) * jnp.eye(d)
    rank_w = jnp.maximum(d // cfg["m_T"], 1)
    w_heads = projection(g[2], g[3], cfg["w_kind"], rank_w)
    w = wn[:, None, None] * mix(w_heads, projection(g[7], g[8], cfg["w_kind"], rank_w), cfg["w_coherence"])
    active = (jnp.arange(m) < cfg["m_T"])[:, None, None]
    return jnp.where(active, theta, 0.0), jnp.where(active, w, 0.0)


def _pair_cosine(heads, active):
    """max_{i≠j} |cos(M_i, M_j)| over the active heads (0 for one head)."""
    flat = unit(heads).reshape(heads.shape[0], -1)
    cos = jnp.abs(flat @ flat.T)
    pairs = active[:, None] & active[None, :] & ~jnp.eye(heads.shape[0], dtype=bool)
    return jnp.max(jnp.where(pairs, cos, 0.0))


def _effective_rank(heads):
    """r(M) = ‖M‖_F²/‖M‖_op² per head (§3.1)."""
    sv = jnp.linalg.svd(heads, compute_uv=False)
    return jnp.sum(sv**2, axis=-1) / jnp.maximum(sv[..., 0] ** 2, 1e-30)


def diagnostics(theta, w, m_T) -> dict:
    """The measured assumption proxies of spec §1.4: κ̂, λ̂, r̂_Θ, ν̂, χ̂ (attention) and κ̂', r̂_W, λ̂'."""
    d = theta.shape[-1]
    active = jnp.arange(theta.shape[0]) < m_T
    t_norm = jnp.linalg.norm(theta, axis=(-2, -1))
    w_norm = jnp.linalg.norm(w, axis=(-2, -1))
    safe = jnp.maximum(t_norm, 1e-30)
    lines = jnp.maximum(jnp.max(jnp.linalg.norm(theta, axis=-1), -1), jnp.max(jnp.linalg.norm(theta, axis=-2), -1))
    trace = jnp.abs(jnp.trace(theta, axis1=-2, axis2=-1))

    def over_active(values, reduce, empty):
        return reduce(jnp.where(active, values, empty))

    return {
        "kappa": _pair_cosine(theta, active),
        "lam_hat": over_active(t_norm**2, jnp.min, jnp.inf) / jnp.maximum(t_norm[0] ** 2, 1e-30),
        "r_theta": over_active(_effective_rank(theta), jnp.min, jnp.inf),
        "nu": over_active(jnp.sqrt(d) * lines / safe, jnp.max, 0.0),
        "chi": over_active(trace / safe, jnp.max, 0.0),
        "kappa_w": _pair_cosine(w, active),
        "r_w": over_active(_effective_rank(w), jnp.min, jnp.inf),
        "lam_w_hat": over_active(w_norm**2, jnp.min, jnp.inf) / jnp.maximum(w_norm[0] ** 2, 1e-30),
    }
