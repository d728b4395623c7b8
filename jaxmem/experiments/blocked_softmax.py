"""Softmax cross-entropy and argmax over a large set of classes without the N × M logits.

The logits are features @ weightsᵀ (N rows, M classes: u_yᵀ F(e_x) in the associative memories). They
are computed one block of B classes (rows of `weights`) at a time inside a `lax.scan`: the forward pass
keeps a running max and a running sum of exponentials per row (an online log-sum-exp), and the backward
pass (`jax.custom_vjp`) recomputes each block's logits from the log-sum-exp it saved and accumulates the
gradients, so no pass holds more than N × B logits (DESIGN: "What the accelerator says"): with B small
enough, the logits stay in cache and never reach memory. The planner takes it where dense logits would not
fit, or where it was measured faster on an accelerator's device kind (jaxmem/plan/loss_blocks.py,
benchmarks/bench_cross_entropy.py).

Blocks of classes, not of rows: the memory bound N·B then does not grow with the vocabulary, which is
what grows in these experiments (M = N for Fig 1, R·D answers for the factual-recall batch of fixed
size), and each block's slice of `weights` gets its whole gradient inside its own step (written once,
never accumulated); only the N × d feature gradient is carried.

Masks as in the dense loss: classes outside `class_mask` get logit −inf (excluded from the softmax),
rows outside `row_mask` contribute exactly 0 to the loss and its gradients (their features are zeroed
before the logits, so even the authors' log(softmax) cannot send NaN through them). Blocked equals
dense to float32 rounding, for any B (the last block is padded with masked classes).
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp

from jaxmem.experiments import pallas_softmax
from jaxmem.experiments.interface import static

FORMS = ("log_softmax", "log_of_softmax")  # −log softmax(z)[y] computed stably, or the authors' −log(softmax(z)[y])

LOSS_BLOCK = static(
    int,
    "classes per block of the blocked cross-entropy (0: dense logits); set by the planner where the dense "
    "logits would not fit or the blocked loss was measured faster (jaxmem/plan/loss_blocks.py), never part of "
    "a run's identity",
    0,
    minimum=0,
)
KERNELS = ("xla", "pallas")  # the blocked passes as a lax.scan XLA compiles, or as fused Pallas kernels
LOSS_KERNEL = static(
    str,
    "how the blocked cross-entropy runs: 'xla' (a lax.scan over blocks) or 'pallas' (fused kernels that keep "
    "each logit tile on chip: jaxmem/experiments/pallas_softmax.py); set by the planner where measured "
    "faster, never part of a run's identity",
    "xla",
    choices=KERNELS,
)
LOSS_PATH = {"loss_block": LOSS_BLOCK, "loss_kernel": LOSS_KERNEL}  # the derived entries of a family using it


# Logit-sized buffers XLA keeps at once in a jitted value_and_grad: N × M dense, N × B blocked (measured
# on the CPU at N = M = 4096, d = 16: 2.00 × N·M·4 bytes dense; 2.13 × N·B·4 blocked with B = 256).
LOGIT_COPIES = 2


def with_loss_block(config) -> dict:
    """The config with its loss path: `loss_block` (dense, 0) and `loss_kernel` ('xla') unless the planner
    or a caller set them."""
    return {**config, "loss_block": config.get("loss_block", 0), "loss_kernel": config.get("loss_kernel", "xla")}


def logits_bytes(rows: int, classes: int, block: int) -> float:
    """Bytes of the logit-sized temporaries of a cross-entropy of `rows` over `classes` (block 0: dense;
    else `block` classes at a time), in the default float type."""
    width = min(block, classes) if block else classes
    return float(LOGIT_COPIES * rows * width * jax.dtypes.canonicalize_dtype(float).itemsize)


def _blocks(weights: jax.Array, class_mask: jax.Array, block: int):
    """`weights` (M, d) and `class_mask` (M,) as (nb, B, d) and (nb, B) blocks, the last one padded with
    masked classes, and each block's first class."""
    classes = weights.shape[0]
    size = min(block, classes)
    count = -(-classes // size)
    pad = count * size - classes
    w = jnp.pad(weights, ((0, pad), (0, 0))).reshape(count, size, weights.shape[1])
    mask = jnp.pad(class_mask, (0, pad)).reshape(count, size)
    return w, mask, jnp.arange(count) * size


def _block_logits(features, w, mask):
    """One block's logits (N, B), −inf on masked classes."""
    return jnp.where(mask[None, :], features @ w.T, -jnp.inf)


def _is_target(targets, start, size):
    """(N, B): whether class start + j is row i's target."""
    return targets[:, None] == start + jnp.arange(size)


def _log_sum_exp(features, weights, targets, class_mask, block):
    """Per row: the max logit m, Σ exp(z − m) and the target's logit, over the active classes (the scan)."""
    w, mask, starts = _blocks(weights, class_mask, block)

    def step(carry, xs):
        m, s, t = carry
        w_block, mask_block, start = xs
        z, hit = _block_logits(features, w_block, mask_block), _is_target(targets, start, w_block.shape[0])
        new_m = jnp.maximum(m, jnp.max(z, axis=1))
        shift = jnp.where(jnp.isneginf(new_m), 0.0, new_m)  # no active class yet: keep exp() finite
        s = s * jnp.exp(m - shift) + jnp.sum(jnp.exp(z - shift[:, None]), axis=1)
        return (new_m, s, t + jnp.sum(jnp.where(hit, z, 0.0), axis=1)), None

    # Carries made from the features: inside shard_map they then vary over the runs axis like the body's.
    zero = jnp.zeros_like(features[:, 0])
    (m, s, t), _ = jax.lax.scan(step, (zero - jnp.inf, zero, zero), (w, mask, starts))
    return m, s, t


def _row_nll(features, weights, targets, row_mask, class_mask, block, form, kernel):
    """(per-row nll, residuals for the backward pass)."""
    features = jnp.where(row_mask[:, None], features, 0.0)
    statistics = pallas_softmax.statistics if kernel == "pallas" else _log_sum_exp
    m, s, t = statistics(features, weights, targets, class_mask, block)
    lse = m + jnp.log(s)
    if form == "log_of_softmax":
        p_target = jnp.exp(t - m) / s
        nll = -jnp.log(p_target)
        scale = p_target / p_target  # NaN where p underflowed to 0, as autodiff of the dense form gives
    else:
        nll, scale = lse - t, jnp.ones_like(lse)
    return jnp.where(row_mask, nll, 0.0), (features, weights, targets, row_mask, class_mask, lse, scale)


@partial(jax.custom_vjp, nondiff_argnums=(5, 6, 7))
def _blocked_nll(features, weights, targets, row_mask, class_mask, block, form, kernel):
    return _row_nll(features, weights, targets, row_mask, class_mask, block, form, kernel)[0]


def _backward(block, form, kernel, residuals, g):
    """d nll / d z = g·(softmax(z) − onehot(y)) per block, never stored whole (`_scan_gradients`, or
    the fused kernels)."""
    features, weights, targets, row_mask, class_mask, lse, scale = residuals
    coef = jnp.where(row_mask, g * scale, 0.0)
    gradients = pallas_softmax.gradients if kernel == "pallas" else _scan_gradients
    d_features, d_weights = gradients(features, weights, targets, class_mask, lse, coef, block)
    return d_features, d_weights, None, None, None


def _scan_gradients(features, weights, targets, class_mask, lse, coef, block):
    """(d features, d weights) block by block in a scan: each block's dz accumulated into the feature
    gradient and written whole into that block's slice of the weight gradient."""
    w, mask, starts = _blocks(weights, class_mask, block)

    def step(d_features, xs):
        w_block, mask_block, start = xs
        z, hit = _block_logits(features, w_block, mask_block), _is_target(targets, start, w_block.shape[0])
        dz = jnp.where(mask_block[None, :], coef[:, None] * (jnp.exp(z - lse[:, None]) - hit), 0.0)  # masked: 0·NaN
        return d_features + dz @ w_block, dz.T @ features

    d_features, d_w = jax.lax.scan(step, jnp.zeros_like(features), (w, mask, starts))
    return d_features, d_w.reshape(-1, weights.shape[1])[: weights.shape[0]]


_blocked_nll.defvjp(_row_nll, _backward)


def blocked_cross_entropy(
    features, weights, targets, row_mask, class_mask, block: int, form: str = "log_softmax", kernel: str = "xla"
):
    """Per-row −log softmax(features @ weightsᵀ)[targets] over the classes in `class_mask`, computed
    `block` classes at a time (see the module doc); 0 on rows outside `row_mask`. `form`: one of FORMS;
    `kernel`: one of KERNELS. Differentiable in `features` and `weights`; vmaps like any JAX function."""
    if form not in FORMS:
        raise ValueError(f"form must be one of {FORMS}, got {form!r}")
    if kernel not in KERNELS:
        raise ValueError(f"kernel must be one of {KERNELS}, got {kernel!r}")
    if block < 1:
        raise ValueError(f"block must be >= 1, got {block}")
    return _blocked_nll(features, weights, targets, row_mask, class_mask, block, form, kernel)


def blocked_argmax(features, weights, class_mask, block: int) -> jax.Array:
    """argmax over the classes in `class_mask` of features @ weightsᵀ per row, `block` classes at a time;
    ties and NaN resolved as jnp.argmax does (the first maximal index; a NaN is maximal)."""
    w, mask, starts = _blocks(weights, class_mask, block)

    def step(carry, xs):
        best, index = carry
        w_block, mask_block, start = xs
        z = _block_logits(features, w_block, mask_block)
        block_best, block_index = jnp.max(z, axis=1), start + jnp.argmax(z, axis=1)
        better = (block_best > best) | (jnp.isnan(block_best) & ~jnp.isnan(best))
        return (jnp.where(better, block_best, best), jnp.where(better, block_index, index)), None

    zero = jnp.zeros_like(features[:, 0])
    (_, index), _ = jax.lax.scan(step, (zero - jnp.inf, zero.astype(starts.dtype)), (w, mask, starts))
    return index
