"""Tests for jaxmem.plan.scheduler: searches without a round barrier, against synthetic outcome models
(a threshold per search, steps-to-success growing near it, failures that run the whole budget,
non-monotone noise) on a logical timeline (jaxmem.plan.search_timeline), without training."""

import dataclasses
import random
import zlib

from hypothesis import given, settings
from hypothesis import strategies as st

from jaxmem.plan import scheduler, search
from jaxmem.plan import search_timeline as timeline
from jaxmem.plan.scheduler import Outcome
from jaxmem.plan.search_timeline import Trial
from jaxmem.spec.sweep import SearchSpec

FEW = settings(max_examples=20, deadline=None)
BUDGET = 1024
SEGMENT = 64


def make_spec(mode="verified", probes=5, resolution=0.01, max_expand=2):
    return SearchSpec(variable="N", lo=1, hi=2, mode=mode, probes=probes, resolution=resolution, max_expand=max_expand)


def noisy(key, value, p) -> bool:
    """A deterministic coin of probability p per (search, value)."""
    return zlib.crc32(f"{key}/{value}".encode()) % 1000 < 1000 * p


def outcome_model(thresholds: dict, noise: float = 0.0):
    """Success up to each search's threshold (flipped with probability `noise` within 10 % of it);
    a success takes longer the nearer the threshold; a failure runs the whole budget."""

    def trial(key, value):
        c = thresholds[key]
        success = value <= c
        if abs(value - c) <= 0.1 * c and noisy(key, value, noise):
            success = not success
        if not success:
            return Trial(False, BUDGET)
        near = min(value / c, 1.0) ** 8
        return Trial(True, SEGMENT // 2 + int(0.4 * BUDGET * near))

    return trial


def run_both(spec, thresholds, trial, depth, slots=10**6, lo=8, hi=400):
    keys = sorted(thresholds)
    first = {k: search.start(spec, lo, hi) for k in keys}
    rounds = timeline.simulate(timeline.rounds(spec, first), keys, trial, SEGMENT, slots)
    fast = timeline.simulate(timeline.speculative(spec, first, depth), keys, trial, SEGMENT, slots)
    return rounds, fast


def answer(b: search.Bracket):
    return (b.capacity, b.first_failure, b.censored, b.lo, b.hi, b.expansions)


thresholds_st = st.dictionaries(st.integers(0, 20), st.integers(4, 900), min_size=1, max_size=4)


@FEW
@given(
    thresholds=thresholds_st, depth=st.integers(0, 3), probes=st.sampled_from([1, 3, 5, 11]), noise=st.floats(0, 0.5)
)
def test_same_answers_as_the_round_scheduler(thresholds, depth, probes, noise):
    rounds, fast = run_both(make_spec(probes=probes), thresholds, outcome_model(thresholds, noise), depth)
    for key in thresholds:
        assert answer(fast[key].bracket) == answer(rounds[key].bracket)


@FEW
@given(thresholds=thresholds_st, depth=st.integers(0, 3))
def test_never_later_than_rounds_with_slots_to_spare(thresholds, depth):
    rounds, fast = run_both(make_spec(), thresholds, outcome_model(thresholds), depth)
    for key in thresholds:
        assert fast[key].done_at <= rounds[key].done_at


def test_speculation_shortens_the_critical_path():
    """Three rounds of 11 probes: about 3 budgets end to end with rounds; with two rounds of speculation,
    one budget and the time the deciding successes take (here up to 0.4 budgets each)."""
    thresholds = {k: random.Random(k).randint(60, 350) for k in range(10)}
    rounds, fast = run_both(make_spec(probes=11), thresholds, outcome_model(thresholds), depth=2)
    path = {
        name: sum(t.done_at for t in runs.values()) / len(runs) for name, runs in (("rounds", rounds), ("fast", fast))
    }
    assert path["rounds"] >= 2.5 * BUDGET and path["fast"] <= 0.6 * path["rounds"]
    assert max(t.done_at for t in fast.values()) <= 2 * BUDGET
    assert sum(t.run_steps for t in fast.values()) <= 1.3 * sum(t.run_steps for t in rounds.values())


@FEW
@given(thresholds=thresholds_st, depth=st.integers(0, 2), slots=st.integers(1, 40))
def test_few_slots_still_finish_with_the_same_answers(thresholds, depth, slots):
    rounds, fast = run_both(make_spec(), thresholds, outcome_model(thresholds, 0.3), depth, slots=slots)
    for key in thresholds:
        assert answer(fast[key].bracket) == answer(rounds[key].bracket)


def test_probes_made_irrelevant_are_frozen():
    spec, depth = make_spec(probes=3), 1
    first = search.start(spec, 10, 100)
    assert search.probes(spec, first) == [10, 18, 32, 56, 100]
    known = {10: Outcome(True, 64), 18: Outcome(True, 64)}
    s = scheduler.state(spec, first, known, 64, depth)
    guessed = set(s.wanted[1])  # the round after a guessed failure at 32: inside (18, 32)
    assert s.wanted[0] == (32, 56, 100) and guessed and all(18 < v < 32 for v in guessed)
    later = scheduler.state(spec, first, {**known, 32: Outcome(True, 128)}, 128, depth)  # a success above them
    decision = scheduler.decide({"a": later}, {"a": {56, 100} | guessed}, free=0)
    assert {v for _, v in decision.freeze} == guessed
    assert {v for _, v in decision.launch} == set(later.wanted[1]) and all(32 < v < 56 for v in later.wanted[1])

    failed = scheduler.state(spec, first, {**known, 32: Outcome(False, 1088)}, 1088, depth)  # a failure below them
    decision = scheduler.decide({"a": failed}, {"a": {56, 100} | guessed}, free=0)
    assert {v for _, v in decision.freeze} == {56}
    assert failed.wanted[0] == (100,)  # the upper end's success would double the bracket, as rounds do

    ended = scheduler.state(spec, first, {**known, 32: Outcome(False, 1088), 100: Outcome(False, 1088)}, 1088, depth)
    assert (ended.bracket.lo, ended.bracket.hi, ended.bracket.rounds) == (18, 32, 1)  # decided without 56


def test_a_search_that_ends_freezes_its_running_probes():
    spec = make_spec(probes=3)
    first = search.start(spec, 10, 100)
    s = scheduler.state(spec, first, {10: Outcome(False, 64)}, 64, depth=2)  # censored below
    assert s.done and s.bracket.censored == "below"
    decision = scheduler.decide({}, {"a": {18, 32}}, free=0)
    assert decision.freeze == (("a", 18), ("a", 32)) and decision.launch == ()


@settings(max_examples=60, deadline=None)
@given(
    bounds=st.tuples(st.integers(1, 300), st.integers(2, 600)).filter(lambda b: b[0] < b[1]),
    verified=st.booleans(),
    data=st.data(),
)
def test_the_deciding_outcomes_give_the_whole_rounds_bracket(bounds, verified, data):
    spec = make_spec(probes=data.draw(st.integers(1, 11)))
    b = search.start(spec, *bounds)
    if verified:
        b = dataclasses.replace(b, lo_ok=True, hi_bad=True)
    values = search.probes(spec, b)
    whole = {v: data.draw(st.booleans()) for v in values}
    known = {v: whole[v] for v in values if data.draw(st.booleans())}
    decided, pending = search.deciding(spec, b, known.get)
    assert decided == known and set(pending) <= set(values) - set(known)
    if not pending:
        fast, slow = search.update(spec, b, decided), search.update(spec, b, whole)
        assert (fast.lo, fast.hi, fast.censored, fast.expansions, fast.done) == (
            slow.lo,
            slow.hi,
            slow.censored,
            slow.expansions,
            slow.done,
        )


outcomes_st = st.dictionaries(
    st.integers(8, 400), st.tuples(st.booleans(), st.integers(0, 8).map(lambda k: k * SEGMENT)), max_size=25
)


@FEW
@given(outcomes=outcomes_st, seed=st.integers(0, 1000), depth=st.integers(0, 3))
def test_decisions_do_not_depend_on_the_order_of_arrival(outcomes, seed, depth):
    spec = make_spec()
    first = search.start(spec, 8, 400)
    stored = {v: Outcome(ok, at) for v, (ok, at) in outcomes.items()}
    shuffled = list(stored.items())
    random.Random(seed).shuffle(shuffled)
    for now in range(0, 9 * SEGMENT, SEGMENT):
        s = scheduler.state(spec, first, stored, now, depth)
        assert s == scheduler.state(spec, first, dict(shuffled), now, depth)
        assert len({v for level in s.wanted for v in level}) == sum(map(len, s.wanted))  # levels are disjoint
        running = {"a": set(v for v, o in stored.items() if o.at > now)}
        assert scheduler.decide({"a": s}, running, 3) == scheduler.decide({"a": s}, running, 3)


@FEW
@given(thresholds=thresholds_st, depth=st.integers(0, 3), noise=st.floats(0, 0.5))
def test_resuming_from_a_prefix_of_outcomes_continues_identically(thresholds, depth, noise):
    """The state at every boundary is the same from the outcomes stored by then as from all of them:
    a sweep stopped then and resumed from its store takes the same decisions."""
    spec = make_spec()
    keys = sorted(thresholds)
    first = {k: search.start(spec, 8, 400) for k in keys}
    ran = timeline.simulate(
        timeline.speculative(spec, first, depth), keys, outcome_model(thresholds, noise), SEGMENT, 10**6
    )
    for key, t in ran.items():
        for now in sorted({o.at for o in t.outcomes.values()}):  # the state changes only there
            prefix = {v: o for v, o in t.outcomes.items() if o.at <= now}
            assert scheduler.state(spec, first[key], prefix, now, depth) == scheduler.state(
                spec, first[key], t.outcomes, now, depth
            )
        assert scheduler.state(spec, first[key], t.outcomes, t.done_at, depth).bracket == t.bracket


def authors_binary_sweep(min_n, max_n, success, ratio=1.01):
    """The loop of the authors' binary_sweep (spec §4.2), written out directly."""
    probed = []
    while max_n / min_n > ratio and max_n - min_n > 1:
        n = (max_n + min_n) // 2
        probed.append(n)
        min_n, max_n = (n, max_n) if success(n) else (min_n, n)
    return min_n, probed


@FEW
@given(threshold=st.integers(8, 500), depth=st.integers(0, 3), noise=st.floats(0, 0.5))
def test_paper_mode_is_the_authors_binary_search(threshold, depth, noise):
    spec = make_spec(mode="paper", resolution=0.01)
    trial = outcome_model({"a": threshold}, noise)
    ran = timeline.simulate(
        timeline.speculative(spec, {"a": search.start(spec, 8, 400)}, depth), ["a"], trial, 1, 10**6
    )
    lo, probed = authors_binary_sweep(8, 400, lambda v: trial("a", v).success)
    t = ran["a"]
    assert t.bracket.capacity == lo
    assert sorted(t.outcomes, key=lambda v: t.outcomes[v].at) == probed  # one probe at a time, in its order
    assert t.probes == len(probed) and t.frozen == 0
    assert t.done_at == sum(trial("a", v).steps for v in probed)


def test_the_modelled_failures_end_at_the_give_up_window():
    """The planner's and the dry run's outcome model: a failure known at the end of its budget, or with
    the early-failure rule after its window of K evaluations; the critical path shortens with it."""
    assert timeline.failure_step(BUDGET, 16, 0) == BUDGET
    assert timeline.failure_step(BUDGET, 16, 32) == 512
    assert timeline.failure_step(BUDGET, 16, 128) == BUDGET  # a window past the budget: the budget
    spec = make_spec(probes=1)
    first = {k: search.start(spec, 8, 400) for k in range(3)}
    full, early = (timeline.summary(timeline.modelled(spec, first, 2, SEGMENT, 9, BUDGET, 16, k), 9) for k in (0, 32))
    assert early.path < full.path and early.run_steps < full.run_steps
    spans = [t.spans for runs in timeline.modelled(spec, first, 2, SEGMENT, 9, BUDGET, 16, 32) for t in runs.values()]
    assert max(end - start for s in spans for _, start, end in s) <= 512
