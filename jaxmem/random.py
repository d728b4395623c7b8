"""Shape-stable random draws.

`jax.random.normal(key, shape)` gives different numbers for different shapes, so a run padded to
a bucket's maximum sizes would see other random numbers than the same run unpadded. Here the value
at index (i, j) of matrix k depends only on (key, k, i, j) — it is threefry-2x32 of the counter
(k·2²⁴ + i, j) — so a padded matrix agrees with the unpadded one on their shared block, which is
what makes padded and unpadded runs equal (DESIGN: pad and mask). All matrices come from one
threefry call, which also compiles several times faster on the CPU than one draw per matrix.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.extend.random import threefry_2x32

# Flax's `lecun_normal` draws a normal truncated to [-2, 2] and rescales it to unit variance.
_TRUNCATED_NORMAL_STD = 0.87962566103423978
_TWO_SIGMA = 0.9772498680518208  # Φ(2)
_MAX_ROWS = 1 << 24


def uniform_matrices(key: jax.Array, shapes: list[tuple[int, int]]) -> list[jax.Array]:
    """Uniform (0, 1) matrices; entry (i, j) of matrix k depends only on (key, k, i, j)."""
    if any(rows >= _MAX_ROWS for rows, _ in shapes):
        raise ValueError(f"shape-stable draws support fewer than {_MAX_ROWS} rows per matrix, got {shapes}")
    his, los = [], []
    for k, (rows, cols) in enumerate(shapes):
        i, j = jnp.meshgrid(jnp.arange(rows, dtype=jnp.uint32), jnp.arange(cols, dtype=jnp.uint32), indexing="ij")
        his.append((jnp.uint32(k * _MAX_ROWS) + i).ravel())
        los.append(j.ravel())
    count = sum(rows * cols for rows, cols in shapes)
    bits = threefry_2x32(
        jax.random.key_data(key) if jnp.issubdtype(key.dtype, jax.dtypes.prng_key) else key, jnp.concatenate(his + los)
    )[:count]
    floats = jax.lax.bitcast_convert_type((bits >> 9) | jnp.uint32(0x3F800000), jnp.float32) - 1.0
    floats = jnp.clip(floats, 1e-7, 1.0 - 1e-7)
    out, start = [], 0
    for rows, cols in shapes:
        out.append(floats[start : start + rows * cols].reshape(rows, cols))
        start += rows * cols
    return out


def normal_matrices(key: jax.Array, shapes: list[tuple[int, int]], truncated: list[bool] | None = None) -> list:
    """Standard normal matrices (unit-variance normals truncated at ±2σ where asked), shape-stable."""
    truncated = truncated or [False] * len(shapes)
    out = []
    for u, trunc in zip(uniform_matrices(key, shapes), truncated):
        if trunc:
            u = (1.0 - _TWO_SIGMA) + u * (2.0 * _TWO_SIGMA - 1.0)
        z = jnp.sqrt(2.0) * jax.scipy.special.erfinv(2.0 * u - 1.0)
        out.append(z / _TRUNCATED_NORMAL_STD if trunc else z)
    return out


def active_mask(size: int, active: jax.Array) -> jax.Array:
    """Boolean vector of length `size` marking the first `active` (traced) entries."""
    return jnp.arange(size) < active


def block_mask(shape: tuple[int, int], rows: jax.Array, cols: jax.Array) -> jax.Array:
    """Boolean matrix marking the active top-left `rows` x `cols` block of a padded array."""
    return active_mask(shape[0], rows)[:, None] & active_mask(shape[1], cols)[None, :]


def sphere_rows(gaussian: jax.Array, rows: jax.Array, dim: jax.Array) -> jax.Array:
    """`rows` i.i.d. uniform points on the unit sphere of R^dim from a padded Gaussian matrix."""
    draw = jnp.where(block_mask(gaussian.shape, rows, dim), gaussian, 0.0)
    norms = jnp.linalg.norm(draw, axis=1, keepdims=True)
    return draw / jnp.where(norms > 0, norms, 1.0)
