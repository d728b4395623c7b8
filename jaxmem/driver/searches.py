"""The sweep's search bookkeeping: which runs are left to run, replayed from the outcomes stored.

Every (grid point, seed) pair is a `Unit`: a threshold search, or a plain set of runs (one per learning
rate). A search's state is a pure function of the outcomes of its runs (jaxmem.plan.search), so a
resumed sweep replays it from the store and redoes nothing.

Two schedules: `refresh`, the round barrier (a round's runs all end before the next starts), and
`decide`, the scheduler without one (jaxmem.plan.scheduler): at every segment boundary, from the
outcomes known by then on the logical clock (program steps), which probes to launch and which running
ones to freeze. Each outcome's logical step is stored (the store's timeline), so a resumed sweep
decides as the first run did.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import sys

from jaxmem.experiments.interface import Experiment
from jaxmem.plan import scheduler
from jaxmem.plan import search as searching
from jaxmem.plan.runs import Run, make_run, point_id
from jaxmem.spec.expr import evaluate
from jaxmem.spec.sweep import SearchSpec, SweepSpec


@dataclasses.dataclass
class Unit:
    """One (grid point, seed) pair: a threshold search, or a plain set of runs (one per learning rate)."""

    point: dict
    seed: int

    @functools.cached_property
    def id(self) -> str:
        return f"{point_id(self.point)}/{self.seed}"


class Searches:
    """The units one process runs (`mine`), the outcomes of their finished runs and searches, and
    the runs still to run. `search`: the spec's search with the plan's probes per round; `note`: tells
    the user of a law-seeded bracket."""

    def __init__(
        self,
        spec: SweepSpec,
        exp: Experiment,
        search: SearchSpec | None,
        mine: list[Unit],
        part: tuple[int, int],
        store,
        note=lambda message: None,
    ):
        self.spec, self.exp, self.search, self.mine, self.note = spec, exp, search, mine, note
        self.outcomes = store.finished_runs()  # run id -> (success, diverged)
        self.known_at = store.known_at()  # run id -> the logical step its outcome became known
        self.probed = store.probed()  # unit id -> the values its runs were launched at
        self.ended_at = store.known_at("search")  # unit id -> the logical step its search ended
        self.done = store.finished_searches()
        self.answers = store.search_answers()  # unit id -> answer (NaN when censored): seeds law brackets
        self.run_cache: dict[tuple, list[Run]] = {}  # see runs_for
        self.earlier = law_chains(spec, mine, part)
        self.seeded_noted: set[str] = set()

    def runs_for(self, unit: Unit, value: int | None, round_: int) -> list[Run]:
        """The unit's runs at `value`, memoised: `refresh` asks for every open unit's runs after every
        segment, and their ids are hashes (sha1 of JSON) that cost more than a short segment's work."""
        key = (unit.id, value, round_)
        if key not in self.run_cache:
            variable = self.spec.search.variable if self.spec.search else None
            shared = self.exp.same_problem_across
            self.run_cache[key] = [
                make_run(unit.point, unit.seed, lr, variable, value, round_, shared)
                for lr in self.spec.train.learning_rates
            ]
        return self.run_cache[key]

    def probe_outcome(self, unit: Unit, value: int) -> bool | None:
        """The probe's outcome as its search reads it (any learning rate succeeds; flipped with goal
        "smallest"), or None while one of its runs is unfinished."""
        results = [self.outcomes.get(r.run_id) for r in self.runs_for(unit, value, 0)]
        if any(r is None for r in results):
            return None
        success = any(success for success, _ in results)
        return success if self.spec.search.goal == "largest" else not success  # bracket the last failure

    def outcome(self, unit: Unit, value: int) -> scheduler.Outcome | None:
        """The probe's outcome (see probe_outcome) with the logical step its last run's became known (0
        for runs a store older than the timeline holds), or None while one of its runs is unfinished."""
        success = self.probe_outcome(unit, value)
        if success is None:
            return None
        return scheduler.Outcome(success, max(self.known_at.get(r.run_id, 0) for r in self.runs_for(unit, value, 0)))

    def states(self, now: int, depth: int) -> dict[str, tuple[Unit, scheduler.SearchState]]:
        """unit id -> (unit, its search's state at logical step `now`) for every open search (not done,
        not waiting), `depth` rounds of speculation."""
        states = {}
        for unit in self.mine:
            if self.ended(unit.id, now) or any(not self.ended(u.id, now) for u in self.earlier.get(unit.id, [])):
                continue
            values = self.probed.get(unit.id, ())
            outcomes = {v: o for v in values if (o := self.outcome(unit, v)) is not None}
            states[unit.id] = unit, scheduler.state(self.search, self.bracket(unit), outcomes, now, depth)
        return states

    def wanted_runs(self, now: int, depth: int) -> dict[str, Run]:
        """run id -> run of every value the open searches want at `now` (a run in a slot then was wanted)."""
        return {
            r.run_id: r
            for unit, state in self.states(now, depth).values()
            for level in state.wanted
            for v in level
            for r in self.runs_for(unit, v, state.bracket.rounds)
        }

    def decide(
        self, now: int, depth: int, running: dict[str, set[int]]
    ) -> tuple[list[dict], list[Run], list[tuple[str, int]]]:
        """At a segment boundary `now`: the rows of the searches that end there, the runs to launch (most
        wanted first: every slot a bucket frees takes them in this order) and the probes to freeze
        (unit id, value), `running` holding the values with a run in a slot per unit id. A run whose
        outcome is stored but became known after `now` (a resumed sweep replaying) is run again."""
        open_states, rows = {}, []
        for key, (unit, state) in self.states(now, depth).items():
            if state.done:
                rows.append(self.finish(unit, state.bracket))
                self.ended_at[key] = now
            else:
                open_states[key] = unit, state
        decision = scheduler.decide({k: s for k, (_, s) in open_states.items()}, running, sys.maxsize)
        launch = []
        for key, value in decision.launch:
            unit, state = open_states[key]
            self.probed.setdefault(key, set()).add(value)
            runs = self.runs_for(unit, value, state.bracket.rounds)
            launch += [r for r in runs if not self.known(r.run_id, now)]
        return rows, launch, list(decision.freeze)

    def learn(self, run: Run, success: bool, diverged: bool, known_at: int) -> None:
        """Record a finished run's outcome, known at logical step `known_at`. Its value counts as probed:
        a search reads the outcomes of its probed values only, and a run restored into its slot from a
        checkpoint was launched by an earlier process, not by this one's `decide` (without it, a resumed
        sweep read that outcome a segment late, once `decide` asked to launch the value again)."""
        self.outcomes[run.run_id] = (success, diverged)
        self.known_at[run.run_id] = known_at
        if run.value is not None:
            self.probed.setdefault(run.unit, set()).add(run.value)

    def ended(self, unit_id: str, now: int) -> bool:
        """Whether the unit's search had ended at logical step `now` (a search ended after it is open
        again for a resumed sweep replaying from there)."""
        return unit_id in self.done and self.ended_at.get(unit_id, 0) <= now

    def known(self, run_id: str, now: int) -> bool:
        """Whether the run's outcome is known at logical step `now`."""
        return run_id in self.outcomes and self.known_at.get(run_id, 0) <= now

    def bracket(self, unit: Unit) -> searching.Bracket:
        """The unit's first bracket: the spec's bounds, or with `law_axis` the neighbourhood of the
        power law fitted to the answers of the same seed's smaller values on that axis (>= 2 needed)."""
        s = self.search
        lo, hi = (int(evaluate(b, unit.point)) for b in (s.lo, s.hi))
        ceiling = self.exp.fields[s.variable].maximum
        known = [(u.point[s.law_axis], self.answers.get(u.id, math.nan)) for u in self.earlier.get(unit.id, [])]
        prediction = power_law_at(known, unit.point[s.law_axis]) if s.law_axis else math.nan
        seeded = searching.seeded(lo, hi, prediction, s.law_margin)
        if seeded is None:
            return searching.start(s, lo, hi, ceiling)
        if unit.id not in self.seeded_noted:
            self.seeded_noted.add(unit.id)
            self.note(
                f"search {unit.id}: bracket {list(seeded)} around {prediction:.4g}, the law fitted to "
                f"{s.law_axis} = {', '.join(str(x) for x, _ in known)} (spec bounds [{lo}, {hi}])"
            )
        return searching.start(s, *seeded, ceiling, within=(lo, hi))

    def waiting(self, unit: Unit) -> bool:
        """Whether a law-seeded search still waits for the searches of its seed's smaller values."""
        return any(u.id not in self.done for u in self.earlier.get(unit.id, []))

    def refresh(self) -> tuple[dict[str, Run], list[dict]]:
        """The pending runs of every open unit (run id -> Run), and the rows of searches that just finished."""
        pending, finished_searches = {}, []
        for unit in self.mine:
            if self.spec.search is None:
                runs = [r for r in self.runs_for(unit, None, 0) if r.run_id not in self.outcomes]
            else:
                if unit.id in self.done or self.waiting(unit):
                    continue
                bracket, values = searching.replay(
                    self.search, self.bracket(unit), lambda v, u=unit: self.probe_outcome(u, v)
                )
                if bracket.done:
                    finished_searches.append(self.finish(unit, bracket))
                    continue
                runs = [
                    r for v in values for r in self.runs_for(unit, v, bracket.rounds) if r.run_id not in self.outcomes
                ]
            pending.update((r.run_id, r) for r in runs)
        return pending, finished_searches

    def finish(self, unit: Unit, bracket: searching.Bracket) -> dict:
        """Count the unit's search as done; its row."""
        row = self.row(unit, bracket)
        self.done.add(unit.id)
        self.answers[unit.id] = row["capacity"] if not bracket.censored else math.nan
        return row

    def remember(self, runs: dict[str, tuple[bool, bool]], searches: set[str]) -> None:
        """Count runs and searches finished before, outside this sweep's store, as done."""
        self.outcomes.update(runs)
        self.done |= searches

    def row(self, unit: Unit, b: searching.Bracket) -> dict:
        """The finished search's row. Its `capacity` is the answer: the largest value that succeeds, or
        with goal "smallest" the smallest (the bracket then ran on flipped outcomes: its capacity is the
        last failure and its first failure the answer); `first_failure` is the value just past it."""
        config = self.exp.complete(unit.point)
        variable = self.spec.search.variable
        found, beyond = (
            (b.capacity, b.first_failure) if self.spec.search.goal == "largest" else (b.first_failure, b.capacity)
        )
        at_capacity = {**config, variable: int(found)} if not math.isnan(found) else None
        return {
            "unit": unit.id,
            "point": point_id(unit.point),
            "seed": unit.seed,
            "config": unit.point,
            "variable": variable,
            "capacity": found,
            "first_failure": beyond,
            "censored": b.censored,
            "rounds": b.rounds,
            "probes": b.probes,
            "non_monotone": b.non_monotone,
            "params": self.exp.cost(
                "params", self.exp.effective(at_capacity or {**config, variable: b.lo})
            ),  # the variable may size it
            "bits": self.exp.cost("bits", self.exp.effective(at_capacity)) if at_capacity else math.nan,
            "status": "done",
        }


def law_chains(spec: SweepSpec, units: list[Unit], part: tuple[int, int]) -> dict[str, list[Unit]]:
    """With `search.law_axis`: unit id -> the units of the same seed and the same values of the other
    grid axes at smaller values of the law axis (their answers seed its bracket, so it waits for them)."""
    axis = spec.search.law_axis if spec.search else ""
    if not axis:
        return {}
    if part[1] > 1:
        raise ValueError("search.law_axis: law-seeded brackets run in one process (its searches wait on each other)")
    others = [a for a in spec.resolved.get("grid", {}) if a != axis]
    chain = lambda u: (u.seed, json.dumps([u.point.get(a) for a in others], default=str))  # noqa: E731
    return {u.id: [v for v in units if chain(v) == chain(u) and v.point[axis] < u.point[axis]] for u in units}


def power_law_at(known: list[tuple[float, float]], x: float) -> float:
    """The least-squares power law y = a·x^b through the (x, y) pairs with finite positive y, at `x`;
    NaN with fewer than two distinct such x."""
    from jaxmem.report.capacity.fit import fit_power_law  # here: the report package loads scipy and matplotlib

    pairs = [(px, py) for px, py in known if math.isfinite(py) and py > 0 and px > 0]
    if not pairs:
        return math.nan
    slope, intercept = fit_power_law(*zip(*pairs))
    return math.exp(intercept + slope * math.log(x))
