"""Chapter 6's one-layer single-head transformer with a ReLU MLP (spec B.2, eq. 6.2) and magnitude
pruning of its output-layer neurons (B.5, Thm 6.3.7).

F(Ψ; P) = aᵀ ReLU(W_O Σ_i W_V p_i attn_i), attn = softmax_i((W_K p_i)ᵀ W_Q p_query) over the contexts
only (B.11-2). W_Q, W_K, W_V are D × D with D = d_x + d_y (m_a = m_b = D, Sec 6.5); W_O is m × D; a is
fixed with exactly m/2 entries +1/m and m/2 entries −1/m (B.11-1). Init (Sec 6.2.3): W_V = δ I, W_Q and
W_K δ on their first d_x diagonal entries, W_O ~ N(0, 1/m).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxmem.experiments import draws

PRUNE_ORDERS = ("small", "large", "random")


def init(key, m: int, dim: int, dx: int, delta) -> tuple[dict, jnp.ndarray]:
    """Trained parameters (W_Q, W_K, W_V, W_O) and the fixed output layer a."""
    (w_o,) = draws.normal_matrices(key, [(m, dim)])
    first_dx = jnp.diag(jnp.arange(dim) < dx).astype(jnp.float32)
    params = {
        "w_q": delta * first_dx,
        "w_k": delta * first_dx,
        "w_v": delta * jnp.eye(dim),
        "w_o": w_o / jnp.sqrt(m),
    }
    a = jnp.where(jnp.arange(m) < m // 2, 1.0, -1.0) / m
    return params, a


def attention(params, contexts, query, mask):
    """Softmax weights over the (masked) contexts of one prompt: (l,)."""
    scores = (contexts @ params["w_k"].T) @ (params["w_q"] @ query)
    return jax.nn.softmax(jnp.where(mask, scores, -jnp.inf))


def forward(params, a, contexts, query, mask):
    """F(Ψ; P) (6.2) of one prompt and its attention weights."""
    attn = attention(params, contexts, query, mask)
    hidden = params["w_o"] @ (params["w_v"] @ (attn @ contexts))
    return a @ jax.nn.relu(hidden), attn


def hinge(f, z):
    """ℓ = max{0, 1 − z F} (B.4)."""
    return jnp.maximum(0.0, 1.0 - z * f)


def neuron_rows(params) -> jnp.ndarray:
    """r_i, the rows of W_O W_V (Thm 6.3.7): (m, D)."""
    return params["w_o"] @ params["w_v"]


def prune_keep(norms, rate, order, u):
    """Neurons kept after pruning round(rate · m): smallest ‖r_i‖ first (order 0), largest first (1) or
    at random by the fixed uniforms u (2)."""
    m = norms.shape[0]
    priority = jnp.select([order == 0, order == 1], [norms, -norms], u)
    rank = jnp.argsort(jnp.argsort(priority))  # 0 = the first to go
    return rank >= jnp.round(rate * m)
