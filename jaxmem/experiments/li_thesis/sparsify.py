"""Token sparsification (Sec 2.4.1, Fig 2.5; spec E2.6, A8): remove `r` tokens per sample, by a mask
(the softmax and the mean over S^n run over the kept tokens only; a zeroed token would still weigh
e^0 in the softmax). Strategies: "random" (uniform), "irrelevant" (non-discriminative tokens first,
then at random) and "noisy" (the largest ‖x − μ‖ first: the spec's oracle)."""

from __future__ import annotations

import jax.numpy as jnp

STRATEGIES = ("random", "irrelevant", "noisy")


def keep_mask(data: dict, removed, strategy) -> jnp.ndarray:
    """(count, L) boolean mask of the kept tokens: the `removed` tokens of highest priority go."""
    u = data["u"]
    irrelevant = (data["role"] >= 2) + u  # non-discriminative first, random among equals
    priority = jnp.select([strategy == 0, strategy == 1], [u, irrelevant], data["noise"])
    order = jnp.argsort(jnp.argsort(-priority, axis=-1), axis=-1)  # 0 = the first to go
    return order >= removed
