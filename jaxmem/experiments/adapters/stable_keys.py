"""Shape-stable keys: a PRNG implementation whose random bits at an index do not depend on the array's shape.

`jax.random.normal(key, (3, 4))` and `jax.random.normal(key, (6, 8))` agree nowhere, so a module
initialised at padded sizes would start from other numbers than the same module at its true sizes. With a
key of this implementation the bits at multi-index (i, j, ...) are threefry-2x32 of the key and a counter
made of the index alone (as in jaxmem.experiments.draws), and every elementwise draw built on them
(`uniform`, `normal`, `truncated_normal`, `randint`, `bernoulli`, and with them flax's, nnx's and equinox's
initialisers) agrees on the shared block of any two shapes. `split` and `fold_in` are threefry's, so the
keys a framework derives (one per parameter) are those of an ordinary key with the same data. Draws that
mix entries (`permutation`, `orthogonal`) are not shape-stable; the adapter's padding check finds them.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
from jax.extend.random import define_prng_impl, threefry_2x32, threefry_prng_impl

WORD_BITS = 32
UNSIGNED = {8: jnp.uint8, 16: jnp.uint16, 32: jnp.uint32}


def _packed(index: list[jax.Array], shape: tuple[int, ...]) -> jax.Array:
    """One 32-bit counter word from the indices of some axes, each given a fixed share of the bits (an
    index never moves another's bits, whatever the shape)."""
    if not index:
        return jnp.zeros(shape, jnp.uint32)
    share = WORD_BITS // len(index)
    word = index[0]
    for axis in index[1:]:
        word = (word << share) | axis
    return word


def counters(shape: tuple[int, ...]) -> tuple[jax.Array, jax.Array]:
    """The two counter words of every entry of `shape` (flattened, row-major): the first half of the axes
    packs into one word, the rest into the other."""
    share = WORD_BITS // max(math.ceil(len(shape) / 2), 1)
    if share < WORD_BITS and any(n > 1 << share for n in shape):
        raise ValueError(f"shape-stable draws of rank {len(shape)} support at most {1 << share} entries per axis")
    index = jnp.meshgrid(*(jnp.arange(n, dtype=jnp.uint32) for n in shape), indexing="ij")
    half = len(shape) // 2
    return _packed(index[:half], shape).ravel(), _packed(index[half:], shape).ravel()


def shape_stable_bits(key: jax.Array, bit_width: int, shape: tuple[int, ...]) -> jax.Array:
    """Random bits of `shape` whose entry at each multi-index depends only on `key` and that index."""
    count = math.prod(shape)
    if count == 0:
        return jnp.zeros(shape, UNSIGNED.get(bit_width, jnp.uint64))
    first, second = counters(tuple(shape))
    words = threefry_2x32(key, jnp.concatenate([first, second]))
    high, low = words[:count], words[count:]
    if bit_width == 64:
        bits = (high.astype(jnp.uint64) << 32) | low.astype(jnp.uint64)
    else:
        bits = (high >> (WORD_BITS - bit_width)).astype(UNSIGNED[bit_width])
    return bits.reshape(shape)


SHAPE_STABLE = define_prng_impl(
    key_shape=(2,),
    seed=threefry_prng_impl.seed,
    split=threefry_prng_impl.split,
    random_bits=shape_stable_bits,
    fold_in=threefry_prng_impl.fold_in,
    name="jaxmem_shape_stable",
    tag="jss",
)


def stable_key(key: jax.Array) -> jax.Array:
    """A shape-stable key with the data of `key` (a raw uint32[2] key or a typed threefry key)."""
    data = jax.random.key_data(key) if jnp.issubdtype(key.dtype, jax.dtypes.prng_key) else key
    return jax.random.wrap_key_data(data, impl=SHAPE_STABLE)
