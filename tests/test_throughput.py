"""Throughput rules: slots follow the live work, a searched size is padded only where that is
cheaper than a compile, and the early-failure rule (`[train] give_up`)."""

from __future__ import annotations

import sys
from pathlib import Path

import jax.numpy as jnp
import numpy as np
import pytest

import jaxmem
from jaxmem.driver.progress import Progress
from jaxmem.driver.sweep import Sweep
from jaxmem.plan import costs
from jaxmem.plan.costs import padding_pays, slots_per_device
from jaxmem.engine.program import Settings, hopeless
from jaxmem.persistence.store import load_results
from jaxmem.spec.sweep import SpecError, parse


def test_slots_follow_the_live_runs_in_balanced_waves():
    assert slots_per_device(1e3, 1, "cpu") == 1  # one live run: a one-slot program, nothing frozen beside it
    assert slots_per_device(1e3, 5, "cpu") == 5  # not rounded up to a power of two
    assert slots_per_device(1e3, 40, "cpu", max_slots=32) == 20  # two waves of 20, not 32 then 8
    assert slots_per_device(1e9, 8, "cpu") == 1  # one run already fills the CPU


def test_padding_pays_while_its_work_is_below_a_compile():
    compile_flops = costs.COMPILE_FLOPS["cpu"]
    assert padding_pays(0.5 * compile_flops, "cpu")
    assert not padding_pays(2 * compile_flops, "cpu")
    assert padding_pays(float("nan"), "cpu")  # no cost model: keep the shared program


RULE = Settings(steps=1000, eval_every=10, metric="accuracy", hit_threshold=0.99, stop_threshold=0.99, give_up=4)


def _hopeless(settings, recent, evaluations, best):
    step = evaluations * settings.eval_every
    recent = jnp.asarray(recent, jnp.float32)
    return bool(hopeless(settings, recent, evaluations, jnp.float32(best), step, settings.steps))


def test_a_flat_run_gives_up_after_its_window():
    assert _hopeless(RULE, [0.5] * 4, 4, 0.5)
    assert not _hopeless(RULE, [0.5] * 4, 3, 0.5)  # fewer evaluations than the window: too early to tell
    assert not _hopeless(RULE._replace(give_up=0), [0.5], 40, 0.5)  # off


def test_a_climbing_run_keeps_going_while_its_pace_can_reach_the_threshold():
    # 0.4 gained over the last 4 evaluations, 24 windows left: the pace reaches 0.99
    assert not _hopeless(RULE, [0.1] * 4, 4, 0.5)
    # 0.01 per window with 2 windows left (step 920 of 1000) cannot
    assert _hopeless(RULE, [0.49] * 4, 92, 0.5)


def test_a_faster_pace_keeps_a_slow_climber_going():
    # 0.1 gained over the last 4 evaluations at step 800 of 1000 (5 windows left): at that pace it ends at
    # 0.9, short of 0.99; credited with twice it (give_up_pace = 2) it could reach 1.4
    assert _hopeless(RULE, [0.3] * 4, 80, 0.4)
    assert not _hopeless(RULE._replace(give_up_pace=2.0), [0.3] * 4, 80, 0.4)
    assert _hopeless(RULE._replace(give_up_pace=2.0), [0.5] * 4, 80, 0.5)  # no gain: no pace saves it


def test_the_validation_replays_the_engines_rule_evaluation_by_evaluation():
    """validate_give_up.given_up_at (the predicate vmapped over a run's evaluations) stops a run where the
    engine's ring of recent bests, stepped one evaluation at a time, does."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    import validate_give_up

    rng, outcomes = np.random.default_rng(0), set()
    for window, pace in ((4, 1.0), (8, 2.0)):
        rule = RULE._replace(give_up=window, give_up_pace=pace)
        for _ in range(3):
            values = np.minimum(np.cumsum(rng.uniform(0, 0.02, 101)) * rng.uniform(0.3, 1.5), 1.0)
            steps = [10 * i for i in range(101)]
            recent, expected = np.zeros(window, np.float32), None
            for n, best in enumerate(np.maximum.accumulate(values).astype(np.float32)):
                if _hopeless(rule, recent, n, best):
                    expected = steps[n]
                    break
                recent[n % window] = best
            assert validate_give_up.given_up_at(rule, window, pace, steps, list(values)) == expected
            outcomes.add(expected is None)
    assert outcomes == {True, False}  # runs it stops and runs it keeps


def test_lower_is_better_gives_up_on_the_negated_scale():
    rule = RULE._replace(higher_is_better=False, hit_threshold=0.01, stop_threshold=0.01)
    assert _hopeless(rule, [-0.5] * 4, 4, -0.5)  # a loss stuck at 0.5
    assert not _hopeless(rule, [-0.5] * 4, 4, -0.005)  # already below the threshold


def test_give_up_needs_a_success_rule_and_a_sane_window():
    base = {"experiment": "assoc_memory", "fixed": {"model": "linear", "d": 4, "N": 8}}
    with pytest.raises(SpecError, match="train.give_up: needs a success rule"):
        parse({**base, "train": {"steps": 8, "eval_every": 4, "give_up": 2}}, "s")
    with pytest.raises(SpecError, match="train.give_up: must be >= 0"):
        parse({**base, "train": {"steps": 8, "eval_every": 4, "give_up": -1, "early_stop": 0.9}}, "s")
    with pytest.raises(SpecError, match="train.give_up_pace: has no effect without train.give_up"):
        parse({**base, "train": {"steps": 8, "eval_every": 4, "give_up_pace": 2, "early_stop": 0.9}}, "s")
    with pytest.raises(SpecError, match="train.give_up_pace: must be >= 1"):
        train = {"steps": 8, "eval_every": 4, "give_up": 1, "give_up_pace": 0.5, "early_stop": 0.9}
        parse({**base, "train": train}, "s")


SEARCH = {
    "experiment": "assoc_memory",
    "seeds": [0],
    "fixed": {"model": "linear", "d": 8},
    "train": {"steps": 512, "eval_every": 16, "learning_rates": [1.0], "early_stop": 0.99},
    "search": {"variable": "N", "lo": "d", "hi": "floor(0.5 * d**2)", "mode": "paper", "resolution": 0.05},
    "success": {"metric": "accuracy", "at_least": 0.99},
}


@pytest.fixture(scope="module")
def searches(tmp_path_factory):
    """One paper-mode search (one seed, one rate) at full length and with give_up = 4."""
    out = {}
    for give_up in (0, 4):
        folder = tmp_path_factory.mktemp(f"give_up_{give_up}")
        spec = {**SEARCH, "train": {**SEARCH["train"], "give_up": give_up}}
        jaxmem.run(spec, folder)
        report = (folder / "report.md").read_text()
        out[give_up] = (
            load_results(folder),
            load_results(folder, "searches"),
            load_results(folder, "compiles"),
            report,
        )
    return out


def test_a_lone_search_runs_in_one_slot_programs(searches):
    _, _, compiles, _ = searches[0]
    assert set(compiles["slots"]) == {1}


def test_giving_up_stops_failing_runs_and_keeps_every_verdict(searches):
    (full, full_search, _, full_report), (short, short_search, _, short_report) = searches[0], searches[4]
    assert "Early-failure rule" not in full_report  # the report says when the rule stopped runs
    assert (
        "- Early-failure rule: on: a run stopped once its best, gaining 1x what it gained over its last 4"
        in short_report
    )
    assert list(short_search["capacity"]) == list(full_search["capacity"])
    assert list(short["N"]) == list(full["N"])  # the same probes, so the same verdicts
    assert list(short["success"]) == list(full["success"])
    failed = ~full["success"]
    assert failed.any() and (full.loc[failed, "steps_run"] == 512).all()
    assert (short.loc[failed, "steps_run"] < 512).all()
    kept = ["steps_run", "max_metric", "final_loss"]  # successful runs are untouched by the rule
    assert short.loc[~failed, kept].equals(full.loc[~failed, kept])


def _first_bucket(raw: dict, monkeypatch, compile_flops: float):
    from jaxmem.cli.views import _NoStore

    monkeypatch.setitem(costs.COMPILE_FLOPS, "cpu", compile_flops)
    sweep = Sweep(parse(raw, "s"), Path("."), _NoStore(), Progress(quiet=True))
    sweep.refresh()
    run = min(sweep.pending.values(), key=lambda r: r.value)
    return sweep.bucket_for(run), run


def test_a_lone_run_is_unpadded_where_padding_costs_more_than_a_compile(monkeypatch):
    bucket, run = _first_bucket(SEARCH, monkeypatch, compile_flops=0.0)
    assert bucket.shape_dict["N"] == run.value  # its own size: the padding would cost more than compiling it
    bucket, run = _first_bucket(SEARCH, monkeypatch, compile_flops=1e30)
    assert bucket.shape_dict["N"] > run.value  # padded: a compile costs more
    shared = {**SEARCH, "seeds": [0, 1]}  # two seeds share the bucket: padded whatever a compile costs
    bucket, run = _first_bucket(shared, monkeypatch, compile_flops=0.0)
    assert bucket.shape_dict["N"] > run.value
