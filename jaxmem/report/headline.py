"""A written report's headline as data, for text generated from it (sweeps/readme_numbers.py: the READMEs' numbers
and docs/gallery.md): which sweep and preset it is of and over which seeds, report.md's sections, and every
verdict report.md states with its section. Read from the files `jaxmem report` wrote, never recomputed: a
verdict is a line that jaxmem.report.partial.VERDICT marks, the pattern that flags verdicts on a partial
sweep, so every section that states one is covered."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pandas as pd

from jaxmem.persistence.store import load_results
from jaxmem.report.partial import ON_PARTIAL, VERDICT
from jaxmem.report.text import row_cells

HEADING = re.compile(r"^(#{2,4}) (.+?)\s*(\(partial: .*\))?$")
OUTCOME = re.compile(r"\*\*(.+?)\*\*")


@dataclasses.dataclass(frozen=True)
class Headline:
    """`spec` and `preset` of the stored sweep, its searched `variable` ("" for a grid sweep), the `seeds`
    its runs used and the config `fields` they set, report.md's `sections` (heading path "Capacity" or
    "Heatmap / Floor in d" -> body), its `verdicts` (section, check, outcomes) and `partial`: report.md's
    line on an unfinished sweep ("" when finished)."""

    folder: Path
    spec: str
    preset: str
    variable: str
    seeds: tuple[int, ...]
    fields: tuple[str, ...]
    sections: dict[str, str]
    verdicts: pd.DataFrame
    partial: str

    def table(self, name: str) -> pd.DataFrame | None:
        """A CSV the report wrote (capacity, heatmap, relation_fits, rates, runs, trajectories, ...); None
        when this report has none."""
        path = self.folder / f"{name}.csv"
        return pd.read_csv(path) if path.exists() else None


def sections_of(text: str) -> dict[str, str]:
    """report.md's sections by heading path: a level-2 heading's title, a deeper one's joined to its
    parents' with " / "; each body runs to the next heading."""
    sections: dict[str, list[str]] = {}
    path: list[str] = []
    current = None
    for line in text.splitlines():
        match = HEADING.match(line)
        if match:
            depth = len(match.group(1)) - 2
            path = path[:depth] + [match.group(2)]
            current = sections.setdefault(" / ".join(path), [])
        elif current is not None:
            current.append(line)
    return {name: "\n".join(body).strip("\n") for name, body in sections.items()}


def table_rows(body: str) -> list[tuple[list[str], list[str]]]:
    """(header cells, row cells) of every row of every markdown table in `body`."""
    rows, header = [], None
    for line in body.splitlines():
        if not line.startswith("|"):
            header = None
            continue
        cells = row_cells(line)
        if header is None:
            header = cells
        elif not all(set(c) <= set("-: ") for c in cells):
            rows.append((header, cells))
    return rows


def check_text(line: str) -> str:
    """A verdict's line without list markup and the partial-sweep note."""
    return line.strip().removeprefix("- ").replace(f" {ON_PARTIAL}", "").strip()


def verdicts_of(sections: dict[str, str]) -> pd.DataFrame:
    """One row per line (or table row) holding a verdict: section, check (the line; a table row as
    "header: cell" pairs), outcomes (e.g. "PASS", "PASS, FAIL" where a line states two)."""
    rows = []
    for name, body in sections.items():
        lines = [line for line in body.splitlines() if not line.startswith("|") and VERDICT.search(line)]
        lines += ["; ".join(f"{h}: {c}" for h, c in zip(header, cells)) for header, cells in table_rows(body)]
        for line in filter(VERDICT.search, lines):
            outcomes = [OUTCOME.search(m.group(0)).group(1) for m in VERDICT.finditer(line)]
            rows.append({"section": name, "check": check_text(line), "outcomes": ", ".join(outcomes)})
    return pd.DataFrame(rows, columns=["section", "check", "outcomes"])


def headline(folder: str | Path) -> Headline:
    """The headline of the report written in `folder` (run `jaxmem report` first for a current one)."""
    folder = Path(folder)
    meta = load_results(folder, "meta").set_index("key")["value"].to_dict()
    runs = load_results(folder, "runs", expand=False)
    resolved = json.loads(meta.get("resolved_spec", "{}"))
    text = (folder / "report.md").read_text()
    first = text.split("\n\n", 2)[1] if text.count("\n\n") >= 2 else ""
    sections = sections_of(text)
    return Headline(
        folder=folder,
        spec=meta.get("spec", ""),
        preset=meta.get("preset", ""),
        variable=resolved.get("search", {}).get("variable", ""),
        seeds=tuple(sorted(int(s) for s in runs["seed"].unique())),
        fields=tuple(dict.fromkeys(k for c in runs["config"] for k in json.loads(c))),
        sections=sections,
        verdicts=verdicts_of(sections),
        partial=first if first.startswith("partial:") else "",
    )
