"""Float64 host-side reference solutions for the NTP implicit-bias paper (Thrampoulidis 2024; spec 004, issue #5).

The authoritative answers that the in-engine (float32, JAX) quantities of `ntp_linear` are checked against.
Everything is plain numpy/scipy/clarabel on one unpadded `Instance` (H (m, d) rows h̄_j, P (m, V) with zeros
off-support, π (m,)). W ∈ R^{V×d} is flattened row-major; (e_a − e_b) h̄_jᵀ is the "Kesler" matrix of the
pair (a, b) at context j, and each context's pairs are anchored at z_j = the smallest index of S_j (spec A4;
every result is anchor-invariant):
- F-rows (e_{z_j} − e_{z'}) h̄_jᵀ, z' ∈ S_j \\ {z_j}, with targets log(p̂_{j,z_j}/p̂_{j,z'}): the in-support
  log-odds equations (4); they span the data subspace F (Eq. 5).
- B-rows (e_{z_j} − e_v) h̄_jᵀ, v ∉ S_j: the margin constraints (6b).

Solvers, each a well-kept library routine rather than a hand-rolled iteration:
- W* (§1.4): the minimum-norm least-squares solution of the F-rows = targets (`scipy.linalg.lstsq`, LAPACK
  gelsd, i.e. SVD with a relative rank cutoff). The min-norm solution lies in row(A_F) = F, so it is the
  unique solution inside F; Def. 1 (NTP_ℋ-compatibility) holds iff its relative residual vanishes.
- F (Eq. 5): an orthonormal basis of row(A_F) (`scipy.linalg.orth`, SVD); P_F is the projection onto it.
- NTP-separability (Def. 2, Eq. 6): an LP feasibility problem (zero objective, free W, F-rows = 0,
  B-rows ≥ 1) solved by HiGHS (`scipy.optimize.linprog(method="highs")`), an exact simplex/IPM code
  with an infeasibility verdict; a feasible point is a separability certificate.
- W^mm (Def. 3, the NTP-SVM): min ½‖W‖² subject to F-rows = 0 and B-rows ≥ 1, a strongly convex QP
  solved by clarabel's interior-point method at tight tolerances; its inequality duals λ satisfy the KKT
  conditions checked by `kkt_checks` (spec §5.4), and it reports primal infeasibility (= not separable)
  instead of returning a point.
- W^mm again, independently (`w_mm_ldp`): the same QP as a least-distance program on F^⊥, solved exactly
  by Lawson–Hanson NNLS (`scipy.optimize.nnls`, an active-set method; Lawson & Hanson 1974, ch. 23).
- The regularisation path (Thm. 1, spec §5.6): Ŵ_λ = argmin CE(W) + λ/2 ‖W‖², the root of the analytic
  gradient (D1) + λW, by MINPACK's Powell hybrid method (`scipy.optimize.root(method="hybr")`) with the
  analytic Hessian, warm-started from large λ to small; Ŵ_λ/‖Ŵ_λ‖ → W^mm/‖W^mm‖ and P_F(Ŵ_λ) → W* as
  λ → 0 (an independent route to both references). Root finding, not L-BFGS-B: see `ridge_path`.
- CE − ℋ in float64 by the exact decomposition D3 (KL_in + out), free of cancellation against ℋ.

The solvers assume an input that `diagnose` finds clean; `violations` reports, per instance, the
degenerate inputs and the failed assumptions (not compatible, not separable).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import clarabel
import numpy as np
import scipy.linalg
import scipy.optimize
import scipy.sparse
from scipy.special import log_softmax, logsumexp, softmax, xlogy

RANK_RTOL = 1e-10  # singular values below this × σ_max count as zero (spec §5.3)
COMPAT_TOL = 1e-8  # relative residual of the log-odds equations (4) below which Def. 1 holds (spec §5.2)
QP_TOL = 1e-12  # clarabel's gap and feasibility tolerances
STATIONARITY_TOL = 1e-12  # max |∇CE(W) + λW| accepted on the regularisation path
LDP_INFEASIBLE = 1e-12  # NNLS residual² = 1/(1 + ‖W^mm‖²) below this: no separating W of norm < 1e6


@dataclass(frozen=True)
class Instance:
    """A training set 𝒯_m = {(h̄_j, π̂_j, p̂_j)} (spec §1.1), float64 and unpadded."""

    H: np.ndarray  # (m, d): rows h̄_j
    P: np.ndarray  # (m, V): p̂_{j,z}, zero off-support
    pi: np.ndarray  # (m,): π̂_j

    @property
    def mask(self) -> np.ndarray:
        """S_j = {z : p̂_{j,z} > 0} as an (m, V) bool array."""
        return self.P > 0

    @property
    def V(self) -> int:
        return self.P.shape[1]

    @property
    def d(self) -> int:
        return self.H.shape[1]

    @classmethod
    def from_arrays(cls, H, P, mask, pi, tokens=None) -> Instance:
        """An instance from (possibly padded, float32) engine arrays: contexts with π̂_j = 0 and the tokens
        with tokens[v] False are dropped, P is zeroed off the mask; zero-padded embedding dims are kept (the
        min-norm solutions are zero there)."""
        P, mask, pi = np.asarray(P, np.float64), np.asarray(mask, bool), np.asarray(pi, np.float64)
        rows = pi != 0
        cols = np.ones(P.shape[1], bool) if tokens is None else np.asarray(tokens, bool)
        P = np.where(mask, P, 0.0)[rows][:, cols]
        return cls(H=np.asarray(H, np.float64)[rows], P=P, pi=pi[rows])


def toy2d() -> Instance:
    """The spec §2.2 deterministic 2-D instance (App. A.1 structure): d = 2, m = 3, V = 5, |S_j| = 3.
    1-based supports A = {2,3,4}, B = {1,2,5}, C = {1,4,5}: word 3 follows only A, words 1 and 5 follow B and C."""
    s = np.sqrt(3) / 2
    H = np.array([[0.0, 1.0], [-s, -0.5], [s, -0.5]])
    P = np.array(
        [
            [0.0, 0.5, 0.3, 0.2, 0.0],
            [0.7, 0.2, 0.0, 0.0, 0.1],
            [0.6, 0.0, 0.0, 0.3, 0.1],
        ]
    )
    return Instance(H=H, P=P, pi=np.full(3, 1 / 3))


def diagnose(inst: Instance, tol: float = 1e-5) -> list[str]:
    """Degenerate inputs, named (empty list: clean). `tol` bounds |Σ − 1| of P rows and π (1e-5 admits
    float32 engine data)."""
    arrays = {"H": inst.H, "P": inst.P, "pi": inst.pi}
    problems = [f"{name} has NaN or inf entries" for name, x in arrays.items() if not np.all(np.isfinite(x))]
    problems += [f"{name} has negative entries" for name in ("P", "pi") if np.any(arrays[name] < 0)]
    if np.any(inst.pi == 0):
        problems.append(f"contexts {np.flatnonzero(inst.pi == 0).tolist()} have π̂_j = 0 (no data)")
    if abs(inst.pi.sum() - 1) > tol:
        problems.append(f"π̂ sums to {inst.pi.sum():.6g}, not 1")
    sizes = inst.mask.sum(axis=1)
    if np.any(sizes == 0):
        problems.append(f"contexts {np.flatnonzero(sizes == 0).tolist()} have an empty support")
    off = np.flatnonzero((sizes > 0) & (np.abs(inst.P.sum(axis=1) - 1) > tol))
    if off.size:
        problems.append(f"P rows {off.tolist()} do not sum to 1")
    if np.all(sizes == inst.V):
        problems.append("every context has full support S_j = V: the standing assumption (∃ j: S_j < V) fails")
    return problems


def anchors_of(inst: Instance) -> np.ndarray:
    """The default anchors z_j = min S_j (spec A4)."""
    return np.argmax(inst.mask, axis=1)


class Constraints(NamedTuple):
    """The Kesler rows over vec(W) (row-major): A_F W = t are Eqs. (4), A_B W ≥ 1 is (6b)."""

    A_F: np.ndarray  # (r, V d), r = Σ_j (S_j − 1)
    t: np.ndarray  # (r,): log(p̂_{j,z_j}/p̂_{j,z'})
    A_B: np.ndarray  # (q, V d), q = Σ_j (V − S_j); rows ordered (j, v) with j major


def _kesler(inst: Instance, j, a, b) -> np.ndarray:
    """Rows vec((e_a − e_b) h̄_jᵀ) for index arrays j, a, b."""
    rows = np.zeros((len(j), inst.V, inst.d))
    k = np.arange(len(j))
    rows[k, a] += inst.H[j]
    rows[k, b] -= inst.H[j]
    return rows.reshape(len(j), inst.V * inst.d)


def constraints(inst: Instance, anchors=None) -> Constraints:
    """F- and B-rows anchored at `anchors` (default: z_j = min S_j)."""
    z = anchors_of(inst) if anchors is None else np.asarray(anchors)
    mask = inst.mask
    not_anchor = np.ones_like(mask)
    not_anchor[np.arange(len(z)), z] = False
    jF, bF = np.nonzero(mask & not_anchor)
    jB, vB = np.nonzero(~mask)
    t = np.log(inst.P[jF, z[jF]]) - np.log(inst.P[jF, bF])
    return Constraints(_kesler(inst, jF, z[jF], bF), t, _kesler(inst, jB, z[jB], vB))


def w_star(inst: Instance, anchors=None) -> tuple[np.ndarray, float]:
    """W* (§1.4): the min-norm solution of the log-odds equations (4), and their relative residual
    ‖A_F W* − t‖/‖t‖ (≈ 0 iff NTP_ℋ-compatible, Def. 1)."""
    A_F, t, _ = constraints(inst, anchors)
    if t.size == 0:
        return np.zeros((inst.V, inst.d)), 0.0
    w = scipy.linalg.lstsq(A_F, t, cond=RANK_RTOL)[0]
    residual = np.linalg.norm(A_F @ w - t) / max(np.linalg.norm(t), np.finfo(float).tiny)
    return w.reshape(inst.V, inst.d), float(residual)


def compatible(inst: Instance, tol: float = COMPAT_TOL) -> bool:
    """NTP_ℋ-compatibility (Def. 1): Eqs. (4) are solvable."""
    return w_star(inst)[1] < tol


def basis_F(inst: Instance, anchors=None) -> np.ndarray:
    """An orthonormal basis of F (Eq. 5) as the columns of a (V d, dim F) matrix."""
    return scipy.linalg.orth(constraints(inst, anchors).A_F.T, rcond=RANK_RTOL)


def project_F(W: np.ndarray, inst: Instance, anchors=None) -> np.ndarray:
    """P_F(W), the orthogonal projection onto F (App. D); P_⊥(W) = W − P_F(W)."""
    Q = basis_F(inst, anchors)
    return (Q @ (Q.T @ W.reshape(-1))).reshape(W.shape)


def separable_lp(inst: Instance) -> tuple[bool, np.ndarray | None, str]:
    """NTP-separability (Def. 2) as the HiGHS LP: find W with A_F W = 0 and A_B W ≥ 1. Returns (separable,
    a certificate W or None, HiGHS's message); raises if HiGHS reaches no verdict."""
    A_F, _, A_B = constraints(inst)
    n = inst.V * inst.d
    res = scipy.optimize.linprog(
        np.zeros(n),
        A_ub=-A_B if A_B.size else None,
        b_ub=-np.ones(len(A_B)) if A_B.size else None,
        A_eq=A_F if A_F.size else None,
        b_eq=np.zeros(len(A_F)) if A_F.size else None,
        bounds=(None, None),
        method="highs",
    )
    if res.status not in (0, 2):
        raise RuntimeError(f"HiGHS reached no verdict on NTP-separability: {res.message}")
    return res.status == 0, (res.x.reshape(inst.V, inst.d) if res.status == 0 else None), res.message


@dataclass(frozen=True)
class MaxMargin:
    """The NTP-SVM outcome: W^mm and its inequality duals λ (rows of A_B), or None when not NTP-separable."""

    W: np.ndarray | None
    lam: np.ndarray | None
    status: str  # clarabel's SolverStatus
    solve_time: float  # seconds inside clarabel

    @property
    def separable(self) -> bool:
        return self.W is not None


def w_mm(inst: Instance) -> MaxMargin:
    """W^mm (Def. 3): argmin ½‖W‖² s.t. (6a) A_F W = 0, (6b) A_B W ≥ 1, by clarabel (interior point).
    In clarabel's form A x + s = b, s ∈ {0}^r × R_+^q, the duals of the B-rows are λ ≥ 0 with W = A_Bᵀλ + A_Fᵀμ."""
    A_F, _, A_B = constraints(inst)
    r, q, n = len(A_F), len(A_B), inst.V * inst.d
    A = scipy.sparse.csc_matrix(np.vstack([A_F, -A_B]))
    b = np.concatenate([np.zeros(r), -np.ones(q)])
    cones = [cone for cone, size in ((clarabel.ZeroConeT(r), r), (clarabel.NonnegativeConeT(q), q)) if size]
    settings = clarabel.DefaultSettings()
    settings.verbose = False
    settings.tol_gap_abs = settings.tol_gap_rel = settings.tol_feas = QP_TOL
    settings.max_iter = 500
    solver = clarabel.DefaultSolver(scipy.sparse.identity(n, format="csc"), np.zeros(n), A, b, cones, settings)
    sol = solver.solve()
    status = str(sol.status)
    if status == "Solved":
        return MaxMargin(np.reshape(sol.x, (inst.V, inst.d)), np.asarray(sol.z)[r:], status, sol.solve_time)
    if status == "PrimalInfeasible":
        return MaxMargin(None, None, status, sol.solve_time)
    raise RuntimeError(f"clarabel did not solve the NTP-SVM: {status}")


def w_mm_ldp(inst: Instance) -> np.ndarray | None:
    """W^mm by an independent exact method, or None when not NTP-separable: with W = N y (N an orthonormal
    basis of F^⊥, so (6a) holds and ‖W‖ = ‖y‖), Def. 3 is the least-distance program min ‖y‖ s.t. G y ≥ 1,
    G = A_B N, solved by NNLS min_{u ≥ 0} ‖[Gᵀ; 1ᵀ] u − e_last‖ with y = −res[:-1]/res[-1]
    (Lawson & Hanson 1974, Thm. 23.4)."""
    A_F, _, A_B = constraints(inst)
    N = scipy.linalg.null_space(A_F, rcond=RANK_RTOL) if A_F.size else np.eye(inst.V * inst.d)
    E = np.vstack([(A_B @ N).T, np.ones(len(A_B))])
    f = np.zeros(len(E))
    f[-1] = 1.0
    u = scipy.optimize.nnls(E, f, maxiter=50 * E.shape[1])[0]
    res = E @ u - f
    if res @ res < LDP_INFEASIBLE:
        return None
    return (N @ (-res[:-1] / res[-1])).reshape(inst.V, inst.d)


def kkt_checks(inst: Instance, W_mm: np.ndarray, lam: np.ndarray, W_star: np.ndarray) -> dict[str, float]:
    """Spec §5.4 acceptance quantities for (W^mm, λ), each ≈ 0 except min_margin ≈ 1 and dual_min ≥ 0:
    (a) eq_residual = max |A_F W|; (b) min_margin = min A_B W (≥ 1, one active); (c) dual_min = min λ;
    (d) comp_slack = max |λ_k (margin_k − 1)|; stationarity = ‖P_⊥(W − A_Bᵀλ)‖/‖W‖;
    (e) duality_gap = |‖W‖² − Σλ|/‖W‖² (D8); (f) orthogonality = |cos(W^mm, W*)| (D8);
    (g) symmetry = max ‖w_a − w_b‖ over tokens a, b with identical support patterns (D9)."""
    A_F, _, A_B = constraints(inst)
    w = W_mm.reshape(-1)
    margins = A_B @ w
    norm2 = w @ w
    slack = W_mm - (A_B.T @ lam).reshape(W_mm.shape)
    cols = inst.mask.T
    twins = [(a, b) for a in range(inst.V) for b in range(a + 1, inst.V) if np.array_equal(cols[a], cols[b])]
    return {
        "eq_residual": float(np.max(np.abs(A_F @ w), initial=0.0)),
        "min_margin": float(margins.min()),
        "dual_min": float(lam.min()),
        "comp_slack": float(np.max(np.abs(lam * (margins - 1)))),
        "stationarity": float(np.linalg.norm(slack - project_F(slack, inst)) / np.sqrt(norm2)),
        "duality_gap": float(abs(norm2 - lam.sum()) / norm2),
        "orthogonality": float(abs(cosine(W_mm, W_star))),
        "symmetry": max((float(np.linalg.norm(W_mm[a] - W_mm[b])) for a, b in twins), default=0.0),
    }


def cosine(A: np.ndarray, B: np.ndarray) -> float:
    """Frobenius cosine ⟨A, B⟩/(‖A‖‖B‖) (spec A8); 0 if either is zero."""
    norms = np.linalg.norm(A) * np.linalg.norm(B)
    return float(np.sum(A * B) / norms) if norms > 0 else 0.0


def entropy(inst: Instance) -> float:
    """ℋ = −Σ_j π̂_j Σ_z p̂_{j,z} log p̂_{j,z}, the infimum of CE (Sec. 2)."""
    return float(-np.sum(inst.pi[:, None] * xlogy(inst.P, inst.P)))


def cross_entropy(W: np.ndarray, inst: Instance) -> float:
    """CE(W) (Eq. 2)."""
    logp = log_softmax(inst.H @ W.T, axis=1)
    return float(-np.sum(inst.pi[:, None] * np.where(inst.mask, inst.P * logp, 0.0)))


def gap_parts(W: np.ndarray, inst: Instance) -> tuple[float, float]:
    """CE(W) − ℋ = KL_in + out (D3), each ≥ 0 and free of cancellation against ℋ. KL_in depends only on
    P_F(W) (it is CE_F − ℋ, Eq. 12); out is the out-of-support mass penalty Σ_j π̂_j log(1 + Z_out/Z_in)."""
    L, mask, P = inst.H @ W.T, inst.mask, inst.P
    lse_in = logsumexp(np.where(mask, L, -np.inf), axis=1)
    has_out = ~mask.all(axis=1)
    lse_out = logsumexp(np.where(mask, -np.inf, L)[has_out], axis=1)
    kl = np.sum(np.where(mask, xlogy(P, P) - P * (L - lse_in[:, None]), 0.0), axis=1)
    out = np.logaddexp(0.0, lse_out - lse_in[has_out])
    return float(inst.pi @ kl), float(inst.pi[has_out] @ out)


def grad_ce(W: np.ndarray, inst: Instance) -> np.ndarray:
    """∇CE(W) = Σ_j π̂_j (S(W h̄_j) − p̂_j) h̄_jᵀ (D1)."""
    return ((softmax(inst.H @ W.T, axis=1) - inst.P) * inst.pi[:, None]).T @ inst.H


def hess_ce(W: np.ndarray, inst: Instance) -> np.ndarray:
    """∇²CE(W) over row-major vec(W): Σ_j π̂_j (diag(s_j) − s_j s_jᵀ) ⊗ h̄_j h̄_jᵀ, s_j = S(W h̄_j) (from D1)."""
    S = softmax(inst.H @ W.T, axis=1)
    C = inst.pi[:, None, None] * (S[:, :, None] * np.eye(inst.V) - S[:, :, None] * S[:, None, :])  # (m, V, V)
    hh = inst.H[:, :, None] * inst.H[:, None, :]  # (m, d, d)
    n = inst.V * inst.d
    return np.tensordot(C, hh, axes=(0, 0)).transpose(0, 2, 1, 3).reshape(n, n)


def ridge_path(inst: Instance, lambdas) -> list[np.ndarray]:
    """Ŵ_λ = argmin_W CE(W) + λ/2 ‖W‖² for each λ (Thm. 1 in its ridge form, spec §5.6), each solve warm-started
    from the previous one (order `lambdas` from large to small). The objective is strictly convex, so Ŵ_λ is the
    root of ∇CE(W) + λW (D1), found by MINPACK's hybrj (`scipy.optimize.root`, Powell hybrid) with the analytic
    Hessian; raises unless the root is exact to STATIONARITY_TOL. A minimiser driven by CE values (L-BFGS-B)
    stalls at ‖∇‖ ~ 1e-9, since CE is resolved only to ~1e-16, which at λ ≤ 1e-8 leaves Ŵ_λ wrong along
    the flat W^mm direction; the gradient-norm merit of hybrj reaches ~1e-16."""
    shape, eye = (inst.V, inst.d), np.eye(inst.V * inst.d)
    w, path = np.zeros(inst.V * inst.d), []
    for lam in lambdas:
        res = scipy.optimize.root(
            lambda x: grad_ce(x.reshape(shape), inst).reshape(-1) + lam * x,
            w,
            jac=lambda x: hess_ce(x.reshape(shape), inst) + lam * eye,
            method="hybr",
            options={"xtol": 1e-14},
        )
        residual = np.max(np.abs(res.fun))
        if residual > STATIONARITY_TOL:
            raise RuntimeError(f"ridge solve at λ = {lam:g} not stationary: max |∇| = {residual:.3g}")
        w = res.x
        path.append(w.reshape(shape))
    return path


def violations(inst: Instance) -> list[str]:
    """Every reason the paper's results do not apply to `inst` (empty: they do): degenerate inputs
    (`diagnose`), else not NTP_ℋ-compatible (Def. 1) and/or not NTP-separable (Def. 2, HiGHS LP)."""
    problems = diagnose(inst)
    if problems:
        return problems
    residual = w_star(inst)[1]
    if residual >= COMPAT_TOL:
        problems.append(f"not NTP_H-compatible (Def. 1): log-odds equations (4) relative residual {residual:.3g}")
    separable, _, message = separable_lp(inst)
    if not separable:
        problems.append(f"not NTP-separable (Def. 2): HiGHS: {message}")
    return problems
