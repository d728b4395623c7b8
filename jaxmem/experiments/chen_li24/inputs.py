"""Token matrices X ∈ R^{k×d} (spec §1.2): Boolean, uniform on {±1}^{k×d}, or standard Gaussian.

Sample j of a stack is drawn from the counters of entry (j, a, b) only (jaxmem.experiments.draws), so
the first n samples of a larger set are the set of size n: datasets nest along n (spec §5 "Vectorization").
The held-out sets come from streams of the run's key of their own: test 2, validation 4 (the training
set is stream 1, the student stream 3).
"""

from __future__ import annotations

import jax
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


HELD_OUT_STREAMS = {"test": 2, "val": 4}


def held_out(key, sizes: dict, k: int, d: int, kind, teacher) -> dict:
    """The test and validation sets, x_<set> and y_<set> = teacher(x_<set>), of sizes[set] samples each:
    independent draws (their own streams of `key`), so a run stopped on one is judged fairly on the other."""
    out = {}
    for name, stream in HELD_OUT_STREAMS.items():
        x = tokens(jax.random.fold_in(key, stream), sizes[name], k, d, kind)
        out |= {f"x_{name}": x, f"y_{name}": teacher(x)}
    return out
