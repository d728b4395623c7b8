"""The driver's searches without a round barrier (issue 38), without training: the search bookkeeping
(jaxmem.driver.searches.Searches.decide) driven segment by segment against synthetic outcomes, the
planner's speculation, the store's timeline (its migration into older stores) and its summary. A sweep
that trains is marked slow."""

import copy
import dataclasses
import json
import sqlite3

import pandas as pd
import pytest

from jaxmem.driver.searches import Searches, Unit
from jaxmem.experiments.registry import get
from jaxmem.persistence.store import COUNTS, Store
from jaxmem.persistence.timeline import budget_of, summary
from jaxmem.plan import planner, search_timeline
from jaxmem.plan.search_timeline import Trial
from jaxmem.plan.target import Target, named
from jaxmem.spec.sweep import parse
from jaxmem.cli.views import _NoStore

BUDGET, EVERY, SEGMENT = 512, 32, 64


def raw_spec(**engine):
    return {
        "experiment": "assoc_memory",
        "fixed": {"model": "linear"},
        "seeds": [0, 1],
        "grid": {"d": [8, 11]},
        "train": {"steps": BUDGET, "eval_every": EVERY, "early_stop": 0.99, "learning_rates": [10.0]},
        "search": {"variable": "N", "lo": "d", "hi": "floor(0.5 * d**2)", "resolution": 0.03, "probes": 3},
        "engine": engine,
    }


def threshold_of(unit: Unit) -> int:
    return {8: 21, 11: 40}[unit.point["d"]] + unit.seed


def trial_of(unit: Unit, value: int) -> Trial:
    """Success up to the unit's threshold, later the nearer it is; a failure runs the whole budget."""
    c = threshold_of(unit)
    if value > c:
        return Trial(False, BUDGET)
    return Trial(True, EVERY * (1 + int(8 * (value / c) ** 4)))


@dataclasses.dataclass
class Slots:
    """A program's slots between segments, as a checkpoint holds them (run id -> (run, logical start)),
    the logical clock, and what the searches did so far: every launch (run id, start) and each search's
    (row, end)."""

    runs: dict = dataclasses.field(default_factory=dict)
    now: int = 0
    starts: list = dataclasses.field(default_factory=list)
    ended: dict = dataclasses.field(default_factory=dict)


def drive(searches: Searches, depth: int, slots: int, at: Slots | None = None, until: int | None = None) -> Slots:
    """Searches.decide at every segment end, a program of `slots` slots filled in the decisions' order
    (as a runner's queue is), outcomes from trial_of (recorded as the driver does, Searches.learn);
    from `at` (default: a fresh sweep) until every search ended (Searches.ended) or, with `until`, the
    outcomes of the segment ending there are known (where a runner's checkpoint is taken)."""
    units = {u.id: u for u in searches.mine}
    at = at or Slots()
    while True:
        for run_id, (run, start) in list(at.runs.items()):
            t = trial_of(units[run.unit], run.value)
            if start + t.steps <= at.now:
                searches.learn(run, t.success, False, at.now)
                del at.runs[run_id]
        if at.now == until:
            return at
        running: dict = {}
        for run, _ in at.runs.values():
            running.setdefault(run.unit, set()).add(run.value)
        rows, launch, freeze = searches.decide(at.now, depth, running)
        at.ended.update((r["unit"], (r, at.now)) for r in rows)
        for unit_id, value in freeze:
            for run_id in [i for i, (r, _) in at.runs.items() if (r.unit, r.value) == (unit_id, value)]:
                del at.runs[run_id]
        for run in launch:
            if len(at.runs) < slots and run.run_id not in at.runs:
                at.runs[run.run_id] = (run, at.now)
                at.starts.append((run.run_id, at.now))
        if all(searches.ended(u, at.now) for u in units):
            return at
        at.now += SEGMENT


def searches_of(spec) -> Searches:
    exp = get(spec.experiment)
    units = [Unit(p, s) for p in spec.points for s in spec.seeds]
    return Searches(spec, exp, spec.search, units, (0, 1), _NoStore())  # the dry run's store: nothing stored


@pytest.mark.parametrize("depth", [1, 2])
def test_decide_gives_the_round_barriers_answers_and_the_simulators_timeline(depth):
    spec = parse(raw_spec(), name="s")
    slots = 40
    fast = drive(searches_of(spec), depth, slots).ended
    keys = sorted(fast)
    bookkeeping = searches_of(spec)
    units = {u.id: u for u in bookkeeping.mine}
    first = {k: bookkeeping.bracket(units[k]) for k in keys}
    trial = lambda key, value: trial_of(units[key], value)  # noqa: E731
    rounds = search_timeline.simulate(search_timeline.rounds(spec.search, first), keys, trial, SEGMENT, slots)
    model = search_timeline.simulate(
        search_timeline.speculative(spec.search, first, depth), keys, trial, SEGMENT, slots
    )
    for key in keys:
        row, end = fast[key]
        assert row["capacity"] == rounds[key].bracket.capacity == threshold_of(units[key])
        assert end == model[key].done_at  # the driver's bookkeeping is the benchmark's model
    assert max(end for _, end in fast.values()) < max(t.done_at for t in rounds.values())


def test_a_resumed_bookkeeping_decides_as_the_first_did():
    """Outcomes stored with the step they became known: a fresh Searches at a later clock, given only
    those known by then (and the later ones, to be run again), wants what the first one wanted."""
    spec = parse(raw_spec(), name="s")
    first = searches_of(spec)
    drive(first, 2, 40)
    resumed = searches_of(spec)
    resumed.outcomes, resumed.known_at = dict(first.outcomes), dict(first.known_at)
    for unit in first.mine:
        resumed.probed[unit.id] = set(first.probed[unit.id])
    again = searches_of(spec)
    again.outcomes = {r: o for r, o in first.outcomes.items() if first.known_at[r] <= SEGMENT * 3}
    again.known_at = {r: first.known_at[r] for r in again.outcomes}
    for unit in first.mine:
        again.probed[unit.id] = set(first.probed[unit.id])
    later = {r: first.known_at[r] for r in first.outcomes if first.known_at[r] > SEGMENT * 3}
    assert later, "some outcomes come after the resume"
    wanted = resumed.wanted_runs(SEGMENT * 3, 2)
    assert wanted == again.wanted_runs(SEGMENT * 3, 2)
    assert wanted


class Stored(_NoStore):
    """What the store of a sweep driven by `searches` holds up to logical step `upto`: the outcomes
    known by then (with their steps), the values of their runs, the searches ended before it."""

    def __init__(self, searches: Searches, ended: dict, upto: int):
        self.outcomes = {r: o for r, o in searches.outcomes.items() if searches.known_at[r] <= upto}
        self.at = {r: searches.known_at[r] for r in self.outcomes}
        self.values = {
            u.id: {v for v in searches.probed.get(u.id, ()) if searches.runs_for(u, v, 0)[0].run_id in self.outcomes}
            for u in searches.mine
        }
        self.ends = {unit: end for unit, (_, end) in ended.items() if end < upto}
        self.answers = {unit: row["capacity"] for unit, (row, _) in ended.items() if unit in self.ends}

    def finished_runs(self):
        return dict(self.outcomes)

    def finished_searches(self):
        return set(self.ends)

    def search_answers(self):
        return dict(self.answers)

    def known_at(self, kind="run"):
        return dict(self.at if kind == "run" else self.ends)

    def probed(self):
        return {u: set(v) for u, v in self.values.items() if v}


@pytest.mark.parametrize("checkpoint, stored", [(0, 6), (3, 3), (5, 9), (9, 9), (12, 15)])
def test_a_sweep_resumed_from_a_checkpoint_launches_and_ends_as_an_undisturbed_one(checkpoint, stored):
    """Stopped where a runner's checkpoint was taken (segment `checkpoint`), with the store holding the
    outcomes known up to segment `stored` (a kill -9 leaves those after the checkpoint; checkpoint 0: killed
    before any checkpoint, so every run restarts from the store's outcomes alone), then resumed:
    the runs in the checkpoint's slots come back without a launch, and every launch (run, start) and
    every search's end is the undisturbed sweep's. Slots are scarce: launches wait for free ones."""
    spec, slots = parse(raw_spec(), name="s"), 12
    whole = drive(searches_of(spec), 2, slots)
    first = searches_of(spec)
    stopped = drive(first, 2, slots, until=checkpoint * SEGMENT)
    went_on = drive(first, 2, slots, copy.deepcopy(stopped), until=stored * SEGMENT)
    resumed = Searches(
        spec, get(spec.experiment), spec.search, first.mine, (0, 1), Stored(first, went_on.ended, stored * SEGMENT)
    )
    again = drive(resumed, 2, slots, stopped)
    assert again.starts == whole.starts
    assert resumed.ended_at == {u: end for u, (_, end) in whole.ended.items()}
    assert resumed.answers == {u: row["capacity"] for u, (row, _) in whole.ended.items()}


def test_the_planner_speculates_on_an_accelerator_and_not_on_a_cpu():
    spec, exp = parse(raw_spec(), name="s"), get("assoc_memory")
    cpu = planner.plan(spec, exp, Target("cpu", 1, "cpu", 2**34))
    assert (cpu.knobs.speculation, cpu.knobs.segment_steps) == (0, 0)
    gpu = planner.plan(spec, exp, named("h200"))
    assert (gpu.knobs.speculation, gpu.knobs.segment_steps) == (2, BUDGET // 16)
    assert any("speculate 2 round(s)" in n for n in gpu.notes)
    forced = planner.plan(parse(raw_spec(speculation=2, segment_steps=64), name="s"), exp, cpu.target)
    assert (forced.knobs.speculation, forced.knobs.segment_steps) == (2, 64)
    paper = dict(raw_spec(), search={**raw_spec()["search"], "mode": "paper"})
    assert planner.plan(parse(paper, name="s"), exp, named("h200")).knobs.speculation == 0
    with pytest.raises(ValueError, match="segment_steps: 48 is not a multiple"):
        planner.plan(parse(raw_spec(speculation=1, segment_steps=48), name="s"), exp, cpu.target)


def test_a_store_older_than_the_timeline_opens_and_is_migrated(tmp_path):
    Store(tmp_path).close()
    db = sqlite3.connect(tmp_path / "results.sqlite")
    db.execute("DROP TABLE timeline")
    db.execute(f"DELETE FROM {COUNTS} WHERE name = 'timeline'")
    db.commit()
    db.close()
    old = Store(tmp_path, write=False)  # read as it is
    assert old.table("timeline").empty and old.known_at() == {}
    old.close()
    store = Store(tmp_path)  # migrated
    store.add_timeline([("run", "a", 0, 64, 64, "done")])
    store.close()
    again = Store(tmp_path, write=False)
    assert again.known_at() == {"a": 64}
    again.close()


def test_the_summary_counts_frozen_runs_and_the_critical_path_in_budgets():
    timeline = pd.DataFrame(
        [
            ("run", "a", 0, 512, 512, "done"),
            ("run", "b", 0, 128, 128, "frozen"),
            ("run", "c", 128, 256, 256, "done"),
            ("search", "u/0", 0, 512, 512, "done"),
        ],
        columns=["kind", "id", "start", "end", "known_at", "status"],
    )
    compiles = pd.DataFrame({"bucket": ["x"], "slots": [2]})
    meta = {"resolved_spec": json.dumps({"train": {"steps": 256}})}
    s = summary(timeline, compiles, budget_of(meta))
    assert (s.path, s.run_steps, s.runs, s.frozen, s.slots) == (512, 768, 3, 1, 2)
    assert s.occupancy == 768 / 1024
    assert "2.00 step budgets" in s.describe() and "1 frozen" in s.describe()
    assert summary(timeline.iloc[:0], compiles, 256) is None


@pytest.mark.slow
def test_a_speculating_sweep_finds_the_round_barriers_capacities(tmp_path):
    from jaxmem.driver.sweep import run_sweep

    found = {}
    for depth in (0, 2):
        out = tmp_path / str(depth)
        run_sweep(parse(raw_spec(speculation=depth, segment_steps=SEGMENT), name="s"), out, quiet=True)
        store = Store(out, write=False)
        found[depth] = store.table("searches").set_index("unit").capacity.to_dict()
        timeline = store.table("timeline")
        store.close()
        assert (timeline.kind == "search").sum() == 4
    assert found[0] == found[2]


@pytest.mark.parametrize("speculation", [0, 2])
def test_compare_reads_the_timeline_of_speculating_sweeps_only(tmp_path, speculation):
    """A speculating sweep's timeline is a result (fixed segments of program steps); a round barrier's
    counts wall-time segments, which differ from one run to the next."""
    from jaxmem.cli.compare import compare

    folders = [tmp_path / "a", tmp_path / "b"]
    for folder, end in zip(folders, (512, 576)):
        folder.mkdir()
        store = Store(folder)
        store.set_meta({"plan": json.dumps({"speculation": speculation, "segment_steps": 64})})
        store.add_timeline([("run", "r", 0, end, end, "done")])
        store.close()
    text, differ = compare(*folders)
    assert differ == bool(speculation)
    assert ("timeline: 0 only in the first" in text) == bool(speculation)
