"""The blocked cross-entropy's two passes as fused Pallas kernels: logits that exist only on chip.

The XLA path of jaxmem/experiments/blocked_softmax.py still writes each N × B block of logits to device
memory between the ops of a `lax.scan` step (six passes over the logits a training step, the bound the
H200 measured: benchmarks/RESULTS_gpu_throughput.md). Here one kernel program takes a tile of ROWS rows (or,
for the weight gradient, of B classes) and walks the other axis in registers, in the manner of fused
linear cross-entropy (Wijmans et al. 2024, "Cut your losses"; Liger Kernel): a logit tile is computed,
used and dropped, never stored. The kernels return what the scan returns, so blocked_softmax keeps the
custom VJP, the loss forms and the masks in one place:

- `statistics`: per row, the max logit m, Σ exp(z − m) and the target's logit (the online log-sum-exp);
- `gradients`: d features = Σ_c dz_c w_c (one program per row tile) and d weights = Σ_r dz_rᵀ f_r (one
  per class block), dz = coef · (softmax(z) − onehot(y)), each recomputing its logit tiles from the saved
  log-sum-exp (three logit computations a step, none written).

Written for the GPU's Triton backend: tile sides are powers of two, the feature width is zero-padded to
at least MIN_DOT (the smallest Triton dot), rows and classes are padded to whole tiles (rows with target
−1, classes masked). Elsewhere the kernels run in Pallas' interpreter (`interpret`): the same numbers,
slowly, which is how the tests check them on a CPU; the planner takes this path only where a device kind
measured it faster (jaxmem/plan/loss_blocks.py). The matmuls follow the traced context's precision (the
engine's `matmul_precision`: 'highest' lowers to IEEE f32 dots).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as pl_triton

ROWS = 64  # rows per kernel program (a tile of ROWS × B logits at a time)
MIN_DOT = 16  # the smallest side of a Triton dot
NOT_A_CLASS = -2  # the class id of padded classes: no target (−1 on padded rows) ever equals it


def interpret() -> bool:
    """Whether the kernels run interpreted: everywhere but a GPU (the backend they are written for)."""
    return jax.default_backend() != "gpu"


def _compiled_as() -> dict:
    """pallas_call's arguments that say how the kernels run: Triton on a GPU (JAX's default there is Mosaic
    GPU, whose pallas_call does not batch under vmap), else interpreted."""
    return {"interpret": interpret(), "compiler_params": pl_triton.CompilerParams(num_warps=4, num_stages=2)}


def _power_of_two(n: int, floor: int) -> int:
    return max(floor, 1 << max(n - 1, 0).bit_length())


def _tiles(rows: int, classes: int, width: int, block: int) -> tuple[int, int, int, int, int]:
    """(rows per tile, padded rows, classes per block, padded classes, padded width)."""
    row_tile = min(ROWS, _power_of_two(rows, MIN_DOT))
    class_tile = _power_of_two(min(block, classes), MIN_DOT)
    return (
        row_tile,
        -(-rows // row_tile) * row_tile,
        class_tile,
        -(-classes // class_tile) * class_tile,
        _power_of_two(width, MIN_DOT),
    )


def _padded(features, weights, targets, class_mask, block):
    """The operands padded to whole tiles, the classes' ids and additive masks (0 active, −inf not), and
    the tile sides."""
    (rows, width), classes = features.shape, weights.shape[0]
    row_tile, rows_p, class_tile, classes_p, width_p = _tiles(rows, classes, width, block)
    f = jnp.pad(features, ((0, rows_p - rows), (0, width_p - width)))
    w = jnp.pad(weights, ((0, classes_p - classes), (0, width_p - width)))
    y = jnp.pad(targets.astype(jnp.int32), (0, rows_p - rows), constant_values=-1)
    active = jnp.pad(class_mask, (0, classes_p - classes))
    ids = jnp.where(active, jnp.arange(classes_p, dtype=jnp.int32), NOT_A_CLASS)
    bias = jnp.where(active, 0.0, -jnp.inf).astype(features.dtype)
    return f, w, y, ids, bias, row_tile, class_tile


def _output(shape: tuple, like) -> jax.ShapeDtypeStruct:
    """A kernel output of `shape` (float32) that varies over a shard_map's axes as `like` does (the engine
    runs its vmapped programs inside one)."""
    return jax.ShapeDtypeStruct(shape, jnp.float32, manual_axis_type=jax.typeof(like).manual_axis_type)


def _logits(f, w, bias):
    """A tile's logits f wᵀ (rows × classes), −inf on masked classes."""
    z = jax.lax.dot_general(f, w, (((1,), (1,)), ((), ())), preferred_element_type=jnp.float32)
    return z + bias[None, :]


def _dlogits(f, w, bias, ids, y, lse, coef):
    """coef · (softmax − onehot) on a tile, 0 on masked classes (where coef may be NaN)."""
    z = _logits(f, w, bias)
    hit = (y[:, None] == ids[None, :]).astype(z.dtype)
    dz = coef[:, None] * (jnp.exp(z - lse[:, None]) - hit)
    return jnp.where(bias[None, :] == 0.0, dz, 0.0)


def _statistics_kernel(f_ref, w_ref, bias_ref, ids_ref, y_ref, m_ref, s_ref, t_ref, *, class_tile, blocks):
    f, y = f_ref[...], y_ref[...]

    def step(j, carry):
        m, s, t = carry
        cols = pl.ds(pl.multiple_of(j * class_tile, class_tile), class_tile)
        z = _logits(f, w_ref[cols, :], bias_ref[cols])
        new_m = jnp.maximum(m, jnp.max(z, axis=1))
        shift = jnp.where(new_m == -jnp.inf, 0.0, new_m)  # no active class yet: keep exp() finite
        s = s * jnp.exp(m - shift) + jnp.sum(jnp.exp(z - shift[:, None]), axis=1)
        hit = y[:, None] == ids_ref[cols][None, :]
        return new_m, s, t + jnp.sum(jnp.where(hit, z, 0.0), axis=1)

    zero = jnp.zeros(f.shape[0], jnp.float32)
    m, s, t = jax.lax.fori_loop(0, blocks, step, (zero - jnp.inf, zero, zero))
    m_ref[...], s_ref[...], t_ref[...] = m, s, t


def statistics(features, weights, targets, class_mask, block: int):
    """Per row of features (N, d) against weights (M, d): (max logit, Σ exp(z − max), target logit) over
    the classes in `class_mask`, as blocked_softmax's scan gives them, with no logits in memory."""
    rows = features.shape[0]
    f, w, y, ids, bias, row_tile, class_tile = _padded(features, weights, targets, class_mask, block)
    row = pl.BlockSpec((row_tile,), lambda i: (i,))
    whole = pl.BlockSpec(w.shape, lambda i: (0, 0))
    classes = pl.BlockSpec(ids.shape, lambda i: (0,))
    out = _output((f.shape[0],), f)
    kernel = pl.pallas_call(
        lambda *refs: _statistics_kernel(*refs, class_tile=class_tile, blocks=w.shape[0] // class_tile),
        grid=(f.shape[0] // row_tile,),
        in_specs=[pl.BlockSpec((row_tile, f.shape[1]), lambda i: (i, 0)), whole, classes, classes, row],
        out_specs=[row, row, row],
        out_shape=[out, out, out],
        **_compiled_as(),
        name="softmax_statistics",
    )
    m, s, t = kernel(f, w, bias, ids, y)
    return m[:rows], s[:rows], t[:rows]


def _feature_grad_kernel(f_ref, w_ref, bias_ref, ids_ref, y_ref, lse_ref, coef_ref, out_ref, *, class_tile, blocks):
    f, y, lse, coef = f_ref[...], y_ref[...], lse_ref[...], coef_ref[...]

    def step(j, acc):
        cols = pl.ds(pl.multiple_of(j * class_tile, class_tile), class_tile)
        w = w_ref[cols, :]
        dz = _dlogits(f, w, bias_ref[cols], ids_ref[cols], y, lse, coef)
        return acc + jax.lax.dot_general(dz, w, (((1,), (0,)), ((), ())), preferred_element_type=jnp.float32)

    out_ref[...] = jax.lax.fori_loop(0, blocks, step, jnp.zeros(f.shape, jnp.float32))


def _weight_grad_kernel(f_ref, w_ref, bias_ref, ids_ref, y_ref, lse_ref, coef_ref, out_ref, *, row_tile, tiles):
    w, bias, ids = w_ref[...], bias_ref[...], ids_ref[...]

    def step(i, acc):
        rows = pl.ds(pl.multiple_of(i * row_tile, row_tile), row_tile)
        f = f_ref[rows, :]
        dz = _dlogits(f, w, bias, ids, y_ref[rows], lse_ref[rows], coef_ref[rows])
        return acc + jax.lax.dot_general(dz, f, (((0,), (0,)), ((), ())), preferred_element_type=jnp.float32)

    out_ref[...] = jax.lax.fori_loop(0, tiles, step, jnp.zeros(w.shape, jnp.float32))


def gradients(features, weights, targets, class_mask, lse, coef, block: int):
    """(d features, d weights) of Σ_r coef_r · nll_r, from the rows' log-sum-exp `lse`: blocked_softmax's
    backward pass, each logit tile recomputed on chip."""
    (rows, width), classes = features.shape, weights.shape[0]
    f, w, y, ids, bias, row_tile, class_tile = _padded(features, weights, targets, class_mask, block)
    pad = (0, f.shape[0] - rows)
    lse_p, coef_p = jnp.pad(lse, pad), jnp.pad(coef, pad)  # padded rows: coef 0
    operands = (f, w, bias, ids, y, lse_p, coef_p)
    row_tiles, class_blocks = f.shape[0] // row_tile, w.shape[0] // class_tile

    def row_tile_spec(*block_shape):
        return pl.BlockSpec((row_tile, *block_shape), lambda i: (i,) + (0,) * len(block_shape))

    def whole(array):
        return pl.BlockSpec(array.shape, lambda i: (0,) * array.ndim)

    d_features = pl.pallas_call(
        lambda *refs: _feature_grad_kernel(*refs, class_tile=class_tile, blocks=class_blocks),
        grid=(row_tiles,),
        in_specs=[row_tile_spec(f.shape[1]), whole(w), whole(bias), whole(ids)] + [row_tile_spec()] * 3,
        out_specs=row_tile_spec(f.shape[1]),
        out_shape=_output(f.shape, f),
        **_compiled_as(),
        name="softmax_feature_grad",
    )(*operands)

    def class_block_spec(*block_shape):
        return pl.BlockSpec((class_tile, *block_shape), lambda j: (j,) + (0,) * len(block_shape))

    d_weights = pl.pallas_call(
        lambda *refs: _weight_grad_kernel(*refs, row_tile=row_tile, tiles=row_tiles),
        grid=(class_blocks,),
        in_specs=[whole(f), class_block_spec(w.shape[1]), class_block_spec(), class_block_spec()]
        + [whole(y), whole(lse_p), whole(coef_p)],
        out_specs=class_block_spec(w.shape[1]),
        out_shape=_output(w.shape, w),
        **_compiled_as(),
        name="softmax_weight_grad",
    )(*operands)
    return d_features[:rows, :width].astype(features.dtype), d_weights[:classes, :width].astype(weights.dtype)
