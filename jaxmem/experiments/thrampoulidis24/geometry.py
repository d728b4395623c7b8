"""The reference geometry of an NTP instance inside the engine (Thrampoulidis 2024; spec 004 §5.1).

JAX, float32, padded and vmappable: computed once per run at initialisation, so every trajectory can
be measured against it. The float64 host-side solvers of `reference.py` (clarabel QP, HiGHS LP)
are the authority these are checked against, in the tests and in the sweep's report.

Every constraint of the paper is indexed by a cell (j, v) of the m × V grid, with the anchor
z_j = the smallest index of S_j (spec A4) and the vector X_{j,v} = vec((e_{z_j} − e_v) h̄_jᵀ) ∈ R^{Vd}:
- F-cells, v ∈ S_j \\ {z_j}: the log-odds equations (4), ⟨X_{j,v}, W⟩ = log(p̂_{j,z_j}/p̂_{j,v}),
  and the subspace F = span{X_F} (Eq. 5);
- B-cells, v ∉ S_j (real tokens only): the margin constraints (6b), ⟨X_{j,v}, W⟩ ≥ 1.
An orthonormal basis of F comes from the SVD of the F rows (spec §5.3): orthogonal factorisations
keep float32 round-off at ε·σ_max, where the Gram-matrix route (K_FF⁺, spec §5.1) squares the
condition number and loses the instances near the compatibility threshold. Then
- W* = the minimum-norm solution of (4) (pseudo-inverse by the same SVD); compatible (Def. 1) iff it
  solves (4);
- P_F(W) = Q_Fᵀ Q_F W and the rows M_k = P_⊥ X_k of the B-cells;
- W^mm (Def. 3) = Σ_k λ_k M_k with λ the NTP-SVM dual min_{λ≥0} ½λᵀ(M Mᵀ)λ − 1ᵀλ (spec §5.4.2),
  solved by FISTA with adaptive restart; M Mᵀ is positive semi-definite by construction.
- separable (Def. 2) iff some W ∈ F^⊥ has every margin positive (Gordan); the dual iterate's
  P_⊥W = Σ λ_k M_k is such a W once every margin ⟨M_k, W⟩ = (M Mᵀ λ)_k is at least CERTIFY (a
  certificate, scaled up) and its normalised margin is above float32 round-off (MIN_MARGIN). A
  non-separable instance has an unbounded dual and never certifies; a
  separable one certifies once the dual has converged to within CERTIFY of its margins, which takes
  more iterations the smaller its margin 1/‖W^mm‖ (threshold sweeps run 10⁴).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

TOL = 1e-3  # float32 acceptance of the log-odds residual (relative to the targets)
RCOND = 1e-4  # SVD cutoff relative to σ_max: round-off is ~3e-6 σ_max (m = 50, d = 60), while the
# smallest true singular value is ~2e-3 σ_max one d above the compatibility threshold
CERTIFY = 0.5  # the dual iterate certifies separability once every margin is ≥ this (1 at the optimum);
# margins are read in the projected space (⟨M_k, W⟩), where float32 round-off stays ≲ 0.1 even for
# ‖W^mm‖ ~ 800 (m = 50 one d above the threshold), while a leak of F into W would cost O(1)
MIN_MARGIN = 3e-5  # smallest normalised margin 1/(‖W^mm‖ max_k ‖X_k‖) float32 resolves: below it a dual
# can fit the round-off left in P_⊥ (ε ~ 1e-7 of X); the hardest separable case above has 1.4e-4


def grid(problem) -> dict:
    """Anchor one-hots, the F and B cells, and the log-odds targets b on F, all (m, V)."""
    mask, P = problem["mask"], problem["P"]
    V = mask.shape[1]
    has_support = jnp.any(mask, axis=1, keepdims=True)
    onehot = jax.nn.one_hot(jnp.argmax(mask, axis=1), V) * has_support
    F = mask & (onehot == 0)
    B = problem["tokens"][None, :] & ~mask & has_support
    p_anchor = jnp.sum(P * onehot, axis=1, keepdims=True)
    b = jnp.where(F, jnp.log(jnp.where(F, p_anchor, 1.0) / jnp.where(F, P, 1.0)), 0.0)
    return {"onehot": onehot, "F": F, "B": B, "b": b}


def apply_X(W, H, onehot) -> jax.Array:
    """⟨X_{j,v}, W⟩ = ℓ_{j,z_j} − ℓ_{j,v} on every cell (the caller masks)."""
    L = H @ W.T
    return jnp.sum(L * onehot, axis=1, keepdims=True) - L


def rows(H, onehot, cells) -> jax.Array:
    """The vectors X_{j,v} of `cells` as rows (mV × Vd); zero rows elsewhere."""
    m, V = onehot.shape
    X = (onehot[:, None, :] - jnp.eye(V)[None, :, :])[..., None] * H[:, None, None, :]
    return jnp.where(cells.reshape(-1)[:, None], X.reshape(m * V, -1), 0.0)


def project_F(W, basis) -> jax.Array:
    """P_F(W) with `basis` the orthonormal rows spanning F (zero rows allowed)."""
    return (basis.T @ (basis @ W.reshape(-1))).reshape(W.shape)


def svm_dual(K, cells, iters: int) -> jax.Array:
    """FISTA with gradient-based adaptive restart on min_{λ≥0, λ=0 off `cells`} ½λᵀKλ − 1ᵀλ."""
    scale = 1.0 / jnp.maximum(jnp.linalg.eigvalsh(K)[-1], 1e-30)
    zero = K[0] * 0.0  # (derived from K, so that under shard_map it keeps the per-device type)

    def body(_, carry):
        lam, y, t = carry
        new = jnp.where(cells, jnp.maximum(y - scale * (K @ y - 1.0), 0.0), 0.0)
        restart = jnp.dot(y - new, new - lam) > 0  # momentum points uphill: drop it
        t_next = jnp.where(restart, 1.0, 0.5 * (1.0 + jnp.sqrt(1.0 + 4.0 * t * t)))
        y_next = jnp.where(restart, new, new + (t - 1.0) / t_next * (new - lam))
        return new, y_next, t_next

    lam, _, _ = jax.lax.fori_loop(0, iters, body, (zero, zero, scale * 0.0 + 1.0))
    return lam


def references(problem, iters: int) -> dict:
    """The basis of F, W*, W^mm and the 0/1 predicates `compatible` (Def. 1) and `separable` (Def. 2)."""
    H, g = problem["H"], grid(problem)
    V, d = g["F"].shape[1], H.shape[1]
    U, S, Vt = jnp.linalg.svd(rows(H, g["onehot"], g["F"]), full_matrices=False)
    keep = S > RCOND * S[0]
    basis = jnp.where(keep[:, None], Vt, 0.0)
    b = g["b"].reshape(-1)
    W_star = (basis.T @ jnp.where(keep, (U.T @ b) / jnp.where(keep, S, 1.0), 0.0)).reshape(V, d)
    residual = jnp.where(g["F"], apply_X(W_star, H, g["onehot"]) - g["b"], 0.0)
    X_B = rows(H, g["onehot"], g["B"])
    M = X_B - (X_B @ basis.T) @ basis
    K = M @ M.T
    lam = svm_dual(K, g["B"].reshape(-1), iters)
    margins = jnp.min(jnp.where(g["B"].reshape(-1), K @ lam, jnp.inf))  # ⟨M_k, W^mm⟩ = ⟨X_k, P_⊥W^mm⟩
    W_mm = (M.T @ lam).reshape(V, d)
    resolved = jnp.linalg.norm(W_mm) * jnp.max(jnp.linalg.norm(X_B, axis=1)) <= 1.0 / MIN_MARGIN
    return {
        "F_basis": basis,
        "W_star": W_star,
        "W_mm": W_mm,
        "wmm_margin": margins,
        "compatible": jnp.linalg.norm(residual) <= TOL * jnp.maximum(jnp.linalg.norm(b), 1.0),
        "separable": (margins >= CERTIFY) & resolved & jnp.any(g["B"]),
    }
