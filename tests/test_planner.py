"""The planner (jaxmem/plan/planner.py): a CPU keeps the spec's settings; an accelerator gets few programs
and as many probes per round as pay; the spec's own settings and a folder's first plan win."""

from __future__ import annotations

import json
import sys

import pytest

from helpers import ROOT
from jaxmem.experiments.registry import get
from jaxmem.plan import throughput
from jaxmem.plan.layout import Knobs
from jaxmem.plan.planner import plan, pinned_knobs
from jaxmem.plan.target import Target, named
from jaxmem.spec.sweep import load, parse

sys.path.insert(0, str(ROOT / "benchmarks"))
from bench_protocol import GRIDS, SEEDS_DEFAULT, jaxmem_spec  # noqa: E402  (the throughput issue's grids)

CPU = Target("cpu", 1, "cpu", 16 * 2**30)


def protocol_grid(name: str, **changes):
    data = jaxmem_spec(GRIDS[name], SEEDS_DEFAULT, "verified", 0)
    for section, values in changes.items():
        data[section] = {**data.get(section, {}), **values}
    spec = parse(data, name=name)
    return spec, get(spec.experiment)


def h200_costs(flops_per_second: float, floor: float) -> dict:
    """A throughput table (jaxmem/plan/throughput.json's shape) for the H200: one assoc_memory row."""
    row = {"flops_per_run_step": 3e7, "slots": 256, "flops_per_second": flops_per_second, "compile_seconds": 8.0}
    return {"NVIDIA H200": {"date": "-", "step_floor_seconds": floor, "families": {"assoc_memory": [row]}}}


@pytest.mark.parametrize("grid", ["linear", "mlp"])
def test_an_accelerator_gets_at_most_two_programs(grid):
    spec, exp = protocol_grid(grid)
    gpu = plan(spec, exp, named("h200"))
    assert gpu.estimate.compiles <= 2, gpu.describe()
    assert plan(spec, exp, CPU).estimate.compiles > gpu.estimate.compiles


@pytest.mark.parametrize("grid", ["linear", "mlp"])
def test_probes_fill_free_slots_and_stop_where_slots_cost(grid, monkeypatch):
    """Where a program step costs its floor whatever its slots hold, a search takes at most 3 rounds at 1 %
    resolution; where every slot costs its work (the H200's measured Fig 1 programs), fewer probes per round."""
    spec, exp = protocol_grid(grid)
    assert spec.search.resolution == 0.01
    monkeypatch.setattr(throughput, "table", lambda: h200_costs(1e15, 1e-3))
    free = plan(spec, exp, named("h200"))
    assert free.estimate.rounds <= 3, free.describe()
    monkeypatch.setattr(throughput, "table", lambda: h200_costs(6.5e12, 1e-4))
    costly = plan(spec, exp, named("h200"))
    assert costly.knobs.probes < free.knobs.probes and costly.estimate.rounds > free.estimate.rounds


def test_a_speculating_plan_is_timed_by_its_critical_path(monkeypatch):
    """Speculating (an accelerator's default), a plan costs its compiles and the first round's time for each step
    budget of the searches' modelled critical path (jaxmem.plan.search_timeline), not for each round; where
    slots are free, the probes it picks keep that path within 1.5 budgets. The round barrier costs every round."""
    monkeypatch.setattr(throughput, "table", lambda: h200_costs(1e15, 1e-3))  # 8 s per compile
    spec, exp = protocol_grid("linear")
    speculating = plan(spec, exp, named("h200")).estimate
    assert 0 < speculating.path_budgets <= 1.5 < speculating.rounds, speculating.describe()
    assert speculating.seconds == pytest.approx(
        8.0 * speculating.compiles + speculating.path_budgets * speculating.round_seconds
    )
    every_round = 8.0 * speculating.compiles + speculating.rounds * speculating.round_seconds
    assert speculating.every_round_seconds == pytest.approx(every_round) and every_round > speculating.seconds
    barrier = plan(*protocol_grid("linear", engine={"speculation": 0}), named("h200")).estimate
    eval_only = load(ROOT / "tests" / "specs" / "tiny_hebbian.toml")  # steps = 0: no budget to count a path in
    assert plan(eval_only, get(eval_only.experiment), named("h200")).estimate.path_budgets == 0
    assert barrier.path_budgets == 0 and barrier.seconds == pytest.approx(
        8.0 * barrier.compiles + barrier.rounds * barrier.round_seconds
    )


def test_a_cpu_keeps_the_specs_settings():
    spec, exp = protocol_grid("mlp")
    assert plan(spec, exp, CPU).knobs == Knobs.of_spec(spec)


def test_the_specs_own_settings_are_overrides():
    spec, exp = protocol_grid("linear", search={"probes": 4}, engine={"segment_seconds": 3.0, "pad_to_max": []})
    knobs = plan(spec, exp, named("h100")).knobs
    assert (knobs.probes, knobs.segment_seconds, knobs.pad_to_max) == (4, 3.0, ())


def test_a_folder_keeps_its_first_plan():
    spec, exp = protocol_grid("linear")
    first = plan(spec, exp, named("h200")).knobs
    resumed = plan(spec, exp, CPU, pinned=pinned_knobs(first))
    assert {k: getattr(resumed.knobs, k) for k in ("probes", "pad_to_max", "search_pad_floor")} == {
        k: getattr(first, k) for k in ("probes", "pad_to_max", "search_pad_floor")
    }


def test_an_unknown_device_kind_is_refused():
    with pytest.raises(ValueError, match="unknown device kind 'a100'"):
        named("a100")


def test_dry_run_shows_the_plan_another_device_kind_would_get(capsys):
    from jaxmem.cli.main import main

    assert main(["run", "fig1_linear", "--preset", "quick", "--dry-run", "--plan-for", "h200"]) == 0
    out = capsys.readouterr().out
    assert "plan for 1 gpu device(s) (NVIDIA H200" in out and "padding: few programs (d padded" in out
    assert "compiles: 1 now" in out and "s per compile, measured on NVIDIA H200" in out
    assert main(["run", "fig1_linear", "--preset", "quick", "--dry-run", "--plan-for", "a100"]) == 2
    assert main(["run", "fig1_linear", "--preset", "quick", "--plan-for", "h200"]) == 2
    assert "use it with --dry-run" in capsys.readouterr().err


def test_a_run_stores_its_plan_and_a_rerun_keeps_it(tmp_path):
    from jaxmem.driver.sweep import PLAN, pinned_plan, run_sweep
    from jaxmem.persistence.store import Store
    from jaxmem.spec.sweep import load

    spec = load(ROOT / "tests" / "specs" / "tiny_linear.toml")
    run_sweep(spec, tmp_path, quiet=True)
    store = Store(tmp_path, write=False)
    try:
        assert json.loads(store.meta()[PLAN]) == pinned_knobs(Knobs.of_spec(spec)) == pinned_plan(store, spec)
    finally:
        store.close()


def test_a_bucket_whose_dense_logits_would_not_fit_gets_the_blocked_loss():
    from jaxmem.plan.layout import Layout

    spec, exp = protocol_grid("mlp")
    knobs, config = Knobs.of_spec(spec), {**spec.points[-1], "N": 512}
    roomy = Layout(spec, exp, knobs, "gpu", 1, budget_bytes=2**30).bucket_for(config)
    tight = Layout(spec, exp, knobs, "gpu", 1, budget_bytes=2**20).bucket_for(config)  # 512² logits: 2 MiB
    assert roomy.shape_dict["loss_block"] == 0 and 0 < tight.shape_dict["loss_block"] < tight.shape_dict["M"]


def test_estimates_use_the_measured_throughput_of_the_device_kind():
    from jaxmem.plan.throughput import rate

    measured = {
        "cpu (2 cores)": {
            "date": "d",
            "families": {
                "assoc_memory": [
                    {"flops_per_run_step": 1e6, "flops_per_second": 1e9, "step_seconds": 1e-3, "slots": 16},
                    {"flops_per_run_step": 1e8, "flops_per_second": 3e10, "step_seconds": 5e-2, "slots": 16},
                ]
            },
        }
    }
    two_cores = Target("cpu", 1, "cpu", 2**30, cores=2)
    assert rate(two_cores, "assoc_memory", 2e6, measured).flops_per_second == 1e9  # the nearest size class
    assert rate(two_cores, "assoc_memory", 5e7, measured).flops_per_second == 3e10
    assert rate(two_cores, "ntp_linear", 1e6, measured).source.startswith("measured")  # another family's rows
    assert rate(Target("cpu", 1, "cpu", 2**30, cores=8), "assoc_memory", 1e6, measured).source.startswith("stated")
    measured["cpu (2 cores)"]["machine"] = {"cpu": "AMD EPYC 7B13"}  # a CPU's rows hold for its processor model
    epyc, xeon = (Target("cpu", 1, "cpu", 2**30, cores=2, model=m) for m in ("AMD EPYC 7B13", "Intel(R) Xeon(R)"))
    assert rate(epyc, "assoc_memory", 2e6, measured).flops_per_second == 1e9
    assert rate(xeon, "assoc_memory", 2e6, measured).source.startswith("stated")
    assert rate(two_cores, "assoc_memory", 2e6, measured).flops_per_second == 1e9  # a model not known: the rows


def test_estimates_use_the_measured_compile_time_where_there_is_one():
    """A row with its compile seconds gives them to the estimates (planner.programs_seconds reads the rate's);
    an older row without, the stated ones."""
    from jaxmem.plan.throughput import rate

    row = {"flops_per_run_step": 1e6, "flops_per_second": 1e9, "step_seconds": 1e-3, "slots": 16}
    rows = [row, {**row, "flops_per_run_step": 1e8, "compile_seconds": 40.0}]
    measured = {"cpu (2 cores)": {"date": "d", "families": {"assoc_memory": rows}}}
    two_cores = Target("cpu", 1, "cpu", 2**30, cores=2)
    heavy, light = rate(two_cores, "assoc_memory", 1e8, measured), rate(two_cores, "assoc_memory", 1e6, measured)
    assert heavy.compile_seconds == 40.0 and light.compile_seconds == 3.0  # costs.COMPILE_SECONDS["cpu"]


def test_an_accelerator_pads_no_size_of_a_run_that_holds_its_program_alone():
    """The Fig 1 MLP paper point d = 90, m = 720 at N = 64,800: one run per program padded or not, so on an
    accelerator its bucket is its own sizes (was d 128, m 1024, N 65,536: 1.47x the work); a CPU keeps the
    spec's ladders, and a small probe, whose own sizes would share a program with others, keeps the padding."""
    from jaxmem.plan.layout import Layout
    from jaxmem.spec.sweep import load

    spec = load(ROOT / "sweeps" / "nichani24" / "fig1_mlp.toml", "paper")
    exp = get(spec.experiment)
    point = next(p for p in spec.points if exp.complete(p)["d"] == 90 and exp.complete(p)["m"] == 720)
    sizes = ("d", "m", "N")
    for target in (named("h200"), CPU):
        layout = Layout(spec, exp, plan(spec, exp, target).knobs, target.platform, 1, 0.8 * target.memory_bytes)
        big, small = layout.bucket_for({**point, "N": 64800}), layout.bucket_for({**point, "N": 100})
        own = [big.shape_dict[k] for k in sizes] == [90, 720, 64800]
        assert own == (target.platform == "gpu"), (target, big.shape_dict)
        assert small.shape_dict["N"] > 100
