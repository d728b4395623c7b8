"""The accelerator check's pure parts: its byte model, its acceptance verdicts and the report assembled
from canned JSON records (no case is run, nothing is compiled)."""

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import gpu_check as G  # noqa: E402

from jaxmem.experiments.registry import get as get_experiment  # noqa: E402

COPY = 3.0e12  # bytes/s
MLP = G.FULL.saturation[0]


def test_byte_model_is_six_passes_over_the_float32_logits():
    assert G.logit_bytes_per_step(512, 512) == 6 * 512 * 512 * 4
    assert G.logit_bytes_per_step(256, 128, itemsize=8) == 6 * 256 * 128 * 8


@pytest.mark.parametrize("sat", G.FULL.saturation + G.SMOKE.saturation, ids=lambda s: s.name)
def test_every_saturation_case_has_flops_and_logits(sat):
    exp = get_experiment(sat.experiment)
    effective = exp.effective(exp.complete(sat.config))
    rows, classes = G.LOGIT_SHAPES[sat.experiment](effective)
    assert rows > 0 and classes > 0 and exp.cost("flops_per_step", effective) > 0


def test_the_acceptance_case_is_the_issues_mlp_step():
    assert MLP.config == {"model": "mlp", "d": 16, "m": 32, "N": 512} and MLP.acceptance_slots == 256
    assert min(MLP.slots) >= 256


def test_the_whole_check_fits_eight_minutes_and_the_unbounded_case_runs_last():
    cases = G.FULL.cases()
    assert G.FULL.budget_s <= 8 * 60
    assert cases[-1] == "jaxmem/mlp" and G.case_cap("jaxmem/mlp", G.FULL) == G.FULL.budget_s  # the time left
    assert all(G.case_cap(c, G.FULL) < G.FULL.budget_s / 2 for c in cases[:-1])


def saturation(step_s_by_slots: dict) -> dict:
    rows = [
        {"slots": k, "compile_s": 9.0, "peak_bytes": 0, "segment_steps": 256, "step_s": v}
        for k, v in step_s_by_slots.items()
    ]
    bytes_per_step = G.logit_bytes_per_step(512, 512)
    return {
        "config": MLP.config,
        "eval_every": 256,
        "flops_per_step": 2.8e7,
        "logit_shape": [512, 512],
        "logit_bytes_per_step": bytes_per_step,
        "acceptance_slots": 256,
        "rows": rows,
    }


def step_for_share(slots: int, share: float) -> float:
    return G.logit_bytes_per_step(512, 512) * slots / (share * COPY)


def test_bandwidth_verdict_reads_the_best_row_at_enough_slots():
    peaks = {"copy_bytes_per_s": COPY, "matmul_flops": 4e14, "matmul_flops_highest": 5e13}
    passing = saturation({128: step_for_share(128, 0.9), 256: step_for_share(256, 0.31)})
    failing = saturation({128: step_for_share(128, 0.9), 256: step_for_share(256, 0.29)})
    assert G.bandwidth_verdict(passing, peaks) == ("PASS", "31.0% at 256 slots")
    assert G.bandwidth_verdict(failing, peaks)[0] == "FAIL"  # 128 slots are below the acceptance's 256
    assert G.bandwidth_verdict(passing, None)[0] == "not run"


def test_flops_share_is_against_the_peak_at_the_engines_default_precision():
    """The engine traces at matmul_precision 'highest' by default, so its FLOP/s is set against that peak,
    not against JAX's default (TF32) one."""
    peaks = {"copy_bytes_per_s": COPY, "matmul_flops": 4e14, "matmul_flops_highest": 5e13}
    (row,) = G.saturation_rows(saturation({256: 1e-3}), peaks)
    assert row["flops_share"] == pytest.approx(2.8e7 * 256 / 1e-3 / 5e13)


def timed(seconds: float, status: str = "ok") -> dict:
    return {"process_s": seconds, "status": status}


@pytest.mark.parametrize(
    "jaxmem, protocol, verdict",
    [
        (timed(20), timed(100), "PASS"),
        (timed(30), timed(100), "FAIL"),
        (timed(40, "timeout"), timed(100), "FAIL"),  # already slower than 0.25 × the protocol
        (timed(20, "timeout"), timed(100), "undecided (timed out)"),
        (timed(20), timed(90, "timeout"), "PASS"),  # the protocol took at least 90 s
        (timed(30), timed(90, "timeout"), "undecided (timed out)"),
        (timed(20), {"status": "skipped"}, "not run"),
        (None, timed(100), "not run"),
    ],
)
def test_speed_verdict_uses_timeouts_as_lower_bounds(jaxmem, protocol, verdict):
    assert G.speed_verdict(jaxmem, protocol, 0.25) == verdict


def test_capacity_verdict_compares_the_median_over_seeds():
    protocol = {"capacity": {"8": {"0": 100.0}, "11": {"0": 40.0}}}
    close = {"capacity": {"8": {"0": 90.0, "1": 104.0, "11": 105.0}, "11": {"0": 41.0}}}
    far = {"capacity": {"8": {"0": 100.0}, "11": {"0": 42.4}}}
    assert G.capacity_verdict(close, protocol) == ("PASS", "at most 4.0%")
    assert G.capacity_verdict(far, protocol) == ("FAIL", "at most 6.0%")
    assert G.capacity_verdict(None, protocol)[0] == "not run"


def canned(mode: str) -> list[dict]:
    device = {"kind": "NVIDIA H200", "platform": "gpu", "count": 1, "jax": "0.11.2 / 0.11.2", "python": "3.12.3"}
    ds = G.MODES[mode].grids["linear"]["d"]
    plan = {"probes": 11, "programs": 1, "estimate_s": 27.3, "describe": ["plan for 1 gpu device(s): 1 compile(s)"]}
    return [
        {"case": "meta", "mode": mode, "started": 1.8e9, "budget_s": 465.0, "core": None, "host_cores": 16},
        {
            "case": "peaks",
            "status": "ok",
            "process_s": 9.0,
            "timeout_s": 60,
            "result": {
                "matmul_n": 8192,
                "matmul_flops": 4e14,
                "matmul_flops_highest": 5e13,
                "copy_mib": 256.0,
                "copy_bytes_per_s": COPY,
                "repeats": 20,
                "device": device,
            },
        },
        {
            "case": MLP.case,
            "status": "ok",
            "process_s": 30.0,
            "timeout_s": 60,
            "result": {**saturation({256: step_for_share(256, 0.12)}), "device": device},
        },
        {
            "case": "protocol/linear",
            "status": "ok",
            "process_s": 40.0,
            "timeout_s": 90,
            "result": {
                "capacity": {str(d): {"0": 10.0 * d} for d in ds},
                "compiles": 70,
                "runs": 35,
                "steps": 77152,
                "device": device,
            },
        },
        {
            "case": "jaxmem/linear",
            "status": "ok",
            "process_s": 9.0,
            "timeout_s": 90,
            "result": {
                "capacity": {str(d): {"0": 10.0 * d, "1": 10.2 * d} for d in ds},
                "compiles": 1,
                "compile_s": 6.5,
                "runs": 300,
                "steps": 500000,
                "plan": plan,
                "device": device,
            },
        },
        {
            "case": "protocol/mlp",
            "status": "ok",
            "process_s": 76.0,
            "timeout_s": 150,
            "result": {"capacity": {"8": {"0": 100.0}}, "compiles": 20, "runs": 10, "steps": 9000, "device": device},
        },
        {
            "case": "jaxmem/mlp",
            "status": "timeout",
            "process_s": 190.0,
            "timeout_s": 190.0,
            "status_detail": "[jaxmem] runs 10 done / searches 0/15",
        },
    ]


def test_report_names_the_device_and_every_verdict():
    text = G.markdown(canned("full"))
    assert "| device | NVIDIA H200 (gpu x1) |" in text and "CPU SMOKE RUN" not in text
    assert "linear: jaxmem default (5 seeds): 9.0 s; the protocol, one seed: 40.0 s (target ≤ 0.25×): **PASS**" in text
    assert "differs from the protocol's by at most 1.0% (target ≤ 5% at every d): **PASS**." in text
    assert "> 190 s (timed out); the protocol, one seed: 76.0 s (target ≤ 0.33×): **FAIL**." in text
    assert "logits bytes/s 12.0% at 256 slots of the copy bandwidth (target ≥ 30%): **FAIL**." in text
    assert "| 11 / 1 |" in text  # the planner's probes per round and programs in the jaxmem row
    assert "| peaks | gpu (NVIDIA H200) | ok | 9.0 | 60 |  |" in text  # each case's own device
    assert "| 256 | 9.0 |" in text and "| 12.0% |" in text  # the saturation row: slots, compile s, % copy


def test_a_smoke_report_says_so():
    assert "CPU SMOKE RUN" in G.markdown(canned("smoke"))


def test_device_records_become_the_planners_throughput_rows(tmp_path):
    """bench_throughput.py --from-device: saturated programs and 'highest' paper buckets become rows of the
    device kind, the 1-slot program its step floor; rerunning it replaces them; other devices' rows stay."""
    import bench_throughput as T
    from jaxmem.plan import throughput
    from jaxmem.plan.target import named

    h200 = {"kind": "NVIDIA H200", "platform": "gpu", "count": 1, "jax": "0.11.2 / 0.11.2"}
    bucket = {"padded_flops_per_step": 4e11, "slots": 1, "step_s": 0.01, "compile_s": 15.0, "device": h200}
    records = [
        {"case": "meta", "started": 1.8e9},
        {"case": "saturation/assoc_memory-mlp", "result": {**saturation({256: 1e-3}), "device": h200}},
        {"case": "saturation/assoc_memory-mlp-few", "result": {**saturation({1: 5e-5, 32: 2e-4}), "device": h200}},
        {"case": "bucket/fig1_linear", "result": {**bucket, "precision": "highest"}},
        {"case": "bucket/fig1_linear-tf32", "result": {**bucket, "precision": "tf32"}},
    ]
    jsonl, table = tmp_path / "check.jsonl", tmp_path / "throughput.json"
    jsonl.write_text("".join(json.dumps(r) + "\n" for r in records))
    table.write_text(json.dumps({"cpu (2 cores)": {"families": {}}}))
    for _ in range(2):
        T.from_device([jsonl], table)
    measured = json.loads(table.read_text())
    rows = measured["NVIDIA H200"]["families"]["assoc_memory"]
    assert "cpu (2 cores)" in measured and measured["NVIDIA H200"]["step_floor_seconds"] == 5e-5
    assert [(r["slots"], r["flops_per_second"]) for r in rows] == [(256, 2.8e7 * 256 / 1e-3), (1, 4e11 / 0.01)]
    rate = throughput.rate(named("h200"), "assoc_memory", 2.8e7, measured)
    assert (rate.step_seconds, rate.flops_per_second, rate.compile_seconds) == (5e-5, 2.8e7 * 256 / 1e-3, 9.0)


def test_a_loss_paths_case_gives_no_row_and_compiles_inside_sweeps_are_charged_and_kept(tmp_path):
    """A saturation case with a loss_block measures a loss path, not the planner's program: no row. A device's
    sweep_compile_seconds (benchmarks/compile_costs.py) survive its rows being measured again, and a compile of
    that family costs them; another family's the nearest row's."""
    import bench_throughput as T
    from jaxmem.plan import throughput
    from jaxmem.plan.target import named

    h200 = {"kind": "NVIDIA H200", "platform": "gpu", "count": 1, "jax": "0.11.2 / 0.11.2"}
    blocked = {**saturation({256: 9e-4}), "config": {**MLP.config, "loss_block": 128}, "device": h200}
    records = [
        {"case": "meta", "started": 1.8e9},
        {"case": "saturation/assoc_memory-mlp", "result": {**saturation({256: 1e-3}), "device": h200}},
        {"case": "saturation/assoc_memory-mlp-blocked", "result": blocked},
    ]
    jsonl, table = tmp_path / "check.jsonl", tmp_path / "throughput.json"
    jsonl.write_text("".join(json.dumps(r) + "\n" for r in records))
    table.write_text(json.dumps({"NVIDIA H200": {"families": {}, "sweep_compile_seconds": {"assoc_memory": 12.5}}}))
    T.from_device([jsonl], table)
    measured = json.loads(table.read_text())
    assert [r["step_seconds"] for r in measured["NVIDIA H200"]["families"]["assoc_memory"]] == [1e-3]
    assert throughput.rate(named("h200"), "assoc_memory", 2.8e7, measured).compile_seconds == 12.5
    assert throughput.rate(named("h200"), "factual_recall", 2.8e7, measured).compile_seconds == 9.0


def test_a_reused_case_is_taken_from_the_earlier_records_not_run(tmp_path):
    """--reuse: paper_scale_check takes gpu_check's peaks of the same call instead of measuring them again."""
    peaks = {
        "case": "peaks",
        "status": "ok",
        "process_s": 18.0,
        "status_detail": "from RESULTS_gpu_throughput.jsonl",
        "result": {
            "matmul_n": 8192,
            "matmul_flops": 3.8e14,
            "matmul_flops_highest": 5.1e13,
            "copy_mib": 256.0,
            "copy_bytes_per_s": COPY,
            "repeats": 20,
            "wall_s": 12.0,
            "device": {
                "kind": "NVIDIA H200",
                "platform": "gpu",
                "count": 1,
                "jax": "0.11.2 / 0.11.2",
                "python": "3.12.3",
            },
        },
    }
    out = tmp_path / "check.md"
    records = G.run_all(G.SMOKE, ["peaks"], out, out.with_suffix(".jsonl"), 1.0, None, reused={"peaks": peaks})
    assert records[1]["result"] == peaks["result"] and records[1]["status_detail"].startswith("reused: from RESULTS")
    assert "| peaks | gpu (NVIDIA H200) | ok | 18.0 |" in out.read_text()


def test_the_step_verdict_takes_the_fastest_loss_path_of_the_acceptance_program():
    """Dense, XLA's blocked loss and the fused kernels are one program to the issue's step target; the
    verdict names the path that met it. Another shape never counts."""
    fused = G.FULL.saturation_of("saturation/assoc_memory-mlp-fused")
    assert {k: v for k, v in fused.config.items() if k not in G.LOSS_PATH} == MLP.config
    found = [
        (MLP, saturation({256: 1.1e-3})),
        (fused, {**saturation({256: 3.0e-4}), "config": fused.config}),
        (MLP, {**saturation({256: 1e-4}), "config": {**MLP.config, "N": 256}}),  # another program
    ]
    assert G.step_verdict(found, MLP) == ("PASS", "300 µs at 256 slots, loss_block 128, pallas kernels")
    assert G.step_verdict(found[:1], MLP) == ("FAIL", "1100 µs at 256 slots, dense loss")


def test_a_pinned_k_case_gets_its_row_and_the_planners_choice_is_judged_by_wall_time():
    assert "jaxmem-k7/mlp" in G.FULL.cases() and G.pinned_probes("jaxmem-k7") == 7 and not G.pinned_probes("jaxmem")
    records = canned("full")
    linear = next(r for r in records if r["case"] == "jaxmem/linear")
    plan7 = {**linear["result"]["plan"], "probes": 7}
    records.append(
        {**linear, "case": "jaxmem-k7/linear", "process_s": 12.0, "result": {**linear["result"], "plan": plan7}}
    )
    text = G.markdown(records)
    assert "| jaxmem, K = 7 pinned (5 seeds) | 12.0 |" in text and "| 7 / 1 |" in text
    assert "linear: the planner's K (11) against K = 7 pinned: 9.0 s against 12.0 s" in text
    assert "the planner's choice is the faster (0.75×; within 5 % is as fast)" in text
    assert "mlp: the planner's K (?) against K = 7 pinned: not run." in text
