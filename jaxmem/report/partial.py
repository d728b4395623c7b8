"""What report.md says of an unfinished sweep: a first line with how much of the planned work is stored
and when the sweep stopped (or that it still runs), a note in the heading of every section computed from
the stored results, and "on a partial sweep" on every line with a verdict. Whether a sweep is finished is
decided as `jaxmem status` decides it (jaxmem.persistence.progress)."""

from __future__ import annotations

import dataclasses
import re

import pandas as pd

from jaxmem.persistence.progress import Found
from jaxmem.report.export import iso_times
from jaxmem.report.verdicts import FAIL, INCONCLUSIVE, NOT_TESTABLE, PASS

HEADING = re.compile(r"^#{2,3} ")
VERDICT = re.compile(rf"\*\*(?:{PASS}|{FAIL}|{INCONCLUSIVE}|{NOT_TESTABLE})\*\*")  # Verdict.text(): bold
ON_PARTIAL = "(on a partial sweep)"


@dataclasses.dataclass(frozen=True)
class Partial:
    """An unfinished sweep: `points` grid points with results of `total_points` planned; `done` of
    `planned` searches (a grid sweep: runs), `noun` naming which; `per_point` searches planned per grid
    point (None for a grid sweep or where unknown); `stopped`, e.g. "interrupted at <time> (…)"."""

    points: int
    total_points: int | None
    done: int
    planned: int | None
    noun: str
    per_point: int | None
    stopped: str

    def headline(self) -> str:
        """e.g. "partial: 1 of 4 grid points with results, 9 of 12 searches not finished; sweep
        interrupted at 2025-01-31T12:00:00.000Z (its last stored result)"."""
        points = f"{self.points}" + (f" of {self.total_points}" if self.total_points is not None else "")
        if self.planned is None:
            work = f"{self.done} {self.noun} finished (the planned totals are not recorded)"
        else:
            work = f"{max(self.planned - self.done, 0)} of {self.planned} {self.noun} not finished"
        return f"partial: {points} grid points with results, {work}; sweep {self.stopped}."

    def note(self) -> str:
        """e.g. "(partial: 3 of 12 searches)"."""
        planned = f" of {self.planned}" if self.planned is not None else ""
        return f"(partial: {self.done}{planned} {self.noun})"


def partial_of(found: Found, points: int, lock: str, last_result: float | None) -> Partial:
    """The Partial of an unfinished sweep's progress, `points` of its grid points with results, the
    output folder's lock state (jaxmem.persistence.lock.lock_state) and its last result's Unix time."""
    done, planned = found.work()
    per_point = found.units // found.points if found.search and found.units and found.points else None
    noun = "searches" if found.search else "runs"
    return Partial(points, found.points, done, planned, noun, per_point, stopped(lock, last_result))


def stopped(lock: str, last_result: float | None) -> str:
    """ "running (<holder>), last result at <time>" while a live run holds the folder's lock, else
    "interrupted at <time> (its last stored result)"; times in ISO 8601, UTC."""
    at = iso_times(pd.Series([last_result])).iloc[0] if last_result is not None else None
    if lock.startswith("running"):
        holder = lock.removeprefix("running").removeprefix(": ")
        return f"running ({holder}), " + (f"last result at {at}" if at else "no result stored yet")
    return f"interrupted at {at} (its last stored result)" if at else "interrupted before storing a result"


def marked(section: str, partial: Partial | None) -> str:
    """`section` with the partial note after each of its (sub)headings and "(on a partial sweep)" at the
    end of each line outside a table that holds a verdict; unchanged for a finished sweep (None)."""
    if partial is None:
        return section
    return "\n".join(marked_line(line, partial.note()) for line in section.split("\n"))


def marked_line(line: str, note: str) -> str:
    if HEADING.match(line):
        return f"{line} {note}"
    if line.startswith("|") or not VERDICT.search(line):
        return line
    body, end = (line[:-1], ".") if line.endswith(".") else (line, "")
    return f"{body} {ON_PARTIAL}{end}"
