"""Tests for the `jaxmem` command's user errors: exit codes, messages, no tracebacks, nothing compiled."""

import os
import re
import socket
import sys
from pathlib import Path

import jax.monitoring
import pytest

from jaxmem.driver import sweep as driver
from jaxmem.report import from_store
from jaxmem.plan import search
from jaxmem.spec.expr import evaluate
from jaxmem.persistence.lock import OutputLock
from jaxmem.spec.sweep import load, parse
from jaxmem.persistence.store import FILENAME, Store

from helpers import cli as call

REPO = Path(__file__).resolve().parents[1]
FIG1 = REPO / "sweeps" / "nichani24" / "fig1_mlp.toml"

TINY = """\
experiment = "assoc_memory"
seeds = [0]
[fixed]
model = "linear"
d = 4
N = 4
[train]
steps = 2
eval_every = 1
learning_rates = [0.1]
"""


@pytest.fixture
def compiles():
    """Names of XLA backend compilations that happen during the test."""
    seen = []

    def listener(name, _secs, **_kw):
        if "backend_compile" in name:
            seen.append(name)

    jax.monitoring.register_event_duration_secs_listener(listener)
    yield seen
    jax.monitoring.unregister_event_duration_listener(listener)


@pytest.fixture
def no_compile(monkeypatch, compiles):
    """Fail the test if the driver gets as far as building a bucket runner or a report."""

    def refuse(*args, **kwargs):
        raise AssertionError("the run got past its checks and started work")

    monkeypatch.setattr(driver, "BucketRunner", refuse)
    monkeypatch.setattr(from_store, "report", refuse)  # the driver imports it when it reports
    yield compiles
    assert compiles == []


@pytest.fixture
def tiny(tmp_path):
    path = tmp_path / "tiny.toml"
    path.write_text(TINY)
    return path


def test_run_bad_spec_exits_2_naming_the_field(tmp_path, capsys, no_compile):
    path = tmp_path / "bad.toml"
    path.write_text(TINY.replace("steps = 2", 'steps = "many"') + "[grid]\nmm = [1]\n")
    code, out, err = call(capsys, "run", str(path))
    assert code == 2
    assert err.startswith("jaxmem: error: invalid sweep spec")
    assert str(path) in err and "train.steps" in err and "grid.mm" in err and "did you mean 'm'" in err
    assert out == ""


def test_run_malformed_toml_exits_2(tmp_path, capsys, no_compile):
    path = tmp_path / "bad.toml"
    path.write_text("experiment = \n")
    code, _, err = call(capsys, "run", str(path))
    assert code == 2 and "malformed TOML" in err


def test_run_unknown_preset_exits_2(tiny, capsys, no_compile):
    code, _, err = call(capsys, "run", str(tiny), "--preset", "paper")
    assert code == 2 and "--preset 'paper'" in err


def test_run_nonexistent_sweep_exits_2(capsys, no_compile):
    code, out, err = call(capsys, "run", "nonexistent_sweep")
    assert code == 2
    assert "nonexistent_sweep" in err and "no such spec file or shipped sweep" in err
    assert "nichani24/fig1_mlp" in err  # lists what exists
    assert out == ""


def test_run_non_numeric_axis_exits_2(tmp_path, capsys, no_compile):
    path = tmp_path / "bad.toml"
    path.write_text(TINY.replace("d = 4\n", "") + '[grid]\nd = { range = [4, "8"] }\n')
    code, _, err = call(capsys, "run", str(path))
    assert code == 2 and "grid.d" in err


@pytest.mark.parametrize("command", ["status", "report"])
def test_status_or_report_of_empty_folder_exits_2(tmp_path, capsys, command):
    code, out, err = call(capsys, command, str(tmp_path))
    assert code == 2
    assert str(tmp_path) in err and "holds no jaxmem results" in err and FILENAME in err
    assert out == ""
    assert not (tmp_path / FILENAME).exists()


def test_status_of_missing_folder_exits_2(tmp_path, capsys):
    code, _, err = call(capsys, "status", str(tmp_path / "nope"))
    assert code == 2 and "holds no jaxmem results" in err


def test_status_of_garbage_store_exits_4(tmp_path, capsys):
    (tmp_path / FILENAME).write_bytes(b"not sqlite at all\n" * 64)
    code, _, err = call(capsys, "status", str(tmp_path))
    assert code == 4 and "unreadable" in err and FILENAME in err


def test_status_of_a_claimed_folder(tmp_path, tiny, capsys):
    store = Store(tmp_path)
    driver.claim(store, load(tiny))
    store.close()
    code, out, _ = call(capsys, "status", str(tmp_path))
    assert code == 0
    assert "sweep tiny [base]" in out and "not started" in out and "0 of 1 runs done" in out


def test_list(capsys):
    code, out, _ = call(capsys, "list")
    assert code == 0
    assert re.search(r"^  assoc_memory: ", out, re.M)
    assert re.search(r"^  nichani24/fig1_mlp  \[gpu, paper, quick\]  Fig 1", out, re.M)
    for field in ("model", "d", "m", "N", "M"):
        assert re.search(rf"^      {field} \[", out, re.M), field


def test_dry_run_prints_buckets_and_compiles_nothing(capsys, no_compile):
    code, out, err = call(capsys, "run", str(FIG1), "--dry-run", "--verbose")
    assert code == 0, err
    spec = load(FIG1)
    header = re.search(r"first round: (\d+) runs in (\d+) buckets", out)
    assert header, out
    runs, buckets = map(int, header.groups())
    # first round of every search: both bracket ends and K interior points, for every seed and learning rate
    expected = (
        sum(
            len(
                search.probes(
                    spec.search,
                    search.start(spec.search, int(evaluate(spec.search.lo, p)), int(evaluate(spec.search.hi, p))),
                )
            )
            for p in spec.points
        )
        * len(spec.seeds)
        * len(spec.train.learning_rates)
    )
    assert runs == expected
    line = r"^  bucket [0-9a-f]{12} \(.*\): (\d+) runs in \d+ chunk\(s\) of (\d+) slots? \("
    bucket_lines = re.findall(line, out, re.M)
    assert len(bucket_lines) == buckets >= 1
    assert sum(int(n) for n, _ in bucket_lines) == runs
    assert all(int(s) >= 1 for _, s in bucket_lines)
    assert f"{len(spec.points)} points x {len(spec.seeds)} seeds" in out


def test_locked_output_folder_exits_3(tmp_path, tiny, capsys, no_compile):
    out_dir = tmp_path / "out"
    with OutputLock(out_dir):
        lease = (out_dir / ".lock").read_text()
        code, out, err = call(capsys, "run", str(tiny), "--out", str(out_dir), "--quiet")
        assert (out_dir / ".lock").read_text() == lease  # the holder's lease is untouched
    assert code == 3
    assert "in use by another jaxmem run" in err and str(out_dir) in err
    assert f"pid {os.getpid()} on host {socket.gethostname()}" in err
    assert not (out_dir / FILENAME).exists()  # refused before touching the store


def test_lock_is_released_after_a_refused_run(tmp_path, tiny, capsys, no_compile):
    out_dir = tmp_path / "out"
    with OutputLock(out_dir):
        call(capsys, "run", str(tiny), "--out", str(out_dir), "--quiet")
    with OutputLock(out_dir):  # the refused run left no lock behind
        pass


def test_folder_of_another_sweep_exits_4(tmp_path, tiny, capsys, no_compile):
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    other = parse(
        {
            "experiment": "assoc_memory",
            "fixed": {"model": "linear", "d": 8, "N": 8},
            "train": {"steps": 4, "eval_every": 2},
        },
        "other_sweep",
    )
    store = Store(out_dir)
    driver.claim(store, other)
    store.close()
    code, out, err = call(capsys, "run", str(tiny), "--out", str(out_dir), "--quiet")
    assert code == 4
    assert "holds a different sweep" in err and "other_sweep" in err and str(out_dir) in err
    store = Store(out_dir)
    try:
        assert store.meta()["fingerprint"] == other.fingerprint  # not taken over
    finally:
        store.close()


def test_claim_accepts_the_same_sweep_again(tmp_path, tiny):
    spec = load(tiny)
    store = Store(tmp_path)
    try:
        driver.claim(store, spec)
        driver.claim(store, load(tiny))
        assert store.meta()["fingerprint"] == spec.fingerprint and store.meta()["spec"] == "tiny"
    finally:
        store.close()


@pytest.mark.parametrize(
    "sizes, message",
    [
        ("[grid]\nd = [8, 1000000]\n", "grid.d: d must be <= 32768, got 1000000"),
        ("[grid]\nd = [8, 60000]\n", "grid.d: d must be <= 32768, got 60000"),
        (
            '[grid]\nd = [20000]\n[search]\nvariable = "N"\nlo = "d"\nhi = "floor(0.5 * d**2)"\n',
            "search.hi: N = 200000000",
        ),
    ],
)
def test_sizes_beyond_what_the_experiment_supports_exit_2_and_write_nothing(
    tmp_path, capsys, no_compile, sizes, message
):
    """Issue 12 item 5: such sizes failed with a traceback from the random draws after creating the store."""
    path = tmp_path / "huge.toml"
    path.write_text(
        'experiment = "assoc_memory"\n[fixed]\nmodel = "linear"\n[train]\nsteps = 64\neval_every = 32\n' + sizes
    )
    for extra in (["--dry-run"], []):
        code, _, err = call(capsys, "run", str(path), "--out", str(tmp_path / "out"), *extra)
        assert code == 2 and message in err and "the largest" in err
    assert not (tmp_path / "out").exists()


def test_a_too_long_output_folder_name_exits_2_naming_it(tmp_path, tiny, capsys, no_compile):
    """Reliability issue, item 6: `OSError: File name too long` from `run` and `status`."""
    long = tmp_path / ("a" * 256)
    for argv in (["run", str(tiny), "--out", str(long), "--quiet"], ["status", str(long)], ["compare", long, tmp_path]):
        code, out, err = call(capsys, *map(str, argv))
        assert code == 2 and out == ""
        assert err.startswith(f"jaxmem: error: {'--out' if argv[0] == 'run' else 'output folder'} {long}: ")
        assert "256 bytes long, more than file systems allow (255)" in err and err.count("\n") == 1
    nested = tmp_path / "new" / ("b" * 300) / "c"  # below a folder still to be created
    code, _, err = call(capsys, "run", str(tiny), "--out", str(nested), "--dry-run")
    assert code == 2 and "300 bytes long" in err
    assert sorted(tmp_path.iterdir()) == [tiny]


@pytest.mark.parametrize("below", ["", "sub"])
def test_an_output_folder_that_is_a_file_exits_2(tmp_path, tiny, capsys, no_compile, below):
    """Reliability issue, item 6: `FileExistsError` from the lock (NotADirectoryError one level down)."""
    file = tmp_path / "results.txt"
    file.write_text("keep me\n")
    out = file / below if below else file
    for extra in ([], ["--dry-run"]):
        code, _, err = call(capsys, "run", str(tiny), "--out", str(out), "--quiet", *extra)
        assert code == 2 and err == f"jaxmem: error: --out {out}: {file} is a file, not a folder\n"
    code, _, err = call(capsys, "status", str(file))
    assert code == 2 and err == f"jaxmem: error: output folder {file}: {file} is a file, not a folder\n"
    assert file.read_text() == "keep me\n"


def test_an_empty_out_exits_2_instead_of_using_the_default_folder(tmp_path, tiny, capsys, no_compile, monkeypatch):
    """Reliability issue, item 6: `--out ""` silently became results/<spec>-<preset>."""
    monkeypatch.chdir(tmp_path)
    for empty in ("", "  "):
        code, _, err = call(capsys, "run", str(tiny), "--out", empty, "--quiet")
        assert code == 2 and err == "jaxmem: error: --out: the name is empty; give a folder\n"
    code, _, err = call(capsys, "status", "")
    assert code == 2 and "the name is empty" in err
    assert not (tmp_path / "results").exists()


def test_library_log_lines_keep_their_exceptions_last_line_not_the_traceback():
    """Was: orbax's writer threads printed two 40-line tracebacks on a full disk before jaxmem's one-line error."""
    import logging

    from jaxmem.cli.main import BriefLog

    try:
        raise OSError(28, "No space left on device")
    except OSError:
        record = logging.LogRecord("orbax", logging.ERROR, __file__, 1, "save thread failed", None, sys.exc_info())
    line = BriefLog("[jaxmem] %(message)s").format(record)
    assert line == "[jaxmem] save thread failed\n  OSError: [Errno 28] No space left on device"
    assert "Traceback" in logging.Formatter().format(record)  # --debug: whole
