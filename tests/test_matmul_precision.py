"""engine.matmul_precision: "highest" by default (fingerprints of before the setting unchanged), a faster
precision is another sweep (its own fingerprint), reaches the traced program and is recorded in the report."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from helpers import ROOT
from jaxmem.engine.program import Settings, jax_matmul_precision, matmul_precision
from jaxmem.report.from_store import meta_view
from jaxmem.spec.sweep import SpecError, load, parse, read_toml

TINY = ROOT / "tests" / "specs" / "tiny_linear.toml"


def with_engine(**engine):
    data = read_toml(TINY)
    return parse({**data, "engine": {**data.get("engine", {}), **engine}}, name="tiny_linear")


def test_highest_is_the_default_and_keeps_the_fingerprint():
    assert load(TINY).engine.matmul_precision == "highest"
    assert with_engine(matmul_precision="highest").fingerprint == load(TINY).fingerprint


def test_a_faster_precision_is_another_sweep():
    assert with_engine(matmul_precision="bf16").fingerprint != load(TINY).fingerprint


def test_an_unknown_precision_is_refused():
    with pytest.raises(SpecError, match="engine.matmul_precision: must be one of"):
        with_engine(matmul_precision="fp8")


def test_the_precision_reaches_the_traced_matmuls():
    x = jnp.asarray(np.ones((4, 4), np.float32))
    texts = {}
    for name in ("highest", "tf32", "bf16"):
        with matmul_precision(Settings(1, 1, "accuracy", 1.0, 1.0, matmul_precision=name), "tpu"):
            texts[name] = jax.jit(lambda a: a @ a).lower(x).as_text()
    assert "lhs_precision_type = bf16" in texts["bf16"] and "HIGHEST" in texts["highest"] != texts["tf32"]


def test_each_platform_gets_a_precision_it_has():
    named = {(p, k): jax_matmul_precision(p, k) for p in ("highest", "tf32", "bf16") for k in ("cpu", "gpu", "tpu")}
    assert named[("tf32", "gpu")] == "TF32_TF32_F32" and named[("tf32", "cpu")] == "highest"
    assert named[("bf16", "gpu")] == "BF16_BF16_F32" and named[("highest", "tpu")] == "highest"
    assert named[("bf16", "cpu")] == "highest", "a CPU emulates bf16 (engine/emulated_precision.py)"


def test_the_report_names_the_precision():
    stored = '{"engine": {"matmul_precision": "tf32"}}'
    assert meta_view({"resolved_spec": stored}, {}, [])["matmul_precision"] == "tf32"
    assert meta_view({}, {}, [])["matmul_precision"] == "highest"
