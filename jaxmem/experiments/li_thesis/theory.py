"""The chapter-4 theory's closed forms (Appendix C, spec §3.4), in float64 numpy, for the overlay of
target R4.10: the ρ-function (C.6), Γ (C.7), D_m (C.8), the rate gap 1 − v of (C.85) (up to its Ω
constant), the sample-complexity bound (C.92) and the error and risk factors E_w, E, E_l of
(C.97)–(C.99), each up to its constant, so only trends across a sweep are compared.

A mixture Ψ is given as in `gmm`: λ_2, μ_l = mu_l·1, Σ_l = s_l²·ΛᵀDΛ; its norms depend on Λ only through
D, so they are computed from D. ‖Σ_l^{-1}‖^{-1/2} = s_l·√min D and ‖Σ_l^{1/2}‖ = s_l·√max D.
"""

from __future__ import annotations

import numpy as np

NODES = 80  # Gauss–Hermite (probabilists') nodes for the 1-D integrals of ρ


def sigmoid_slope(z):
    """φ'(z) = φ(z)(1 − φ(z))."""
    p = 1.0 / (1.0 + np.exp(-z))
    return p * (1.0 - p)


def rho(u, sigma: float) -> float:
    """ρ(u, σ) of (C.6) for u ∈ R^K: with z_i ~ N(u_i, 1), α_q = E[φ'(σz_i) z_i^q], β_q = E[φ'²(σz_i) z_i^q],
    min over i ≠ j of (u_j² + 1)(β_0 − α_0²) and β_2 − α_2²/(u_i² + 1) (for K = 1, the second only)."""
    u = np.atleast_1d(np.asarray(u, dtype=float))
    nodes, weights = np.polynomial.hermite_e.hermegauss(NODES)
    weights = weights / weights.sum()
    z = u[:, None] + nodes[None, :]  # (K, NODES)
    slope = sigmoid_slope(sigma * z)
    alpha0, alpha2 = (slope * weights).sum(1), (slope * z**2 * weights).sum(1)
    beta0, beta2 = (slope**2 * weights).sum(1), (slope**2 * z**2 * weights).sum(1)
    second = np.min(beta2 - alpha2**2 / (u**2 + 1))
    if u.size == 1:
        return float(second)
    first = min((u[j] ** 2 + 1) * (beta0[i] - alpha0[i] ** 2) for i in range(u.size) for j in range(u.size) if j != i)
    return float(min(first, second))


def mixture(w_star, lam2: float, mus, scales, spectrum) -> dict:
    """The quantities of Ψ and W* that the bounds use: per group λ_l, ‖μ_l‖, ‖Σ_l^{1/2}‖,
    ‖Σ_l^{-1}‖^{-1/2} and ρ_l; κ, η (Sec 4.3), τ, σ_max, δ_1(W*)."""
    w_star = np.asarray(w_star, dtype=float)
    d, k = w_star.shape
    singular = np.linalg.svd(w_star, compute_uv=False)
    top, low = np.sqrt(np.max(spectrum)), np.sqrt(np.min(spectrum))
    groups = []
    for lam, mu, s in zip((1.0 - lam2, lam2), mus, scales):
        mean = mu * np.ones(d)
        small = s * low  # ‖Σ_l^{-1}‖^{-1/2}
        u = w_star.T @ mean / (singular[-1] * small)
        groups.append({"lam": lam, "mu": np.linalg.norm(mean), "half": s * top, "small": small,
                       "rho": rho(u, singular[-1] * small)})  # fmt: skip
    sigma_max = max(g["half"] for g in groups)
    sigma_min = min(g["small"] for g in groups)
    return {
        "groups": groups,
        "K": k,
        "d": d,
        "kappa": singular[0] / singular[-1],
        "eta": float(np.prod(singular / singular[-1])),
        "tau": sigma_max / sigma_min,
        "sigma_max": sigma_max,
        "delta1": singular[0],
    }


def curvature_sum(psi) -> float:
    """Σ_l λ_l ‖Σ_l^{-1}‖^{-1} ρ_l: the Hessian's lower bound, up to constants."""
    return sum(g["lam"] * g["small"] ** 2 * g["rho"] for g in psi["groups"])


def spread(psi) -> float:
    """Σ_l λ_l (‖μ_l‖ + ‖Σ_l^{1/2}‖)²: the Hessian's upper bound, up to constants."""
    return sum(g["lam"] * (g["mu"] + g["half"]) ** 2 for g in psi["groups"])


def rate_gap(psi) -> float:
    """1 − v of (C.85) without its Ω constant."""
    scale = psi["eta"] * psi["tau"] ** psi["K"] * psi["kappa"] ** 2
    return curvature_sum(psi) / scale / (psi["K"] ** 2 * spread(psi))


def d_function(psi, m: int) -> float:
    """D_m(Ψ) = Σ_l λ_l (‖μ_l‖/‖Σ_l^{-1}‖^{-1/2} + 1)^m (C.8)."""
    return sum(g["lam"] * (g["mu"] / g["small"] + 1) ** m for g in psi["groups"])


def gamma(psi) -> float:
    """Γ(Ψ) of (C.7)."""
    scale = psi["tau"] ** psi["K"] * psi["kappa"] ** 2 * psi["eta"] * psi["sigma_max"] ** 2
    return curvature_sum(psi) / scale


def sample_bound(psi) -> float:
    """The n of (C.92) without C_0 ε_0^{-2}."""
    k, d = psi["K"], psi["d"]
    factor = psi["kappa"] ** 12 * k**14 * (psi["sigma_max"] * psi["delta1"]) ** 2 * psi["tau"] ** 12
    return factor * gamma(psi) ** -2 * d_function(psi, 12) * d * np.log(d) ** 2


def error_factors(psi) -> dict:
    """E_w (C.97), E (C.98) and E_2 (C.99, the second group) without their O constants."""
    lower, upper = curvature_sum(psi), spread(psi)
    second = psi["groups"][1]
    return {
        "E_w": np.sqrt(upper) / lower,
        "E": upper / lower,
        "E_2": np.sqrt(upper) * (second["mu"] + second["half"]) / lower,
    }
