"""mkdocs hook: every page of benchmarks/ and sweeps/ is in the nav. mkdocs.yml names the known ones with short
titles; a page it does not name (a new RESULTS_*.md, a new family's README) is appended to its section under
its own first heading, so that adding a page never leaves it out of the site's navigation."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SECTIONS = {"Performance": "benchmarks/*.md", "Results": "sweeps/**/README*.md"}


def on_config(config):
    named = set(pages_named(config["nav"]))
    for section in config["nav"]:
        for title, entries in section.items():
            if title in SECTIONS:
                new = sorted(p.relative_to(ROOT).as_posix() for p in ROOT.glob(SECTIONS[title]))
                entries += [{heading(uri): uri} for uri in new if uri not in named]
    return config


def pages_named(nav) -> list[str]:
    """Every page path a (nested) mkdocs nav names."""
    if isinstance(nav, str):
        return [nav]
    items = nav.values() if isinstance(nav, dict) else nav
    return [uri for item in items for uri in pages_named(item)]


def heading(uri: str) -> str:
    """The page's first level-1 heading, else its file name."""
    lines = (ROOT / uri).read_text().splitlines()
    return next((line[2:].strip() for line in lines if line.startswith("# ")), Path(uri).stem)
