"""The dry run reads like a plan (issue 41): one table, notes stated once, the expected time beside the
bound (never above it, each program charged only while it holds a live probe), memory lines that name the
buckets over the budget, --verbose per bucket."""

import re

import pytest

from helpers import TINY_SPEC
from jaxmem.cli import plan_table
from jaxmem.cli.views import dry_run
from jaxmem.plan import search, search_timeline
from jaxmem.plan.search_timeline import Trial
from jaxmem.plan.sweep_time import ProgramTime, SweepTime, in_turn
from jaxmem.spec.sweep import SearchSpec, load, parse

MANY = {  # 20 tiny programs, nothing compiled: more than plan_table.ROWS, so rows are size classes
    "experiment": "assoc_memory",
    "seeds": [0],
    "fixed": {"model": "linear", "N": 8},
    "grid": {"d": [4 * k for k in range(1, 21)]},
    "train": {"steps": 8, "eval_every": 8, "learning_rates": [1e-2]},
    "engine": {"pad_ratio": 1.0},
}
TWO = {  # d = 512 needs 3 x 512² floats (3 MiB) per run: over a 1 MiB cap; d = 16 fits
    **MANY,
    "grid": {"d": [16, 512]},
}


@pytest.fixture(scope="module")
def many():
    return dry_run(parse(MANY, name="many")), dry_run(parse(MANY, name="many"), verbose=True)


def test_a_plan_of_many_programs_is_one_short_table(many):
    plain, verbose = many
    assert "first round: 20 runs in 20 buckets" in plain
    assert len(plain.splitlines()) <= 40 and "  bucket " not in plain
    rows = [line for line in plain.splitlines() if re.match(r"^  \d+ at .* FLOPs/run-step ", line)]
    assert 1 <= len(rows) <= plan_table.ROWS and sum(int(r.split()[0]) for r in rows) == 20
    assert re.search(r"^  all +20 ", plain, re.M)  # the totals row
    assert len(re.findall(r"^  bucket [0-9a-f]{12} \(", verbose, re.M)) == 20  # --verbose: a line per program


def test_a_plan_of_many_programs_checks_the_memory_of_those_no_other_exceeds(many):
    """Tracing every program's memory took most of a paper dry run (515 programs, 30 s): each row's
    programs that no other of the row holds in as many slots and as large sizes give its largest."""
    plain, verbose = many
    checked = re.search(r"checked for (\d+) of the 20 programs", plain)
    assert checked and 1 <= int(checked.group(1)) < 20 and "checked for" not in verbose
    table = lambda text: [line for line in text.splitlines() if re.match(r"^  (\d+ at |all )", line)]  # noqa: E731
    peak = lambda text: re.search(r"^peak memory per device: (.*), within", text, re.M).group(1)  # noqa: E731
    assert table(plain) == table(verbose) and peak(plain) == peak(verbose)  # memory/dev and peak as --verbose's
    assert "; 3 of 20 programs checked (--verbose: every one)" in plain


def test_a_checked_program_over_the_budget_has_every_program_checked():
    plain, verbose = (dry_run(parse(MANY, name="many"), 40 * 2**10, verbose=v) for v in (False, True))
    assert "checked for" not in plain  # the largest is over 40 KiB: the programs it holds are each checked
    peak = lambda text: next(line for line in text.splitlines() if line.startswith("peak memory per device"))  # noqa: E731
    assert "over the budget of 40.0 KiB in 7 bucket(s)" in peak(plain) and peak(plain) == peak(verbose)


def test_the_notes_are_stated_once(many):
    plain, verbose = many
    for text in (plain, verbose):
        assert text.count("runs stopping early use fewer") == 1
        assert text.count("--compile: XLA's memory analysis") == 1


def test_the_expected_time_is_beside_the_bound_and_never_above_it():
    text = dry_run(load(TINY_SPEC))
    assert re.search(r"^  whole sweep \(the bound\), .*: \d", text, re.M)
    assert re.search(
        r"^  expected: about \d.* of device time, each program's steps while it holds a live probe", text, re.M
    )
    programs = (ProgramTime(runs=30, slots=10, step_seconds=1e-3, compile_seconds=2.0),)
    for busy in (0.0, 0.5, 1.5, 1e9):  # device time beyond every round's is capped
        time = SweepTime(programs, budget=512, rounds=4, compiles=3, busy_seconds=busy, expected_compiles=2)
        assert time.expected <= time.bound
    assert SweepTime(programs, 512, 4, 3, 1.5, 2).expected == pytest.approx(2 * 2.0 + 1.5)
    assert SweepTime(programs, 512, 4, 3, None).expected == SweepTime(programs, 512, 4, 3, None).bound


def test_a_program_is_charged_only_while_it_holds_a_live_probe():
    """One search in two programs (values below 100, and the rest): each is busy for the steps one of its
    probes is live (probes at once count once), not for the search's whole critical path; its runs queue
    where they outnumber its slots."""
    spec = SearchSpec(variable="N", lo=1, hi=2, mode="verified", probes=1, resolution=0.05, max_expand=0)
    trial = lambda key, value: Trial(True, 16) if value <= 150 else Trial(False, 64)  # noqa: E731
    policy = search_timeline.rounds(spec, {"a": search.start(spec, 8, 400)})
    timelines = search_timeline.simulate(policy, ["a"], trial, 8, 4)
    program = lambda key, value: "small" if value < 100 else "large"  # noqa: E731
    occupancy = search_timeline.occupancy(timelines, program)
    spans, path = timelines["a"].spans, timelines["a"].done_at
    for name, (live, _) in occupancy.items():
        mine = [(start, end) for v, start, end in spans if program("a", v) == name]
        assert live == sum(any(start <= step < end for start, end in mine) for step in range(path)) < path
    assert occupancy["small"][1] > occupancy["small"][0]  # the first round's 8 and 57 at once
    times = {name: ProgramTime(runs=3, slots=4, step_seconds=1e-3, compile_seconds=0.0) for name in occupancy}
    assert in_turn(times, occupancy) == pytest.approx(sum(live for live, _ in occupancy.values()) * 1e-3)
    assert ProgramTime(runs=8, slots=2, step_seconds=1e-3, compile_seconds=0.0).busy_seconds(10, 40) == 0.02


def test_the_memory_lines_name_the_buckets_that_do_not_fit():
    text = dry_run(parse(TWO, name="two"), memory_cap=2**20)
    rows = {d: line for line in text.splitlines() for d in (16, 512) if re.match(rf"^  [0-9a-f]{{12}} d={d} ", line)}
    over_id, fits_id = rows[512].split()[0], rows[16].split()[0]
    assert "OVER" in rows[512] and "OVER" not in rows[16]
    peak = next(line for line in text.splitlines() if line.startswith("peak memory per device"))
    assert f"in 1 bucket(s) ({over_id}: `jaxmem run` refuses them, exit 6)" in peak
    assert peak.endswith(f"(bucket {fits_id})") and "NOT sized for this machine: 1 bucket(s)" in text
    fitting = dry_run(parse(TWO, name="two"))
    assert re.search(r"^peak memory per device: .* \(bucket [0-9a-f]{12}\), within the budget", fitting, re.M)
