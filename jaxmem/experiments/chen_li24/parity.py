"""The lower bound's hard instances (§11, Thm 1.3 / 11.2) with the corrected scaling of spec §4 "Hard
instance ready to implement" and §7.15, in float64 on the host.

k = 2 tokens x_r = (a_r, z_r), a_r ∈ {±1}, z_r ∈ {±1}^{d−1}. With S = the first s z-coordinates and
ℓ(X) = ½⟨𝟙_S, z_1 − z_2⟩, the teacher computes F(X)_{:,1} = 1[a_1 ≠ a_2]·h(ℓ)·(a_1, a_2)ᵀ with
h(ℓ) = −(−1)^ℓ (a degree-(2s+1) parity; every other entry 0). It is built from the gadget
φ(z) = z tanh(z/2) (Prop 11.3/11.4) and the interpolation of Lemma 11.5: λ solves
Σ_t λ_t φ(ρ(t − ℓ)) = ½h(ℓ) (ℓ = −s..s), Σ_t λ_t = 0, over t = −s..s+1. S is fixed rather than drawn: the
student's init and the data are exchangeable in the coordinates, so a random S is the same experiment.
"""

from __future__ import annotations

import numpy as np

VARIANTS = ("minimal", "paper")


def phi(z):
    """φ(z) = z·tanh(z/2) (Prop 11.3): φ(0) = 0, |φ(z) − |z|| ≤ e^{−|z|/3}."""
    return z * np.tanh(z / 2.0)


def h(ell):
    """h(ℓ) = −(−1)^ℓ: even, and −χ_T on the bits of S in both tokens."""
    return -((-1.0) ** np.asarray(ell))


def interpolation_matrix(s: int, rho: float) -> np.ndarray:
    """Eq. (146) in the §4 scaling: rows φ(ρ(t − ℓ)) for ℓ = −s..s over columns t = −s..s+1, and a row of ones."""
    t, ell = np.arange(-s, s + 2), np.arange(-s, s + 1)
    return np.vstack([phi(rho * (t[None, :] - ell[:, None])), np.ones((1, 2 * s + 2))])


def coefficients(s: int, rho: float) -> np.ndarray:
    """λ ∈ R^{2s+2} of Lemma 11.5 (Σ λ_t = 0)."""
    rhs = np.append(0.5 * h(np.arange(-s, s + 1)), 0.0)
    return np.linalg.solve(interpolation_matrix(s, rho), rhs)


def heads(d: int, s: int, rho: float, variant: str) -> tuple[np.ndarray, np.ndarray]:
    """(Θ, W), each (heads, d, d): the minimal 4s+4 heads (±e_1w_tᵀ, ±2λ_t w_t e_1ᵀ) or the paper's 8s+8
    (the same with w'_t = (−ρt/2, v) and λ_t in place of 2λ_t), w_t = (ρt/2, v), v = ρ/2 on S (spec §4)."""
    lam = coefficients(s, rho)
    thetas, ws = [], []
    for t, lam_t in zip(range(-s, s + 2), lam):
        for first in (rho * t / 2.0,) if variant == "minimal" else (rho * t / 2.0, -rho * t / 2.0):
            vec = np.zeros(d)
            vec[0], vec[1 : s + 1] = first, rho / 2.0
            weight = 2.0 * lam_t if variant == "minimal" else lam_t
            for sign in (1.0, -1.0):
                thetas.append(sign * np.outer(np.eye(d)[0], vec))
                ws.append(sign * weight * np.outer(vec, np.eye(d)[0]))
    return np.stack(thetas), np.stack(ws)


def head_count(s: int, variant: str) -> int:
    return (4 if variant == "minimal" else 8) * (s + 1)


def target(x: np.ndarray, s: int) -> np.ndarray:
    """The closed form of the teacher (spec §4 item 5) on x (B, 2, d)."""
    a1, a2 = x[:, 0, 0], x[:, 1, 0]
    ell = np.rint(0.5 * np.sum(x[:, 0, 1 : s + 1] - x[:, 1, 1 : s + 1], axis=1))
    out = np.zeros_like(x)
    out[:, :, 0] = ((a1 != a2) * h(ell))[:, None] * x[:, :, 0]
    return out
