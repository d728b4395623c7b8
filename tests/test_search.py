"""Tests for jaxmem.search: the pure threshold-search logic, against oracles `success(v) = v <= C`."""

import math
import random

import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from jaxmem.plan import search
from jaxmem.plan.search import Bracket
from jaxmem.spec.sweep import SearchSpec

FAST = settings(max_examples=150, deadline=None)


def make_spec(mode="verified", probes=3, resolution=0.0, max_expand=4):
    return SearchSpec(variable="N", lo=1, hi=2, mode=mode, probes=probes, resolution=resolution, max_expand=max_expand)


def run(spec, lo, hi, success, limit=500, ceiling=None):
    """Drive a search to the end; return the final bracket and the list of rounds (value -> outcome)."""
    b = search.start(spec, lo, hi, ceiling)
    rounds = []
    while not b.done:
        values = search.probes(spec, b)
        assert values, f"search not done but probes nothing: {b}"
        outcome = {v: bool(success(v)) for v in values}
        rounds.append(outcome)
        b = search.update(spec, b, outcome)
        assert len(rounds) < limit, "search does not terminate"
    return b, rounds


def below(c):
    return lambda v: v <= c


def authors_binary_sweep(min_n, max_n, success, ratio=1.01):
    """The loop of the authors' binary_sweep (spec §4.2), written out directly."""
    probed = []
    while max_n / min_n > ratio and max_n - min_n > 1:
        n = (max_n + min_n) // 2
        probed.append(n)
        if success(n):
            min_n = n
        else:
            max_n = n
    return min_n, max_n, probed


# -- verified mode ---------------------------------------------------------------------------------

bounds = st.integers(1, 5000).flatmap(lambda lo: st.tuples(st.just(lo), st.integers(lo, lo + 20000)))


@FAST
@given(bounds=bounds, frac=st.floats(0, 1), k=st.integers(1, 8), max_expand=st.integers(0, 4))
def test_verified_finds_capacity_exactly_inside_bracket(bounds, frac, k, max_expand):
    lo, hi = bounds
    c = lo + int(frac * (hi - lo))
    assume(c < hi or max_expand >= 1)  # c == hi is found only through one doubling
    spec = make_spec(probes=k, max_expand=max_expand)
    b, rounds = run(spec, lo, hi, below(c))
    tested = {v: o for r in rounds for v, o in r.items()}
    assert b.capacity == c
    assert b.censored == ""
    assert b.first_failure == c + 1
    # both answers were actually tested: c succeeded, c + 1 failed
    assert tested[c] is True and tested[c + 1] is False
    assert not b.non_monotone
    assert b.rounds == len(rounds) and b.probes == sum(len(r) for r in rounds)


@FAST
@given(bounds=bounds, k=st.integers(1, 8), data=st.data())
def test_verified_censored_below_when_lower_bound_fails(bounds, k, data):
    lo, hi = bounds
    c = data.draw(st.integers(0, lo - 1)) if lo > 1 else 0
    b, rounds = run(make_spec(probes=k), lo, hi, below(c))
    assert b.censored == "below"
    assert math.isnan(b.capacity)
    assert b.first_failure == lo
    assert len(rounds) == 1 and rounds[0][lo] is False


@FAST
@given(
    lo=st.integers(1, 1000),
    width=st.integers(0, 1000),
    k=st.integers(1, 6),
    max_expand=st.integers(0, 5),
    extra=st.integers(0, 10**6),
)
def test_verified_censored_above_after_max_expand_doublings(lo, width, k, max_expand, extra):
    hi = lo + width
    reach = hi * 2**max_expand
    b, rounds = run(make_spec(probes=k, max_expand=max_expand), lo, hi, below(reach + extra))
    assert b.censored == "above"
    assert b.expansions == max_expand
    assert b.capacity == reach
    assert math.isnan(b.first_failure)
    assert len(rounds) == max_expand + 1  # one round per bracket end tested: hi, 2hi, ..., hi·2^max_expand
    assert all(r[hi * 2**e] for e, r in enumerate(rounds))


@FAST
@given(
    lo=st.integers(1, 1000),
    width=st.integers(0, 1000),
    k=st.integers(1, 6),
    max_expand=st.integers(1, 5),
    frac=st.floats(0, 1),
)
def test_verified_expansion_finds_capacity_within_reach(lo, width, k, max_expand, frac):
    hi = lo + width
    reach = hi * 2**max_expand
    c = hi + int(frac * (reach - 1 - hi))
    b, _ = run(make_spec(probes=k, max_expand=max_expand), lo, hi, below(c))
    assert b.censored == ""
    assert b.capacity == c and b.first_failure == c + 1
    # doubled just often enough to bracket c: hi·2^(e-1) <= c < hi·2^e
    e = b.expansions
    assert 1 <= e <= max_expand and hi * 2 ** (e - 1) <= c < hi * 2**e


@FAST
@given(
    bounds=bounds, frac=st.floats(0, 1), k=st.integers(1, 8), resolution=st.sampled_from([0.005, 0.01, 0.05, 0.1, 0.5])
)
@example(bounds=(330, 2038), frac=0.041015625, k=1, resolution=0.005)  # 402/400 == 1.005 exactly: the rule's edge
def test_verified_with_resolution_brackets_the_threshold(bounds, frac, k, resolution):
    lo, hi = bounds
    c = lo + int(frac * (hi - 1 - lo)) if hi > lo else lo
    assume(c < hi)
    b, rounds = run(make_spec(probes=k, resolution=resolution), lo, hi, below(c))
    tested = {v: o for r in rounds for v, o in r.items()}
    cap, fail = int(b.capacity), int(b.first_failure)
    assert cap <= c < fail
    assert tested[cap] is True and tested[fail] is False  # verified: both ends were run
    assert fail - cap <= 1 or fail / cap <= 1 + resolution  # the stopping rule as documented: hi/lo <= 1 + resolution


@FAST
@given(bounds=bounds, c=st.integers(0, 10**6), k=st.integers(1, 8), max_expand=st.integers(0, 4))
def test_verified_probe_budget_per_round(bounds, c, k, max_expand):
    lo, hi = bounds
    spec = make_spec(probes=k, max_expand=max_expand)
    b, rounds = run(spec, lo, hi, below(c))
    assert all(1 <= len(r) <= k + 2 for r in rounds)
    # rounds after the first test at most one bracket end (after a doubling) plus K interior points
    assert all(len(r) <= k + 1 for r in rounds[1:])
    # no value is ever run twice
    values = [v for r in rounds for v in r]
    assert len(values) == len(set(values))
    # every probe lies in the current (possibly doubled) bracket
    assert all(lo <= v <= hi * 2**max_expand for v in values)


@settings(max_examples=60, deadline=None)
@given(lo=st.integers(1, 2000), width=st.integers(2, 50000), k=st.integers(1, 8), frac=st.floats(0, 1))
def test_verified_round_count_is_logarithmic_in_k_plus_1(lo, width, k, frac):
    hi = lo + width
    c = lo + int(frac * (width - 1))
    b, rounds = run(make_spec(probes=k), lo, hi, below(c))
    assert b.capacity == c
    # geometric (K+1)-ary split: the log-ratio shrinks (K+1)-fold per round until it is below the
    # spacing of integers near c (≈ 1/c), then the bracket is enumerated
    ideal = math.log(math.log(hi / lo) * (c + 1) + 1, k + 1)
    assert len(rounds) <= math.ceil(ideal) + 1


@pytest.mark.parametrize("k", [1, 2, 3, 7])
def test_verified_worst_case_rounds_match_information_bound(k):
    """Over every threshold in [lo, hi), the worst case needs about log_{K+1}(hi - lo) rounds, no less
    than the information bound and within a few rounds of it; more probes per round need fewer rounds."""
    lo, hi = 64, 4096
    spec = make_spec(probes=k)
    thresholds = range(lo, hi, 7)
    worst = max(len(run(spec, lo, hi, below(c))[1]) for c in thresholds)
    # distinct answers need distinct outcome sequences: the first round has ≤ K+3 monotone outcomes
    # (K+2 probes), later rounds ≤ K+1 (K interior probes), so (K+3)(K+1)^(r-1) >= len(thresholds)
    lower = 1 + math.log(len(thresholds) / (k + 3), k + 1)
    upper = math.log(math.log(hi / lo) * hi, k + 1) + 2
    assert lower <= worst <= upper


def test_more_probes_per_round_means_fewer_rounds():
    lo, hi = 10, 100_000
    thresholds = range(lo, hi, 997)
    mean_rounds = {
        k: sum(len(run(make_spec(probes=k), lo, hi, below(c))[1]) for c in thresholds) / len(thresholds)
        for k in (1, 3, 7)
    }
    # binary vs 4-ary vs 8-ary: log_2 / log_4 = 2, log_2 / log_8 = 3, up to rounding
    assert 1.6 < mean_rounds[1] / mean_rounds[3] < 2.4
    assert 2.2 < mean_rounds[1] / mean_rounds[7] < 3.6


def test_interior_points_are_strictly_inside_and_geometric():
    spec = make_spec(probes=3)
    assert search.interior(spec, 5, 6) == []
    assert search.interior(spec, 5, 8) == [6, 7]  # small bracket: enumerated
    pts = search.interior(spec, 1, 10_000)
    assert len(pts) == 3 and all(1 < p < 10_000 for p in pts)
    assert pts == [10, 100, 1000]  # 10_000^(i/4)


# -- paper mode -----------------------------------------------------------------------------------

paper_bounds = st.integers(1, 3000).flatmap(lambda lo: st.tuples(st.just(lo), st.integers(lo, 60 * lo + 50)))


@settings(max_examples=300, deadline=None)
@given(bounds=paper_bounds, seed=st.integers(0, 2**32), p=st.floats(0, 1))
def test_paper_mode_is_the_authors_loop_for_any_outcomes(bounds, seed, p):
    """Arbitrary (even non-monotone) outcomes: same probes, same answer as the authors' code."""
    lo, hi = bounds
    rng, memo = random.Random(seed), {}

    def success(v):
        if v not in memo:
            memo[v] = rng.random() < p
        return memo[v]

    expected_min, expected_max, expected_probes = authors_binary_sweep(lo, hi, success)
    b, rounds = run(make_spec(mode="paper", resolution=0.01), lo, hi, success)
    assert [list(r) for r in rounds] == [[v] for v in expected_probes]  # one midpoint per round, same order
    assert b.capacity == expected_min
    assert b.first_failure == expected_max
    assert b.rounds == len(expected_probes) and b.probes == len(expected_probes)
    assert b.censored == "" and b.expansions == 0


@settings(max_examples=200, deadline=None)
@given(bounds=paper_bounds, c=st.integers(0, 200_000))
def test_paper_mode_never_tests_the_bracket_ends(bounds, c):
    lo, hi = bounds
    b, rounds = run(make_spec(mode="paper", resolution=0.01), lo, hi, below(c))
    tested = [v for r in rounds for v in r]
    assert lo not in tested and hi not in tested
    # the lower end is assumed feasible: below lo the answer is still lo (not censored)
    if c < lo:
        assert b.capacity == lo and b.censored == ""
    # stopping rule: hi/lo <= 1.01 or hi - lo <= 1
    cap, fail = b.capacity, b.first_failure
    assert fail / cap <= 1.01 or fail - cap <= 1
    assert lo <= cap <= fail <= hi


@pytest.mark.parametrize("resolution", [0.0, 0.05, 0.3])
def test_paper_mode_other_resolutions(resolution):
    for lo, hi, c in [(8, 32, 20), (8, 32, 7), (100, 5000, 4999), (3, 1000, 512), (50, 50, 50)]:
        expected = authors_binary_sweep(lo, hi, below(c), ratio=1 + resolution)
        b, rounds = run(make_spec(mode="paper", resolution=resolution), lo, hi, below(c))
        assert (b.capacity, b.first_failure, [v for r in rounds for v in r]) == expected


def test_paper_mode_converged_bracket_runs_nothing():
    b = search.start(make_spec(mode="paper", resolution=0.01), 100, 101)
    assert b.done and search.probes(make_spec(mode="paper"), b) == [] and b.capacity == 100


def test_paper_mode_stop_rule_is_the_ratio_test_exactly():
    spec = make_spec(mode="paper", resolution=0.001)
    expected = authors_binary_sweep(2000, 2002, below(10**6), ratio=1 + 0.001)
    assert expected == (2000, 2002, [])
    b, rounds = run(spec, 2000, 2002, below(10**6))
    assert rounds == [] and b.capacity == 2000


# -- replay ---------------------------------------------------------------------------------------

modes = st.sampled_from(["verified", "paper"])


@settings(max_examples=150, deadline=None)
@given(mode=modes, bounds=bounds, c=st.integers(0, 30000), k=st.integers(1, 5), data=st.data())
def test_replay_with_partial_outcomes_stops_at_the_first_incomplete_round(mode, bounds, c, k, data):
    lo, hi = bounds
    spec = make_spec(mode=mode, probes=k, resolution=0.01 if mode == "paper" else 0.0)
    full, rounds = run(spec, lo, hi, below(c))
    tested = sorted({v for r in rounds for v in r})
    known = set(data.draw(st.lists(st.sampled_from(tested), unique=True))) if tested else set()
    b, pending = search.replay(spec, search.start(spec, lo, hi), lambda v: (v <= c) if v in known else None)

    # walk the direct run: the replayed state is the first one whose round has an unknown outcome
    state = search.start(spec, lo, hi)
    for r in rounds:
        missing = sorted(v for v in r if v not in known)
        if missing:
            assert b == state
            assert sorted(pending) == missing
            assert set(pending) <= set(search.probes(spec, b))
            break
        state = search.update(spec, state, r)
    else:
        assert b == full and pending == []


@settings(max_examples=100, deadline=None)
@given(mode=modes, bounds=bounds, c=st.integers(0, 30000), k=st.integers(1, 5))
def test_replay_with_all_outcomes_equals_the_direct_search(mode, bounds, c, k):
    lo, hi = bounds
    spec = make_spec(mode=mode, probes=k, resolution=0.01 if mode == "paper" else 0.0)
    direct, _ = run(spec, lo, hi, below(c))
    replayed, pending = search.replay(spec, search.start(spec, lo, hi), below(c))
    assert pending == [] and replayed == direct and replayed.done


def test_replay_resumes_round_by_round():
    spec = make_spec(probes=3)
    outcomes: dict[int, bool] = {}
    b, pending = search.replay(spec, search.start(spec, 10, 1000), outcomes.get)
    assert b.rounds == 0 and sorted(pending) == search.probes(spec, b) and 10 in pending and 1000 in pending
    seen = 0
    while pending:
        seen += 1
        outcomes.update({v: v <= 321 for v in pending})
        b, pending = search.replay(spec, search.start(spec, 10, 1000), outcomes.get)
        assert b.rounds == seen
    assert b.done and b.capacity == 321


# -- non-monotone outcomes ------------------------------------------------------------------------


def test_non_monotone_interior_success_above_failure():
    spec = make_spec(probes=3)
    b = search.start(spec, 10, 1000)
    values = search.probes(spec, b)
    assert values[0] == 10 and values[-1] == 1000 and len(values) == 5
    a, m, z = values[1:4]
    b = search.update(spec, b, {10: True, a: False, m: True, z: False, 1000: False})
    assert b.non_monotone
    assert (b.lo, b.hi) == (10, a)  # the first failure bounds the search


@FAST
@given(bounds=bounds, c=st.integers(0, 30000), k=st.integers(1, 8), max_expand=st.integers(0, 3))
def test_monotone_outcomes_never_flag_non_monotone(bounds, c, k, max_expand):
    lo, hi = bounds
    b, _ = run(make_spec(probes=k, max_expand=max_expand), lo, hi, below(c))
    assert not b.non_monotone


@settings(max_examples=100, deadline=None)
@given(lo=st.integers(1, 500), width=st.integers(20, 5000), k=st.integers(2, 6), data=st.data())
def test_non_monotone_flag_sticks_through_later_rounds(lo, width, k, data):
    hi = lo + width
    spec = make_spec(probes=k)
    b = search.start(spec, lo, hi)
    interior = search.interior(spec, lo, hi)
    assume(len(interior) >= 2)
    fail_at = data.draw(st.integers(0, len(interior) - 2))
    first = {lo: True, hi: False}
    first.update({v: i < fail_at for i, v in enumerate(interior)})
    first[interior[-1]] = True  # a success above the first failure
    b = search.update(spec, b, first)
    assert b.non_monotone and b.hi == interior[fail_at]
    while not b.done:
        b = search.update(spec, b, {v: False for v in search.probes(spec, b)})
    assert b.non_monotone


@pytest.mark.parametrize("case", ["lo fails, hi succeeds", "interior fails, hi succeeds"])
def test_non_monotone_seen_at_bracket_ends(case):
    spec = make_spec(probes=3)
    b = search.start(spec, 10, 1000)
    values = search.probes(spec, b)
    if case == "lo fails, hi succeeds":
        outcome = {v: v != 10 for v in values}
    else:
        outcome = {v: v != values[1] for v in values}
    b = search.update(spec, b, outcome)
    assert b.non_monotone


def test_bracket_capacity_and_first_failure_properties():
    assert Bracket(5, 9, True, True).capacity == 5 and Bracket(5, 9, True, True).first_failure == 9
    below_ = Bracket(5, 9, False, False, censored="below", done=True)
    assert math.isnan(below_.capacity) and below_.first_failure == 5
    above = Bracket(5, 9, True, False, censored="above", done=True)
    assert above.capacity == 9 and math.isnan(above.first_failure)


@FAST
@given(lo=st.integers(1, 100), width=st.integers(1, 100), ceiling_factor=st.integers(1, 20))
def test_expansion_never_probes_past_the_variables_ceiling(lo, width, ceiling_factor):
    """A field's `maximum` bounds the doublings: everything succeeds, the search stops censored "above"
    without probing a value the experiment does not support."""
    hi = lo + width
    ceiling = hi * ceiling_factor
    b, rounds = run(make_spec(max_expand=10), lo, hi, lambda v: True, ceiling=ceiling)
    assert b.censored == "above" and max(v for r in rounds for v in r) <= ceiling
    assert b.expansions <= 10


# -- law-seeded brackets ---------------------------------------------------------------------------


def run_seeded(spec, lo, hi, within, success, limit=500):
    """Drive a search whose first bracket [lo, hi] sits inside the spec's bounds `within`."""
    b, rounds = search.start(spec, lo, hi, within=within), 0
    while not b.done:
        b = search.update(spec, b, {v: bool(success(v)) for v in search.probes(spec, b)})
        rounds += 1
        assert rounds < limit, "search does not terminate"
    return b


@FAST
@given(bounds=bounds, frac=st.floats(0, 1), seed_frac=st.floats(0, 1), width=st.floats(0.05, 1.0), k=st.integers(1, 4))
def test_a_seeded_bracket_finds_the_capacity_anywhere_in_the_spec_bounds(bounds, frac, seed_frac, width, k):
    """Wherever the prediction falls, a monotone success rule's answer inside the spec's bounds is found
    exactly: a failing lower end halves toward the spec's lower bound, doublings up to its upper bound
    are free (`max_expand` = 0 here, so none beyond it is allowed)."""
    lo, hi = bounds
    assume(hi - lo >= 4)
    c = lo + int(frac * (hi - lo - 1))
    seeded = search.seeded(lo, hi, lo + seed_frac * (hi - lo), width)
    assume(seeded is not None)
    b = run_seeded(make_spec(probes=k, max_expand=0), *seeded, (lo, hi), below(c))
    assert b.capacity == c and b.censored == ""


def test_a_seeded_search_is_censored_only_past_the_spec_bounds():
    spec = make_spec(max_expand=0)
    assert run_seeded(spec, 40, 60, (10, 100), lambda v: False).censored == "below"  # even 10 failed
    b = run_seeded(spec, 40, 60, (10, 100), lambda v: True)
    assert b.censored == "above" and b.capacity == 100  # free doublings reach 100; one more is not allowed


def test_seeded_brackets_are_the_prediction_neighbourhood_inside_the_bounds():
    assert search.seeded(10, 1000, 100.0, 0.25) == (80, 125)
    assert search.seeded(90, 1000, 100.0, 0.25) == (90, 125)
    assert search.seeded(10, 110, 100.0, 0.25) == (80, 110)
    assert search.seeded(10, 1000, math.nan, 0.25) is None
    assert search.seeded(90, 110, 100.0, 0.25) is None  # no narrower than the spec's bracket


def test_the_power_law_through_earlier_answers():
    from jaxmem.driver.searches import power_law_at

    assert power_law_at([(8, 64.0), (16, 256.0)], 32) == pytest.approx(1024.0)
    assert power_law_at([(8, 64.0), (11, 121.0), (16, 256.0)], 22) == pytest.approx(484.0)
    assert math.isnan(power_law_at([(8, 64.0), (16, math.nan)], 32))  # a censored answer does not count
    assert math.isnan(power_law_at([(8, 64.0)], 32))


@pytest.mark.parametrize(
    "change, complaint",
    [
        ({"law_axis": "q"}, "search.law_axis: 'q' is not a grid axis"),
        ({"law_axis": "d", "mode": "paper"}, "search.law_axis: law-seeded brackets need mode = 'verified'"),
        ({"law_axis": "d", "law_margin": 0}, "search.law_margin: must be > 0"),
    ],
)
def test_bad_law_settings_are_named(change, complaint):
    from jaxmem.spec.sweep import SpecError, parse

    raw = {
        "experiment": "assoc_memory",
        "fixed": {"model": "linear"},
        "grid": {"d": [8, 16, 32]},
        "search": {"variable": "N", "lo": "d", "hi": "d * d", **change},
    }
    with pytest.raises(SpecError) as err:
        parse(raw, name="bad")
    assert complaint in str(err.value)
