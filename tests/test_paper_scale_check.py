"""The paper-scale check's pure parts: its verdicts and the report assembled from canned JSON records (no
case is run, nothing is compiled)."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import paper_scale_check as P  # noqa: E402

from jaxmem.cli.views import load_spec  # noqa: E402
from jaxmem.spec.expr import evaluate  # noqa: E402

PEAKS = {
    "matmul_n": 8192,
    "matmul_flops": 4e14,
    "matmul_flops_highest": 5e13,
    "copy_mib": 256,
    "copy_bytes_per_s": 3e12,
    "repeats": 20,
}
DEVICE = {"kind": "NVIDIA H200", "platform": "gpu", "count": 1, "jax": "0.10.2 / 0.10.2", "python": "3.11.7"}


def bucket(share: float, precision: str = "highest", slots: int = 1) -> dict:
    """A timed bucket whose useful FLOP/s is `share` of the peak at its precision."""
    flops = 4.2e11
    peak = P.peak_for(PEAKS, precision)
    return {
        "config": {"d": 256, "N": 16384, "M": 16384},
        "bucket": {"d": 256, "N": 16384, "loss_block": 0},
        "precision": precision,
        "eval_every": 32,
        "flops_per_step": flops,
        "padded_flops_per_step": flops,
        "slots": slots,
        "compile_s": 8.0,
        "peak_bytes": 2**31,
        "segment_steps": 96,
        "step_s": flops * slots / (share * peak),
        "device": DEVICE,
    }


def ok(case: str, result: dict, process_s: float = 30.0) -> dict:
    return {"case": case, "timeout_s": 75, "process_s": process_s, "status": "ok", "result": result}


def sweep(capacity: dict, sweep_s: float = 100.0, estimate_s: float = 120.0) -> dict:
    return {
        "sets": [],
        "seeds": [0, 1],
        "learning_rates": [10.0],
        "estimate_s": estimate_s,
        "plan": ["plan for gpu"],
        "dry_run_totals": ["first round: 1 runs, 1e9 FLOPs"],
        "sweep_s": sweep_s,
        "runs": 40,
        "capacity": capacity,
        "device": DEVICE,
    }


@pytest.mark.parametrize("precision", ["highest", "tf32"])
def test_flops_verdict_at_the_peak_of_the_buckets_precision(precision):
    assert P.flops_verdict(ok("b", bucket(0.51, precision)), PEAKS)[0] == "PASS"
    assert P.flops_verdict(ok("b", bucket(0.49, precision)), PEAKS)[0] == "FAIL"
    assert P.flops_verdict(ok("b", bucket(0.5, precision, slots=4)), PEAKS)[1].endswith("= 50.0% of the peak")


def test_flops_verdict_out_of_memory_timeout_and_missing():
    oom = {**bucket(0.9), "oom": "RESOURCE_EXHAUSTED: out of memory"}
    del oom["step_s"]
    assert P.flops_verdict(ok("b", oom), PEAKS) == ("FAIL", "out of memory at 1 slot(s)")
    assert P.flops_verdict({"case": "b", "status": "timeout", "process_s": 75}, PEAKS)[0] == "undecided (timed out)"
    assert P.flops_verdict(None, PEAKS)[0] == "not run"
    assert P.flops_verdict(ok("b", bucket(0.9)), None)[0] == "not run"  # no peaks: no share


def test_capacity_verdict_compares_medians_at_shared_d_only():
    quick = sweep({"8": [20.0, 21.0, 22.0], "11": [40.0]})
    close = sweep({"8": [21.0, 21.0, 30.0, 10.0, 21.0], "11": [41.8], "128": [4000.0]})
    far = sweep({"8": [21.0], "11": [42.5]})
    assert P.capacity_verdict(quick, close) == ("PASS", "at most 4.5% (d = 11)")
    assert P.capacity_verdict(quick, far)[0] == "FAIL"
    cut_short = {k: v for k, v in close.items() if k not in ("capacity", "sweep_s")}  # the estimate only
    assert P.capacity_verdict(quick, cut_short)[0] == "not run"


def test_estimate_verdict_is_two_sided_and_reads_a_timeout_as_a_lower_bound():
    assert P.estimate_verdict(ok("s", sweep({}, sweep_s=170.0, estimate_s=120.0)), 120.0)[0] == "PASS"
    assert P.estimate_verdict(ok("s", sweep({}, sweep_s=70.0, estimate_s=120.0)), 120.0)[0] == "FAIL"  # 0.58×
    assert P.estimate_verdict(ok("s", sweep({}, sweep_s=190.0, estimate_s=120.0)), 120.0)[0] == "FAIL"
    timed_out = {"case": "s", "status": "timeout", "process_s": 300.0, "result": {"estimate_s": 120.0}}
    assert P.estimate_verdict(timed_out, 120.0)[0] == "FAIL"  # already over 1.5×
    assert P.estimate_verdict({**timed_out, "process_s": 150.0}, 120.0)[0] == "undecided (timed out)"
    assert P.estimate_verdict(None, None)[0] == "not run"


def records(mode: str) -> list[dict]:
    m = P.MODES[mode]
    b_linear, b_mlp = m.buckets[0].case, m.buckets[1].case
    quick, paper = (s.case for s in m.sweeps)
    return [
        {"case": "meta", "mode": mode, "started": 1.7e9, "budget_s": m.budget_s, "core": None, "host_cores": 16},
        ok("peaks", {**PEAKS, "device": DEVICE}, 12.0),
        ok(b_linear, bucket(0.6)),
        {"case": b_mlp, "timeout_s": 100, "process_s": 100.0, "status": "timeout"},
        ok(quick, sweep({"8": [20.0], "11": [40.0]}, 20.0, 25.0)),
        ok(paper, sweep({"8": [20.5], "11": [40.0], "128": [4000.0]}, 200.0, 180.0), 230.0),
    ]


def test_report_names_the_device_and_gives_a_verdict_per_acceptance_line():
    text = P.markdown(records("full"))
    assert "CPU SMOKE RUN" not in text and "| device | NVIDIA H200 (gpu x1) |" in text
    acceptance = text.split("## Acceptance")[1]
    assert (
        "bucket/fig1_linear (highest, N = 16384): 30 TFLOP/s = 60.0% of the peak (target ≥ 50.0%): **PASS**."
        in acceptance
    )
    assert "bucket/fig1_mlp (highest, N = 64800): — (target ≥ 50.0%): **undecided (timed out)**." in acceptance
    assert "bucket/fig1_linear-tf32 (tf32, N = 16384): — (target ≥ 50.0%): **not run**." in acceptance
    assert "sweep/paper-d128 run to the end within this call: **PASS** (230.0 s)." in acceptance
    assert "at most 2.5% (d = 8) (target ≤ 5.0%): **PASS**." in acceptance
    assert "200 s ÷ 180 s = 1.11 (target within 1.5×): **PASS**." in acceptance
    assert "| sweep/paper-d128 | paper grid.d=[8,11,16,22,32,45,64,90,128] | ok | 200.0 | 180 | 40 |" in text


def test_a_smoke_report_says_so():
    assert "**CPU SMOKE RUN (`--smoke`)" in P.markdown(records("smoke"))


def test_the_full_check_fits_the_call_and_its_points_lie_in_their_search_ranges():
    assert P.FULL.budget_s <= 9 * 60 - 20
    assert set(P.FULL.order) == {"peaks", *(b.case for b in P.FULL.buckets), *(s.case for s in P.FULL.sweeps)}
    assert P.FULL.order[-1] == "sweep/paper-d128" and P.case_cap("sweep/paper-d128", P.FULL) == P.FULL.budget_s
    assert all(P.case_cap(c, P.FULL) <= P.FULL.budget_s / 5 for c in P.FULL.order[:-1])
    for b in P.FULL.buckets:
        spec = load_spec(str(P.ROOT / b.spec), "paper", list(b.sets))
        point = next(p for p in spec.points if all(p.get(k) == v for k, v in b.point.items()))
        config = {**point, "m": point["m_over_d"] * point["d"]} if "m_over_d" in point else point
        assert evaluate(spec.search.lo, config) <= b.N <= evaluate(spec.search.hi, config)
    assert P.FULL.bucket("bucket/fig1_mlp").N == 90 * 720  # the search's upper end: the preset's largest bucket


def test_paper_scale_reads_the_whole_sweep_bound_of_the_dry_run():
    """benchmarks/paper_scale.py's table reads the dry-run's whole-sweep line (was: it fell back to the first
    round's when that line's wording changed)."""
    import paper_scale

    from helpers import TINY_SPEC
    from jaxmem.cli.views import dry_run
    from jaxmem.spec.sweep import load

    text = dry_run(load(TINY_SPEC))
    whole = paper_scale.WHOLE.search(text)
    assert whole and int(whole.group(1)) > int(paper_scale.FIRST.search(text).group(1))
