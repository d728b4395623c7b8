"""Reduced-precision matmuls emulated on a device that computes every f32 matmul in full.

XLA's CPU backend ignores the matmul precision it is given (benchmarks/RESULTS_precision_cpu.md:
"honoured: no"), so a sweep at `engine.matmul_precision = "tf32"` or `"bf16"` would silently run at
'highest' there. Emulation makes the CPU compute what the accelerator computes: each operand of every
f32 `dot_general` is rounded to nearest even to a 10-bit (TF32) or 7-bit (BF16) mantissa with an 8-bit
exponent (`lax.reduce_precision`), and the product accumulates in f32, as the accelerator's
TF32_TF32_F32 / BF16_BF16_F32 algorithms do.

One mechanism for every family: the traced program's jaxpr is rewritten, every `dot_general` in it and
in each of its sub-jaxprs (loops, scans, branches, shard_map bodies, custom derivatives' forward calls;
the backward pass is already traced into the program, so its matmuls are rounded too) gets its float32
operands rounded first. Nothing else in the program changes.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.extend import core

MANTISSA_BITS = {"tf32": 10, "bf16": 7}  # explicit mantissa bits of the rounded operands
EXPONENT_BITS = 8  # TF32 and BF16 keep f32's exponent range


def _rounding(var, bits: int) -> tuple:
    """(the rounded copy of `var`, the equation computing it)."""
    rounded = core.Var(var.aval)
    params = {"exponent_bits": EXPONENT_BITS, "mantissa_bits": bits}
    eqn = core.new_jaxpr_eqn([var], [rounded], jax.lax.reduce_precision_p, params, core.no_effects)
    return rounded, eqn


def _is_f32(var) -> bool:
    return not isinstance(var, core.Literal) and getattr(var.aval, "dtype", None) == jnp.float32


def _rewrite_param(value, bits: int):
    """A parameter of an equation with each (closed) jaxpr in it rewritten; anything else as it is."""
    if isinstance(value, core.ClosedJaxpr):
        return value.replace(jaxpr=rounded_dots(value.jaxpr, bits))
    if isinstance(value, core.Jaxpr):
        return rounded_dots(value, bits)
    if isinstance(value, tuple) and any(isinstance(v, (core.Jaxpr, core.ClosedJaxpr)) for v in value):
        return tuple(_rewrite_param(v, bits) for v in value)
    return value


def rounded_dots(jaxpr: core.Jaxpr, bits: int) -> core.Jaxpr:
    """`jaxpr` with the float32 operands of every dot_general (here and in its sub-jaxprs) rounded to
    `bits` mantissa bits before the product."""
    eqns = []
    for eqn in jaxpr.eqns:
        eqn = eqn.replace(params={k: _rewrite_param(v, bits) for k, v in eqn.params.items()})
        if eqn.primitive is jax.lax.dot_general_p:
            invars = []
            for var in eqn.invars:
                if _is_f32(var):
                    var, rounding = _rounding(var, bits)
                    eqns.append(rounding)
                invars.append(var)
            eqn = eqn.replace(invars=invars)
        eqns.append(eqn)
    return jaxpr.replace(eqns=eqns)


def emulated(fn, precision: str):
    """`fn` with its f32 matmuls at `precision` ("tf32" or "bf16"), emulated by rounding their operands
    (see the module doc). Traceable and jittable like `fn`."""
    if precision not in MANTISSA_BITS:
        raise ValueError(f"no emulation of matmul precision {precision!r}; one of {sorted(MANTISSA_BITS)}")
    bits = MANTISSA_BITS[precision]

    def run(*args):
        closed, shape = jax.make_jaxpr(fn, return_shape=True)(*args)
        program = core.jaxpr_as_fun(closed.replace(jaxpr=rounded_dots(closed.jaxpr, bits)))
        return jax.tree.unflatten(jax.tree.structure(shape), program(*jax.tree.leaves(args)))

    return run
