"""What a sweep prints as it goes: log lines without rich's source location on a terminal, plain and unwrapped
off one (a log file, a pipe); and report.md's sweep metadata without an empty "Preset:" line."""

import functools
import io

import rich.console

from jaxmem.driver import progress
from jaxmem.report.overview import meta_section

LONG = "compiling bucket " + "x" * 150  # longer than the 80 columns rich assumes off a terminal


def test_a_terminal_log_line_names_no_source_location(monkeypatch):
    screen = io.StringIO()
    terminal = functools.partial(rich.console.Console, file=screen, force_terminal=True, color_system=None, width=120)
    monkeypatch.setattr(progress, "Console", terminal)
    with progress.Progress(title="fig1") as shown:
        assert shown.bar is not None
        shown.note("compiling bucket 3")
    line = next(line for line in screen.getvalue().splitlines() if "compiling bucket 3" in line)
    assert "progress.py" not in line and ".py:" not in line


def test_off_a_terminal_a_log_line_is_one_plain_line(capsys):
    with progress.Progress(title="fig1") as shown:  # (pytest's captured stderr is no terminal)
        assert shown.bar is None
        shown.note(LONG)
    assert f"[jaxmem] {LONG}\n" in capsys.readouterr().err


def test_the_eta_is_of_the_queued_runs_and_says_that_open_searches_add_more():
    shown = progress.Progress(quiet=True)
    shown.advance(steps=100, runs=10)
    shown.update(done=10, pending=5, searches=(2, 6))
    assert "s (queued runs; searches add more)" in shown.info()
    shown.update(done=10, pending=5, searches=(6, 6))
    assert shown.info().endswith("s (queued runs)")


def test_report_metadata_leaves_out_an_empty_preset():
    text = meta_section({"spec": "mine", "preset": "", "experiment": "assoc_memory"})
    assert "Preset" not in text and "- Spec: mine" in text
    assert "- Preset: quick" in meta_section({"spec": "mine", "preset": "quick"})
