"""mkdocs hook: the page docs/reference/columns.md, generated at build time from what `jaxmem list --columns`
prints (jaxmem.report.columns.tables), so that it never drifts from the code."""

from __future__ import annotations

import sys
from pathlib import Path

from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parents[1]
PAGE = "docs/reference/columns.md"
INTRO = """# Columns

Every column of every table jaxmem stores or a report writes, generated from the code at each build of this
site; `jaxmem list --columns` prints the same. The store's own tables are what `jaxmem.load_results(out, table)`
returns; the `.csv` files are the report's (see [Outputs](../guide/outputs.md) for the effective config they show).
"""


def on_files(files: Files, config) -> Files:
    files.append(File.generated(config, PAGE, content=page()))
    return files


def page() -> str:
    sys.path.insert(0, str(ROOT))  # this checkout's jaxmem, whichever one is installed
    from jaxmem.report.columns import tables

    sections = [INTRO]
    for name, columns in tables().items():
        rows = [f"| `{column}` | {cell(meaning)} |" for column, meaning in columns.items()]
        sections.append("\n".join([f"## {name}", "", "| column | meaning |", "| --- | --- |", *rows, ""]))
    return "\n".join(sections)


def cell(text: str) -> str:
    """`text` as one Markdown table cell."""
    return text.replace("|", "\\|").replace("\n", " ")
