"""Shape-stable keys: PRNG implementations whose random bits at an index do not depend on the array's shape.

`jax.random.normal(key, (3, 4))` and `jax.random.normal(key, (6, 8))` agree nowhere, so a module
initialised at padded sizes would start from other numbers than the same module at its true sizes. With a
key of these implementations the bits at multi-index (i, j, ...) are a function of the key and a counter
made of the index alone (as in jaxmem.experiments.draws), and every elementwise draw built on them
(`uniform`, `normal`, `truncated_normal`, `randint`, `bernoulli`, and with them flax's, nnx's and equinox's
initialisers) agrees on the shared block of any two shapes. Draws that mix entries (`permutation`,
`orthogonal`) are not shape-stable; the adapter's padding check finds them.

Two implementations: `THREEFRY`'s bits are threefry-2x32 of key and counter (the sampler's key: the data),
`HASHED`'s a 32-bit integer hash of them (the module's key: its initial weights). Each threefry call site
costs the CPU compiler about 0.25 s, and a framework draws each parameter on its own (flax's init of the Fig
1 memory compiled in 0.85 s with threefry bits, 0.31 s with hashed ones); initial weights need no
cryptographic quality. `split` and `fold_in` (the keys a framework derives, one or two per parameter) mix
the key with the same hash in both.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
from jax.extend.random import define_prng_impl, threefry_2x32, threefry_prng_impl

WORD_BITS = 32
UNSIGNED = {8: jnp.uint8, 16: jnp.uint16, 32: jnp.uint32}
GOLDEN = 0x9E3779B9  # odd; multiples of it keep streams apart


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


def mixed(x: jax.Array) -> jax.Array:
    """A bijective 32-bit mixer (Wellons' lowbias32): each input bit flips about half the output bits."""
    x = x ^ (x >> 16)
    x = x * jnp.uint32(0x7FEB352D)
    x = x ^ (x >> 15)
    x = x * jnp.uint32(0x846CA68B)
    return x ^ (x >> 16)


def hashed(key: jax.Array, first: jax.Array, second: jax.Array, stream: int) -> jax.Array:
    """A 32-bit hash of the key's two words and two data words, one per `stream`; injective in `first`."""
    salt = jnp.uint32((stream * GOLDEN) & 0xFFFFFFFF)
    inner = mixed(key[1] ^ mixed(second + salt))
    return mixed(key[0] ^ mixed(first ^ inner) + salt)


def _words(bit_width: int, shape: tuple[int, ...], high: jax.Array, low) -> jax.Array:
    """Bits of `bit_width` from one or (64 bits) two 32-bit words per entry."""
    if bit_width == 64:
        return ((high.astype(jnp.uint64) << 32) | low().astype(jnp.uint64)).reshape(shape)
    return (high >> (WORD_BITS - bit_width)).astype(UNSIGNED[bit_width]).reshape(shape)


def threefry_bits(key: jax.Array, bit_width: int, shape: tuple[int, ...]) -> jax.Array:
    """Random bits of `shape`: threefry-2x32 of `key` and each entry's counter."""
    count = math.prod(shape)
    if count == 0:
        return jnp.zeros(shape, UNSIGNED.get(bit_width, jnp.uint64))
    words = threefry_2x32(key, jnp.concatenate(counters(tuple(shape))))
    return _words(bit_width, shape, words[:count], lambda: words[count:])


def hashed_bits(key: jax.Array, bit_width: int, shape: tuple[int, ...]) -> jax.Array:
    """Random bits of `shape`: `hashed` of `key` and each entry's counter."""
    if math.prod(shape) == 0:
        return jnp.zeros(shape, UNSIGNED.get(bit_width, jnp.uint64))
    first, second = counters(tuple(shape))
    return _words(bit_width, shape, hashed(key, first, second, 1), lambda: hashed(key, first, second, 2))


def _split(key: jax.Array, shape: tuple[int, ...]) -> jax.Array:
    return _derived(key, jnp.arange(math.prod(shape), dtype=jnp.uint32).reshape(shape), 3)


def _fold_in(key: jax.Array, data: jax.Array) -> jax.Array:
    return _derived(key, jnp.asarray(data, jnp.uint32), 4)


def _derived(key: jax.Array, data: jax.Array, stream: int) -> jax.Array:
    """Keys (data.shape + (2,)) derived from `key` and 32-bit `data`: distinct data, distinct keys."""
    first = hashed(key, data, jnp.zeros_like(data), stream)
    return jnp.stack([first, hashed(key, first, data, stream + 2)], axis=-1)


def _impl(random_bits, name: str, tag: str):
    return define_prng_impl(
        key_shape=(2,),
        seed=threefry_prng_impl.seed,
        split=_split,
        random_bits=random_bits,
        fold_in=_fold_in,
        name=name,
        tag=tag,
    )


THREEFRY = _impl(threefry_bits, "jaxmem_shape_stable_threefry", "jsst")
HASHED = _impl(hashed_bits, "jaxmem_shape_stable_hashed", "jssh")


def stable_key(key: jax.Array, impl=THREEFRY) -> jax.Array:
    """A shape-stable key of `impl` with the data of `key` (raw uint32[2], or a typed key)."""
    data = jax.random.key_data(key) if jnp.issubdtype(key.dtype, jax.dtypes.prng_key) else key
    return jax.random.wrap_key_data(data, impl=impl)
