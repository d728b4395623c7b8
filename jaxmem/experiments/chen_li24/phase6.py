"""Phase VI, ESTIMATEVALUEMATRICES (§9, Algorithm 5, Lemma 9.1) in float64 on the host: given the Θ_i,
F(X) = Z(X) W_stack is linear in W_stack = [W_1; …; W_m] (md × d), with the design
Z = [S_1 X | … | S_m X] of Eq. (140); all output columns share Z and are solved jointly (spec §7.11)."""

from __future__ import annotations

import numpy as np


def design(theta: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Z(X) = [softmax(XΘ_1Xᵀ)X | … | softmax(XΘ_mXᵀ)X] for x (B, k, d) -> (B, k, m·d)."""
    logits = np.einsum("bkd,mde,ble->bmkl", x, theta, x)
    logits -= logits.max(axis=-1, keepdims=True)
    weights = np.exp(logits)
    attended = np.einsum("bmkl,bld->bkmd", weights / weights.sum(axis=-1, keepdims=True), x)
    return attended.reshape(x.shape[0], x.shape[1], -1)


def forward(theta: np.ndarray, w: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Eq. (1) in float64: Z(X) W_stack."""
    return design(theta, x) @ w.reshape(-1, w.shape[-1])


def recover(theta: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """The least-squares W_i (m, d, d) from samples (x, y) (plain least squares, spec §7.11)."""
    z = design(theta, x)
    stacked, *_ = np.linalg.lstsq(z.reshape(-1, z.shape[-1]), y.reshape(-1, y.shape[-1]), rcond=None)
    return stacked.reshape(theta.shape[0], theta.shape[-1], -1)
