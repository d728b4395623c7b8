"""Shape-stable random draws.

`jax.random.normal(key, shape)` gives different numbers for different shapes, so a run padded to
a bucket's maximum sizes would see other random numbers than the same run unpadded. Here the value
at index (i, j) of matrix k depends only on (key, k, i, j) — it is threefry-2x32 of the counter
(k·2²⁴ + i, j) — so a padded matrix agrees with the unpadded one on their shared block, which is
what makes padded and unpadded runs equal (DESIGN: pad and mask). All matrices come from one
threefry call, which also compiles several times faster on the CPU than one draw per matrix.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
from jax.extend.random import threefry_2x32

# Flax's `lecun_normal` draws a normal truncated to [-2, 2] and rescales it to unit variance.
_TRUNCATED_NORMAL_STD = 0.87962566103423978
_TWO_SIGMA = 0.9772498680518208  # Φ(2)
_MAX_ROWS = 1 << 24
_MAX_COLS = 1 << 16
ROWS_LIMIT = _MAX_ROWS // 2  # the largest true size along the rows of a draw: padded (≤ 2×), it still fits
COLS_LIMIT = _MAX_COLS // 2  # the same along the columns (a size field's `maximum`)


def _uniform_flat(key: jax.Array, shapes: list[tuple[int, ...]]) -> jax.Array:
    """All arrays' uniform (0, 1) entries, concatenated row-major, from ONE threefry call. Entry
    (i, j) of matrix k has the counter (k·2²⁴ + i, j); entry (h, i, j) of a 3-D stack, (k·2²⁴ + i, h·2¹⁶ + j)."""
    if any(s[-2] >= _MAX_ROWS or s[-1] >= _MAX_COLS or (len(s) == 3 and s[0] >= _MAX_COLS) for s in shapes):
        raise ValueError(f"shape-stable draws support < {_MAX_ROWS} rows and < {_MAX_COLS} columns, got {shapes}")
    his, los = [], []
    for k, shape in enumerate(shapes):
        h, i, j = jnp.meshgrid(
            *(jnp.arange(n, dtype=jnp.uint32) for n in (1,) * (3 - len(shape)) + shape), indexing="ij"
        )
        his.append((jnp.uint32(k * _MAX_ROWS) + i).ravel())
        los.append((h * jnp.uint32(_MAX_COLS) + j).ravel())
    count = sum(math.prod(shape) for shape in shapes)
    bits = threefry_2x32(
        jax.random.key_data(key) if jnp.issubdtype(key.dtype, jax.dtypes.prng_key) else key, jnp.concatenate(his + los)
    )[:count]
    floats = jax.lax.bitcast_convert_type((bits >> 9) | jnp.uint32(0x3F800000), jnp.float32) - 1.0
    return jnp.clip(floats, 1e-7, 1.0 - 1e-7)


def _split(flat: jax.Array, shapes: list[tuple[int, ...]]) -> list[jax.Array]:
    out, start = [], 0
    for shape in shapes:
        out.append(flat[start : start + math.prod(shape)].reshape(shape))
        start += math.prod(shape)
    return out


def uniform_matrices(key: jax.Array, shapes: list[tuple[int, ...]]) -> list[jax.Array]:
    """Uniform (0, 1) matrices (or (H, rows, cols) stacks of them); entry (i, j) of matrix k depends
    only on (key, k, i, j), entry (h, i, j) only on (key, k, h, i, j)."""
    return _split(_uniform_flat(key, shapes), shapes)


def normal_matrices(key: jax.Array, shapes: list[tuple[int, ...]], truncated: list[bool] | None = None) -> list:
    """Standard normal matrices (unit-variance normals truncated at ±2σ where asked), shape-stable.
    The inverse CDF runs once over all matrices: one elementwise chain compiles faster than one each."""
    truncated = truncated or [False] * len(shapes)
    if len(truncated) != len(shapes):
        raise ValueError(f"truncated has {len(truncated)} flags for {len(shapes)} shapes")
    sizes = [math.prod(shape) for shape in shapes]

    def per_entry(values):  # (jnp.repeat with a total length makes XLA constant-fold a cumsum over every entry)
        return jnp.concatenate([jnp.full((n,), v, jnp.float32) for v, n in zip(values, sizes)])

    low = per_entry([1.0 - _TWO_SIGMA if t else 0.0 for t in truncated])
    width = per_entry([2.0 * _TWO_SIGMA - 1.0 if t else 1.0 for t in truncated])
    scale = per_entry([1.0 / _TRUNCATED_NORMAL_STD if t else 1.0 for t in truncated])
    u = low + _uniform_flat(key, shapes) * width
    return _split(jnp.sqrt(2.0) * jax.scipy.special.erfinv(2.0 * u - 1.0) * scale, shapes)


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


def haar(gaussian):
    """Haar-orthogonal matrices from Gaussian ones: Q of QR, sign-fixed by diag R (..., d, d)."""
    q, r = jnp.linalg.qr(gaussian)
    return q * jnp.sign(jnp.diagonal(r, axis1=-2, axis2=-1))[..., None, :]
