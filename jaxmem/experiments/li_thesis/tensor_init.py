"""The tensor initialisation of Algorithm 1 (Subroutine 1, Appendix C.1.1; spec §3.3, target R4.9).

The training set is split into thirds D_1, D_2, D_3 and the moments Q_j = E[y·S_j(x)] (C.2) of the
labels against the mixture's score functions S_j = (−1)^j ∇^j p / p are estimated on them:

1. Û (d × K): the top-K eigenvectors (by |eigenvalue|) of Q̂_2 on D_1, or of Q̂_3(I, I, a) for a fixed
   direction a when the mixture is symmetric (C.4: μ_1 = −μ_2, Σ_1 = Σ_2, λ = ½), where Q_2 = 0.
2. R̂_3 = Q̂_3(Û, Û, Û) on D_2, decomposed as Σ_j c_j v_j^{⊗3} (the spec's [REC]: a tensor power
   method with deflation in place of KCL); the directions are w̄_j = Û v_j.
3. The magnitudes z = argmin ‖Q̂_1 − Σ_j z_j w̄_j‖ on D_3 (C.5); W_0[:, j] = z_j w̄_j.

Closed forms (C.248–C.249): with responsibilities r_l(x) and h_l = Σ_l^{-1}(x − μ_l),
S_1 = Σ_l r_l h_l, S_2 = Σ_l r_l (h_l h_lᵀ − Σ_l^{-1}), S_3 = Σ_l r_l (h_l^{⊗3} − h_l ⊗̃ Σ_l^{-1}), where
v ⊗̃ Z sums v⊗Z over the three positions of v. The columns of W* are recovered up to order.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

RESTARTS = 8  # power-method starts per component (the best by |T(v, v, v)| is kept)
ITERATIONS = 50


def scores(x, means, precisions, log_weights):
    """Responsibilities r (count, L) and h_l = Σ_l^{-1}(x − μ_l) (count, L, d) of the mixture."""
    diff = x[:, None, :] - means[None]  # (count, L, d)
    h = jnp.einsum("lde,nle->nld", precisions, diff)
    log_det = jnp.linalg.slogdet(precisions)[1]  # log |Σ_l^{-1}|
    log_density = log_weights + 0.5 * log_det - 0.5 * jnp.sum(diff * h, axis=-1)
    return jax.nn.softmax(log_density, axis=-1), h


def third_moment(proj, c, r, h, precisions):
    """Σ_n c_n S_3(x_n)(P, P, P) for sample weights c (count,) and the columns of P (d × k): (k, k, k).
    Every einsum contracts over the samples without forming per-sample tensors."""
    hp = jnp.einsum("nld,dk->nlk", h, proj)
    zp = jnp.einsum("dk,lde,ej->lkj", proj, precisions, proj)  # Pᵀ Σ_l^{-1} P
    cr = c[:, None] * r
    cube = jnp.einsum("nl,nla,nlb,nlc->abc", cr, hp, hp, hp)
    one = jnp.einsum("nl,nla,lbc->abc", cr, hp, zp)  # the v ⊗ Z term; the other two are its transposes
    return cube - one - jnp.transpose(one, (1, 0, 2)) - jnp.transpose(one, (1, 2, 0))


def second_moment(c, r, h, precisions):
    """Σ_n c_n S_2(x_n): (d, d)."""
    cr = c[:, None] * r
    return jnp.einsum("nl,nla,nlb->ab", cr, h, h) - jnp.einsum("nl,lab->ab", cr, precisions)


def third_along(direction, c, r, h, precisions):
    """Σ_n c_n S_3(x_n)(I, I, a): (d, d); (v ⊗̃ Z)(I, I, a) = v(Za)ᵀ + (Za)vᵀ + (v·a)Z."""
    cr = c[:, None] * r
    ha = jnp.einsum("nld,d->nl", h, direction)
    za = jnp.einsum("lde,e->ld", precisions, direction)
    outer = jnp.einsum("nl,nla,lb->ab", cr, h, za)
    return jnp.einsum("nl,nla,nlb->ab", cr * ha, h, h) - outer - outer.T - jnp.einsum("nl,lab->ab", cr * ha, precisions)


def top_component(tensor, key):
    """(c, v) with the largest |T(v, v, v)| = c over RESTARTS runs of the tensor power method."""
    k = tensor.shape[0]

    def iterate(v, _):
        w = jnp.einsum("abc,b,c->a", tensor, v, v)
        return w / jnp.linalg.norm(w), None

    starts = jax.random.normal(key, (RESTARTS, k))
    starts = starts / jnp.linalg.norm(starts, axis=1, keepdims=True)
    ends = jax.vmap(lambda v: jax.lax.scan(iterate, v, None, length=ITERATIONS)[0])(starts)
    values = jnp.einsum("abc,na,nb,nc->n", tensor, ends, ends, ends)
    best = jnp.argmax(jnp.abs(values))
    return values[best], ends[best]


def power_components(tensor, key):
    """Σ_j c_j v_j^{⊗3} ≈ tensor by the tensor power method with deflation: the v_j as rows (k, k)."""
    found = []
    for j in range(tensor.shape[0]):
        c, v = top_component(tensor, jax.random.fold_in(key, j))
        tensor = tensor - c * jnp.einsum("a,b,c->abc", v, v, v)
        found.append(v)
    return jnp.stack(found)


def estimate(key, x, y, n, k: int, means, precisions, weights, symmetric):
    """W_0 (d, K) of Subroutine 1 from the first n samples (x, y), the mixture's means (L, d),
    precisions Σ_l^{-1} (L, d, d) and weights λ (L,); `symmetric` selects Q̂_3(I, I, a) for Û."""
    d = x.shape[-1]
    index = jnp.arange(x.shape[0])
    part = jnp.where(index < n, (3 * index) // jnp.maximum(n, 3), 3)  # thirds D_1, D_2, D_3; 3 = padding
    r, h = scores(x, means, precisions, jnp.log(weights))
    c = [(y * (part == j)) / jnp.sum(part == j) for j in range(3)]  # the label-weighted means over D_j
    direction = jnp.ones(d) / jnp.sqrt(d)
    q2 = jnp.where(symmetric, third_along(direction, c[0], r, h, precisions), second_moment(c[0], r, h, precisions))
    values, vectors = jnp.linalg.eigh(q2)
    basis = vectors[:, jnp.argsort(-jnp.abs(values))[:k]]  # Û (d, K)
    directions = power_components(third_moment(basis, c[1], r, h, precisions), key) @ basis.T  # w̄_j rows
    q1 = jnp.einsum("n,nl,nld->d", c[2], r, h)
    z = jnp.linalg.lstsq(directions.T, q1)[0]
    return (z[:, None] * directions).T
