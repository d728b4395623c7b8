"""The host-side controls of E3 (spec §4 "Implications", §5 E3), on a parity teacher's training set.

- Gaussian elimination over GF(2) (Remark 11.13, non-SQ): on the draws with a_1 ≠ a_2 the label
  χ_T(z) = −a_1·F_{1,1} is linear over GF(2) in the 2(d−1) z-bits; elimination recovers T.
- Multilinear polynomial regression of degree p = 2s+1 on the 2d bits (SQ-like): min-norm least squares
  on every monomial of degree ≤ p, its relative test error (the features number ~(2d)^p).
"""

from __future__ import annotations

import itertools
import math

import numpy as np


def gf2_solve(rows: np.ndarray, rhs: np.ndarray) -> np.ndarray | None:
    """The unique solution u of rows·u = rhs over GF(2) (rows, rhs 0/1), or None if it is not unique
    (fewer independent draws than unknowns) or inconsistent."""
    a = np.concatenate([rows, rhs[:, None]], axis=1).astype(np.uint8) % 2
    unknowns, pivot_row = rows.shape[1], 0
    for col in range(unknowns):
        hits = np.nonzero(a[pivot_row:, col])[0]
        if hits.size == 0:
            return None
        a[[pivot_row, pivot_row + hits[0]]] = a[[pivot_row + hits[0], pivot_row]]
        others = np.nonzero(a[:, col])[0]
        a[others[others != pivot_row]] ^= a[pivot_row]
        pivot_row += 1
    if np.any(a[pivot_row:, -1]):
        return None
    return a[:unknowns, -1]


def parity_support(x: np.ndarray, y: np.ndarray) -> np.ndarray | None:
    """T ⊆ the 2(d−1) z-bits (0/1 indicator) from draws x (B, 2, d) and teacher outputs y, or None."""
    keep = x[:, 0, 0] != x[:, 1, 0]
    z = np.concatenate([x[keep, 0, 1:], x[keep, 1, 1:]], axis=1)
    chi = -x[keep, 0, 0] * y[keep, 0, 0]  # ±1 = (−1)^{Σ_{j∈T} bit_j}, bit = 1 where z = −1
    return gf2_solve((z < 0).astype(np.uint8), (chi < 0).astype(np.uint8))


def monomial_count(bits: int, degree: int) -> int:
    return sum(math.comb(bits, j) for j in range(degree + 1))


def monomials(x: np.ndarray, degree: int) -> np.ndarray:
    """Every multilinear monomial of degree ≤ `degree` in the flattened ±1 bits of x (B, ...)."""
    flat = x.reshape(x.shape[0], -1)
    columns = [np.ones(flat.shape[0])]
    for j in range(1, degree + 1):
        columns += [np.prod(flat[:, c], axis=1) for c in itertools.combinations(range(flat.shape[1]), j)]
    return np.stack(columns, axis=1)


def polynomial_error(x, y, x_test, y_test, degree: int) -> float:
    """Relative test error of min-norm least squares on the degree-≤p monomials, every output entry."""
    coef, *_ = np.linalg.lstsq(monomials(x, degree), y.reshape(len(y), -1), rcond=None)
    pred = monomials(x_test, degree) @ coef
    target = y_test.reshape(len(y_test), -1)
    return float(np.sum((pred - target) ** 2) / np.sum(target**2))
