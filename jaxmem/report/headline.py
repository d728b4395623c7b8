"""A written report's headline as data, for text generated from it (sweeps/readme_numbers.py: the READMEs' numbers
and docs/gallery.md): which sweep and preset it is of and over which seeds, report.md's sections, and every
verdict report.md states with its section. Read from the files `jaxmem report` wrote, never recomputed: a
verdict is an entry of verdicts.json (jaxmem.report.verdicts: the one machine-readable form every verdict of
report.md is written in), diagnostics left out: one claim, one verdict."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pandas as pd

from jaxmem.persistence.store import load_results
from jaxmem.report.text import number

HEADING = re.compile(r"^(#{2,4}) (.+?)\s*(\(partial: .*\))?$")


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


def check_text(entry: dict) -> str:
    """One verdicts.json entry as a line: the claim, the measured value with its 95 % interval where there is
    one, the verdict in bold and its reason, e.g. "b in [0, inf]: measured 0.47 (95 % CI [0.44, 0.51]): **PASS**"."""
    measured = entry.get("measured")
    shown = ""
    if measured is not None:
        low, high = entry.get("interval") or (None, None)
        shown = f": measured {number(measured)}" + (
            f" (95 % CI [{number(low)}, {number(high)}])" if low is not None and high is not None else ""
        )
    reason = f" ({entry['reason']})" if entry.get("reason") else ""
    return f"{entry['claim']}{shown}: **{entry['outcome']}**{reason}"


def verdicts_of(folder: Path) -> pd.DataFrame:
    """One row per verdict of verdicts.json that is no diagnostic: section (report.md's heading path), check
    (check_text), outcome, and the entry's claim and measured value (None where it states none)."""
    path = folder / "verdicts.json"
    entries = json.loads(path.read_text())["verdicts"] if path.exists() else []
    rows = [
        {
            "section": e["section"],
            "check": check_text(e),
            "outcomes": e["outcome"],
            "claim": e["claim"],
            "measured": e.get("measured"),
        }
        for e in entries
        if not e.get("diagnostic")
    ]
    return pd.DataFrame(rows, columns=["section", "check", "outcomes", "claim", "measured"], dtype=object)


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
        verdicts=verdicts_of(folder),
        partial=first if first.startswith("partial:") else "",
    )
