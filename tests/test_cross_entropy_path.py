"""The loss path of each family with a softmax over many classes: the blocked (on-chip) loss equals the
dense one in value and gradients to relative 1e-5, padded rows and classes included; the planner takes the
path measured fastest on the device kind (jaxmem/plan/cross_entropy.json), memory first."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxmem.experiments.blocked_softmax import logits_bytes
from jaxmem.experiments.nichani24 import assoc_memory, factual_recall
from jaxmem.plan import loss_blocks
from jaxmem.plan.buckets import static_shape, traced_values
from jaxmem.plan.loss_blocks import DENSE, MARGIN, LossPath, choose_loss_path, fastest_path, measured_cases
from jaxmem.plan.runs import run_key

PAD = lambda n, *_: 2 * n + 3  # noqa: E731  (padded rows and classes, blocks of 16 that do not divide them)
ASSOC = [  # (config, loss form): every model, both loss forms
    ({"model": "linear", "d": 6, "N": 40}, "log_softmax"),
    ({"model": "lowrank", "d": 6, "m": 3, "N": 40, "M": 30}, "log_softmax"),
    ({"model": "mlp", "d": 6, "m": 10, "N": 40}, "log_of_softmax"),
]
FACTS = {"S": 5, "R": 3, "D": 3, "d": 12, "H": 2, "d_h": 4, "m": 10, "T": 8, "batch": 64, "test_size": 64}


PATHS = ((0, "xla"), (16, "xla"), (16, "pallas"))  # (loss_block, loss_kernel): dense first; Pallas interpreted


def loss_grads_metrics(exp, config: dict, block: int, kernel: str):
    """The family's loss, its gradients and its metrics at init, sizes padded by PAD, on the loss path
    (`block`, `kernel`) (traced only, to be jitted by the caller)."""
    config = exp.effective(config)
    shape = static_shape(exp, {**config, "loss_block": block, "loss_kernel": kernel}, PAD)
    dyn = {k: jnp.asarray(v) for k, v in traced_values(exp, config).items()}
    key = run_key(0, 3)
    params, problem = exp.init(key, shape, dyn)
    return jax.value_and_grad(exp.loss)(params, problem, shape, dyn, key), exp.evaluate(params, problem, shape, dyn)


@pytest.fixture(scope="session")
def both_paths():
    """Loss, gradients and metrics of every case on each of PATHS, in one compiled program."""
    cases = [(assoc_memory.EXPERIMENT, {**c, "loss_form": form}) for c, form in ASSOC]
    cases.append((factual_recall.EXPERIMENT, FACTS))
    return jax.jit(lambda: [[loss_grads_metrics(exp, config, *path) for path in PATHS] for exp, config in cases])()


@pytest.mark.parametrize("path", range(1, len(PATHS)), ids=[f"{k}-{b}" for b, k in PATHS[1:]])
@pytest.mark.parametrize("case", range(len(ASSOC) + 1), ids=[c["model"] for c, _ in ASSOC] + ["factual_recall"])
def test_the_blocked_loss_equals_the_dense_one_in_value_gradients_and_metrics(both_paths, case, path):
    ((want, want_grads), want_metrics), ((got, got_grads), got_metrics) = both_paths[case][0], both_paths[case][path]
    assert np.isfinite(want) and set(got_grads) == set(want_grads)
    np.testing.assert_allclose(got, want, rtol=1e-5)
    for name in want_grads:
        scale = float(jnp.max(jnp.abs(want_grads[name])))
        np.testing.assert_allclose(got_grads[name], want_grads[name], rtol=1e-5, atol=1e-5 * scale, err_msg=name)
    for name in want_metrics:  # the blocked argmax behind the accuracies included
        np.testing.assert_allclose(got_metrics[name], want_metrics[name], rtol=1e-5, atol=1e-6, err_msg=name)


def path(block, step_seconds, compile_seconds=1.0):
    return {"block": block, "step_seconds": step_seconds, "compile_seconds": compile_seconds}


CASES = (
    {"family": "assoc_memory", "dense_logits_bytes": 2e6, "paths": [path(0, 1.0), path(128, 2.0)]},
    {"family": "assoc_memory", "dense_logits_bytes": 1e8, "paths": [path(0, 4.0), path(128, 1.0), path(512, 3.0)]},
    {"family": "factual_recall", "dense_logits_bytes": 2e6, "paths": [path(0, 2.0), path(512, 1.0)]},
)


def test_the_cheapest_path_of_the_nearest_measured_case():
    assoc = measured_cases("cpu (2 cores)", "assoc_memory", {"cpu (2 cores)": {"cases": list(CASES)}})
    assert len(assoc) == 2, "a family's own cases only"
    assert fastest_path(assoc, 1e6).block == 0 and fastest_path(assoc, 5e7).block == 128
    assert measured_cases("cpu (2 cores)", "other", {"cpu (2 cores)": {"cases": list(CASES)}}) == CASES
    assert measured_cases("NVIDIA H200", "assoc_memory", {"cpu (2 cores)": {"cases": list(CASES)}}) == ()
    assert fastest_path((), 1e6) == DENSE and fastest_path(assoc, float("nan")) == DENSE


def test_a_measured_kernel_is_a_path_of_its_own():
    """The fused kernels at the same block are another path: taken where they measured cheapest, and a
    measured path naming no kernel is XLA's."""
    fused = {**path(128, 0.5), "kernel": "pallas"}
    case = {"dense_logits_bytes": 1.0, "paths": [path(0, 1.0), path(128, 0.8), fused]}
    assert fastest_path((case,), 1.0, steps=100) == LossPath(128, "pallas") == (128, "pallas")
    case["paths"][2] = {**fused, "step_seconds": 0.9}
    assert fastest_path((case,), 1.0, steps=100) == (128, "xla")
    assert LossPath(128, "pallas").entries == {"loss_block": 128, "loss_kernel": "pallas"}


def test_a_blocked_path_must_beat_dense_by_the_margin_compile_included():
    tie = ({"dense_logits_bytes": 1.0, "paths": [path(0, 1.0, 0.0), path(128, 1.0 / (0.99 * MARGIN), 0.0)]},)
    assert fastest_path(tie, 1.0, steps=100).block == 0, "within the margin: dense"
    slow_compile = ({"dense_logits_bytes": 1.0, "paths": [path(0, 1.0, 1.0), path(128, 0.5, 50.0)]},)
    assert fastest_path(slow_compile, 1.0, steps=10) == DENSE
    assert fastest_path(slow_compile, 1.0, steps=1000) == (128, "xla")
    fast_compile = ({"dense_logits_bytes": 1.0, "paths": [path(0, 1.0, 9.0), path(512, 1.5, 1.0)]},)
    assert fastest_path(fast_compile, 1.0, steps=0).block == 0, "a slower step never wins on its compile alone"


def test_memory_decides_before_the_measured_rates():
    exp = assoc_memory.EXPERIMENT
    config = exp.effective({"model": "mlp", "d": 16, "m": 32, "N": 4096})
    dense = logits_bytes(4096, 4096, 0)
    assert choose_loss_path(exp, config, 2 * dense, 1, CASES[:2], steps=100).block == 128  # nearest: 1e8 bytes
    assert choose_loss_path(exp, config, 2 * dense, slots=1).block == 0  # unmeasured: dense
    assert choose_loss_path(exp, config, dense / 4, 1, CASES[:2], steps=100).block == 1024  # the widest that fits


def test_an_accelerators_layout_reads_its_device_kinds_rates_and_a_cpus_keeps_dense(monkeypatch):
    """A measured speed table chooses the loss path on an accelerator only: on a CPU it would change the
    numbers of the shipped quick results (fig1_mlp quick: two capacities moved, 286 to 278 and 282)."""
    from helpers import ROOT
    from jaxmem.plan.layout import Knobs, Layout
    from jaxmem.spec.sweep import load

    spec = load(ROOT / "tests" / "specs" / "tiny_linear.toml")
    exp = assoc_memory.EXPERIMENT
    fused = {
        **CASES[1],
        "dense_logits_bytes": 1.0,
        "paths": [*CASES[1]["paths"], {**path(256, 0.5), "kernel": "pallas"}],
    }
    blocked = {kind: {"cases": [fused]} for kind in ("h200", "cpu (2 cores)")}
    monkeypatch.setattr(loss_blocks, "table", lambda: blocked)  # fused kernels fastest everywhere measured

    def loss_path(platform: str, device: str) -> tuple:
        layout = Layout(spec, exp, Knobs.of_spec(spec), platform, 1, 1e12, device=device)
        shape = layout.padded_bucket(spec.points[0]).shape_dict
        return shape["loss_block"], shape["loss_kernel"]

    assert loss_path("gpu", "h200") == (256, "pallas")
    assert loss_path("gpu", "") == DENSE  # a device kind never measured
    assert loss_path("cpu", "cpu (2 cores)") == DENSE
