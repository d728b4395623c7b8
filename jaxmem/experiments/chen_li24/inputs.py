"""Token matrices X ∈ R^{k×d} (spec §1.2): Boolean, uniform on {±1}^{k×d}, or standard Gaussian.

Sample j of a stack is drawn from the counters of entry (j, a, b) only (jaxmem.experiments.draws), so
the first n samples of a larger set are the set of size n: datasets nest along n (spec §5 "Vectorization").
"""

from __future__ import annotations

import jax.numpy as jnp
from jax.scipy.special import erfinv

from jaxmem.experiments import draws

KINDS = ("boolean", "gaussian")


def tokens(key, count: int, k: int, d: int, kind) -> jnp.ndarray:
    """`count` token matrices (count, k, d); `kind` is an index into KINDS (traced) or a name."""
    if isinstance(kind, str):
        kind = KINDS.index(kind)
    (u,) = draws.uniform_matrices(key, [(count, k, d)])
    boolean = jnp.where(u < 0.5, -1.0, 1.0)
    gaussian = jnp.sqrt(2.0) * erfinv(2.0 * u - 1.0)
    return jnp.where(kind == 0, boolean, gaussian)
