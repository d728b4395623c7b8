"""The shallow ViT of Eq. (2.1) and its initialisation (spec §1.1, §0.3):

    F(X) = (1/|S|) Σ_{l∈S} aᵀ ReLU(W_O W_V X softmax(Xᵀ W_Kᵀ W_Q x_l)),

tokens as rows here; the softmax and the mean run over the kept tokens S only (masks). a is shared
by all positions (the proof's A.40, spec A3) and never trained. Init (§0.3, the corrected
"pre-trained" model of Assumption 2.3.1): W_K = I + δE_K, W_Q = I + δE_Q, W_V = U + σE_V with
E_· = Σ_j e_j μ_jᵀ (e_j uniform on the unit sphere, μ_j = e_j the patterns) and U Haar-orthogonal,
so ‖W_K μ_j − μ_j‖ = δ and ‖W_V μ_j − Uμ_j‖ = σ exactly; W_O entries N(0, ξ²); a_i = ±1/√m.
Neurons past the true width m have a_i = 0 and W_O rows 0: they never move (padding is inert).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxmem.experiments import draws
from jaxmem.experiments.draws import haar


def init(key, m: int, d: int, patterns: int, width, cfg) -> tuple[dict, jnp.ndarray]:
    """(params {w_o (m, d), w_v, w_k, w_q (d, d)}, a (m,)); `cfg` holds sigma, delta, xi."""
    g_o, g_u, g_e = draws.normal_matrices(key, [(m, d), (d, d), (3, d, patterns)])
    (u_a,) = draws.uniform_matrices(jax.random.fold_in(key, 1), [(m, 1)])
    active = draws.active_mask(m, width)
    e = g_e / jnp.linalg.norm(g_e, axis=1, keepdims=True)  # (3, d, M): unit columns e_j
    e = jnp.pad(e, ((0, 0), (0, 0), (0, d - patterns)))  # E = Σ_j e_j μ_jᵀ with μ_j = e_j
    eye = jnp.eye(d)
    params = {
        "w_o": jnp.where(active[:, None], cfg["xi"] * g_o, 0.0),
        "w_v": haar(g_u[None])[0] + cfg["sigma"] * e[0],
        "w_k": eye + cfg["delta"] * e[1],
        "w_q": eye + cfg["delta"] * e[2],
    }
    a = jnp.where(active, jnp.where(u_a[:, 0] < 0.5, 1.0, -1.0) / jnp.sqrt(width), 0.0)
    return params, a


def attention(params, x, keep):
    """softmax over the kept tokens s of x_sᵀ W_Kᵀ W_Q x_l: (count, L queries, L keys)."""
    logits = jnp.einsum("nsd,nld->nls", x @ params["w_k"].T, x @ params["w_q"].T)
    return jax.nn.softmax(jnp.where(keep[:, None, :], logits, -jnp.inf), axis=-1)


def forward(params, a, x, keep):
    """F(X) of Eq. (2.1) for a stack x (count, L, d) with kept tokens `keep` (count, L); also the
    attention (for the concentration metric)."""
    att = attention(params, x, keep)
    values = att @ (x @ params["w_v"].T)  # V_l = W_V X softmax(·): (count, L, m_a)
    per_query = jax.nn.relu(values @ params["w_o"].T) @ a
    return jnp.sum(jnp.where(keep, per_query, 0.0), axis=-1) / jnp.sum(keep, axis=-1), att


def relevant_mass(att, relevant, keep):
    """The left side of (2.15): attention on label-relevant tokens, averaged over kept queries."""
    mass = jnp.sum(jnp.where(relevant[:, None, :], att, 0.0), axis=-1)
    return jnp.sum(jnp.where(keep, mass, 0.0), axis=-1) / jnp.sum(keep, axis=-1)


def hinge(f, y):
    """ℓ = max{1 − yF, 0} (2.3)."""
    return jax.nn.relu(1.0 - y * f)
