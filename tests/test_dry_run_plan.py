"""The dry run reads like a plan (issue 41): one table, notes stated once, the expected time beside the
bound (never above it), memory lines that name the buckets over the budget, --verbose per bucket."""

import re

import pytest

from helpers import TINY_SPEC
from jaxmem.cli import plan_table
from jaxmem.cli.views import dry_run
from jaxmem.plan.sweep_time import ProgramTime, SweepTime
from jaxmem.spec.sweep import load, parse

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
    assert re.search(r"^  expected: about \d.* step budgets of the searches' critical path", text, re.M)
    programs = (ProgramTime(runs=30, slots=10, step_seconds=1e-3, compile_seconds=2.0),)
    for path in (0.0, 512.0, 3 * 512.0, 1e9):  # a critical path longer than every round is capped
        time = SweepTime(programs, budget=512, rounds=4, compiles=3, path_steps=path, expected_compiles=2)
        assert time.expected <= time.bound
    assert SweepTime(programs, 512, 4, 3, 512.0, 2).expected == pytest.approx(2 * 2.0 + 3 * 512 * 1e-3)
    assert SweepTime(programs, 512, 4, 3, None).expected == SweepTime(programs, 512, 4, 3, None).bound


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
