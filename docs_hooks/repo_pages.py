"""mkdocs hook: the site mirrors the repository's layout, so every relative link that works on GitHub works on
the site. The pages are the top-level README.md (the site's home), everything under docs/, and the markdown
of benchmarks/ and sweeps/; every other repository file one of them links to (a script, a spec, a figure) is
copied beside it. A link to a file that does not exist stays as written, and `mkdocs build --strict` fails on it.
"""

from __future__ import annotations

import re
from pathlib import Path

from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parents[1]
PAGES = ("README.md", "docs/**/*.md", "benchmarks/*.md", "sweeps/**/*.md")
LINK = re.compile(r"\]\(([^)\s#]+)(?:#[^)\s]*)?\)")  # a markdown link's target, its anchor left off
SKIPPED = ("http:", "https:", "mailto:", "/")


def on_files(files: Files, config) -> Files:
    """The theme's files, then the repository's pages and what they link to (docs/ under its repository path)."""
    site = Files([f for f in files if not f.abs_src_path or not _inside(Path(f.abs_src_path), Path(config.docs_dir))])
    pages = sorted({p.relative_to(ROOT).as_posix() for pattern in PAGES for p in ROOT.glob(pattern)})
    for uri in pages + sorted(linked_files(pages) - set(pages)):
        site.append(File(uri, str(ROOT), config.site_dir, config.use_directory_urls))
    return site


def linked_files(pages: list[str]) -> set[str]:
    """The repository's files (not folders) that `pages` link to by a relative path, as paths from the root."""
    found = set()
    for page in pages:
        for target in LINK.findall((ROOT / page).read_text()):
            if target.startswith(SKIPPED):
                continue
            path = (ROOT / page).parent / target
            if path.is_file() and _inside(path.resolve(), ROOT):
                found.add(path.resolve().relative_to(ROOT).as_posix())
    return found


def _inside(path: Path, folder: Path) -> bool:
    return path.resolve().is_relative_to(folder.resolve())
