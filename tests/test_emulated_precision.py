"""The CPU's emulation of reduced-precision matmuls (jaxmem/engine/emulated_precision.py): every f32
dot_general of a program, inside loops, scans, branches, vmap, shard_map and gradients, takes operands
rounded to nearest even to 10 (tf32) or 7 (bf16) mantissa bits; nothing else changes; a report says so."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import Mesh, PartitionSpec as P

from jaxmem.engine.emulated_precision import emulated
from jaxmem.engine.program import Settings, at_precision, precision_label
from jaxmem.report.from_store import meta_view

A = jnp.asarray(np.random.default_rng(0).standard_normal((4, 6, 6)), jnp.float32)


def rounded(x, bits):
    return jax.lax.reduce_precision(x, exponent_bits=8, mantissa_bits=bits)


def tanh_sum_grad(w, x, dot):
    """d/dw Σ tanh(w x), written out: the backward matmul's operands are the cotangent and xᵀ."""
    return dot(1 - jnp.tanh(dot(w, x)) ** 2, x.T)


def program(a, dot, grad=tanh_sum_grad):
    """Matmuls in a while loop, a scan, a cond branch, a vmap and a gradient, under shard_map."""

    def local(a):
        def one(x):
            looped = jax.lax.fori_loop(0, 2, lambda i, c: dot(c, x) / 4, x)
            scanned, _ = jax.lax.scan(lambda c, _: (dot(x, c), None), x, length=2)
            branch = jax.lax.cond(x[0, 0] > 0, lambda: dot(x, x.T), lambda: -dot(x.T, x))
            return looped + scanned + branch + grad(x, x, dot) + jnp.sin(x)

        return jax.vmap(one)(a)

    mesh = Mesh(np.array(jax.devices()[:1]), ("runs",))
    return jax.shard_map(local, mesh=mesh, in_specs=P("runs"), out_specs=P("runs"))(a)


@pytest.mark.parametrize("name, bits", [("tf32", 10), ("bf16", 7)])
def test_every_matmul_takes_rounded_operands(name, bits):
    by_hand = jax.jit(lambda a: program(a, lambda x, y: rounded(x, bits) @ rounded(y, bits)))(A)
    autodiff = lambda w, x, dot: jax.grad(lambda w: jnp.sum(jnp.tanh(dot(w, x))))(w)  # noqa: E731
    got = jax.jit(emulated(lambda a: program(a, jnp.matmul, autodiff), name))(A)
    full = jax.jit(lambda a: program(a, jnp.matmul))(A)
    np.testing.assert_array_equal(got, by_hand)
    assert float(jnp.max(jnp.abs(got - full))) > 1e-4, "the emulation changed nothing"


def test_rounding_is_to_nearest_even():
    ties = jnp.asarray([1 + 2**-11, 1 + 3 * 2**-11], jnp.float32)  # halfway between tf32 neighbours
    lhs = jnp.stack([ties, jnp.zeros(2)])
    got = jax.jit(emulated(lambda a, b: a @ b, "tf32"))(lhs, jnp.eye(2, dtype=jnp.float32))
    np.testing.assert_array_equal(got[0], [1.0, 1 + 2**-9])


def test_non_float32_operands_and_other_ops_are_left_alone():
    ints = jnp.arange(6).reshape(2, 3)
    np.testing.assert_array_equal(jax.jit(emulated(lambda a: a @ a.T, "bf16"))(ints), ints @ ints.T)
    x = jnp.asarray([1 + 2**-20], jnp.float32)
    assert jax.jit(emulated(lambda a: a * 3.0, "bf16"))(x)[0] == x[0] * 3.0


def test_an_unknown_precision_is_refused():
    with pytest.raises(ValueError, match="no emulation of matmul precision 'fp8'"):
        emulated(jnp.matmul, "fp8")


def test_only_a_cpu_at_a_reduced_precision_emulates():
    at = lambda name, platform: at_precision(jnp.matmul, Settings(1, 1, "a", 1, 1, matmul_precision=name), platform)  # noqa: E731
    assert at("highest", "cpu") is jnp.matmul and at("tf32", "gpu") is jnp.matmul
    assert at("tf32", "cpu") is not jnp.matmul


def test_the_report_says_how_a_reduced_precision_was_computed():
    meta = {"resolved_spec": '{"engine": {"matmul_precision": "bf16"}}', "device": "cpu x1 (cpu)"}
    assert meta_view(meta, {}, [])["matmul_precision"] == precision_label("bf16", "cpu")
    assert "emulated" in precision_label("bf16", "cpu") and "7-bit" in precision_label("bf16", "cpu")
    assert precision_label("tf32", "gpu") == "tf32 (the device's TF32_TF32_F32 matmuls)"
    assert precision_label("highest", "cpu") == "highest"


def test_the_engine_compiles_a_cpu_bucket_at_bf16_with_rounded_matmuls():
    """compile_program routes the bucket's program through the emulation on a CPU."""
    from jaxmem.engine.executor import compile_program
    from jaxmem.experiments.nichani24 import assoc_memory
    from jaxmem.plan.buckets import bucket_of, padder
    from jaxmem.plan.runs import make_run

    exp = assoc_memory.EXPERIMENT
    run = make_run(exp.complete({"model": "linear", "d": 4, "N": 6}), 0, 0.1, None, None, 0)
    bucket = bucket_of(exp, run.config, padder(2.0))
    settings = Settings(steps=4, eval_every=2, metric="accuracy", hit_threshold=1.0, stop_threshold=2.0,
                        matmul_precision="bf16")  # fmt: skip
    text = compile_program(exp, bucket, settings, 1, run, jax.devices()[:1]).run.as_text()
    assert "reduce-precision" in text  # (at 'highest' `at_precision` leaves the program alone: tested above)
