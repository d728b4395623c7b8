"""Chapter 7's one-layer single-head attention-only transformer (spec C.2, eq. 7.2) and its CoT and ICL
inference (C.5, (7.4)–(7.9)).

F(Ψ; P) = Σ_i W_V p̃_i softmax_i(p̃_iᵀ W p̃_query) over the prompt's columns but the query, W = W_Kᵀ W_Q
trained directly (Sec 7.2.2), W_V = (0 I 0) fixed: it reads the output half of a column. Outputs are
decoded greedily to the nearest pattern of the answer set (C.9-8).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxmem.experiments import draws
from jaxmem.experiments.li_thesis import cot_tasks


def init(key, dim: int, xi) -> dict:
    """W^(0)_ij ~ N(0, ξ²)."""
    (w,) = draws.normal_matrices(key, [(dim, dim)])
    return {"w": xi * w}


def forward(params, keys, mask, query, dx: int):
    """F (d_X,) and the attention weights over the masked key columns (n,)."""
    attn = jax.nn.softmax(jnp.where(mask, keys @ (params["w"] @ query), -jnp.inf))
    return attn @ keys[:, dx : 2 * dx], attn


def decode(f, patterns):
    """argmin_u ½‖F − u‖² over the answer set's patterns: an index."""
    return jnp.argmin(jnp.sum((patterns - f) ** 2, axis=-1))


def chain_of_thought(params, contexts, mask, start, patterns, k_steps: int, dx: int):
    """Subroutine 4: K greedy steps from the query's pattern index `start`. Each step appends the last
    query column completed with its answer and a new query column. Returns the answers (K,) and every
    step's attention over [contexts, the K − 1 completed steps] (K, n + K − 1)."""
    prefix = jnp.zeros((k_steps - 1, contexts.shape[-1]))
    answers, attns, current = [], [], start
    for k in range(1, k_steps + 1):
        keys = jnp.concatenate([contexts, prefix])
        key_mask = jnp.concatenate([mask, jnp.arange(k_steps - 1) < k - 1])
        f, attn = forward(params, keys, key_mask, cot_tasks.query_column(patterns[current], k, k_steps), dx)
        answer = decode(f, patterns)
        if k < k_steps:
            done = jnp.concatenate([patterns[current], patterns[answer], jax.nn.one_hot(k - 1, k_steps)])
            prefix = prefix.at[k - 1].set(done)
        answers.append(answer)
        attns.append(attn)
        current = answer
    return jnp.stack(answers), jnp.stack(attns)
