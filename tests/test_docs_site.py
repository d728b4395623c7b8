"""The documentation site (mkdocs.yml): built with warnings as errors, so a broken link, a missing anchor, a page
left out of the nav or a stale API name fails; and the annotated spec of docs/guide/sweep-specs.md is valid."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from jaxmem.spec.sweep import parse

ROOT = Path(__file__).resolve().parents[1]
DOCS_PACKAGES = ("mkdocs", "material", "mkdocstrings", "mkdocstrings_handlers.python")


def missing_docs_packages() -> list[str]:
    return [name for name in DOCS_PACKAGES if importlib.util.find_spec(name.split(".")[0]) is None]


@pytest.mark.skipif(
    bool(missing_docs_packages()), reason="the docs packages are not installed: pip install -e '.[docs]'"
)
def test_the_site_builds_with_warnings_as_errors(tmp_path):
    site = tmp_path / "site"
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    built = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(ROOT / "mkdocs.yml"), "-d", str(site)],
        capture_output=True,
        text=True,
        env=env,
    )
    assert built.returncode == 0, f"{built.stderr[-4000:]}\n(a new page goes into mkdocs.yml's nav)"
    api = (site / "docs" / "reference" / "api" / "index.html").read_text()
    assert "jaxmem.driver.api.run" in api and "from_flax" in api
    columns = (site / "docs" / "reference" / "columns" / "index.html").read_text()
    assert "steps_to_threshold" in columns, "the columns page is generated from jaxmem.report.columns"
    assert (site / "docs" / "gallery" / "index.html").exists() and (
        site / "benchmarks" / "RESULTS" / "index.html"
    ).exists()


def test_the_annotated_spec_is_a_valid_spec():
    guide = (ROOT / "docs" / "guide" / "sweep-specs.md").read_text()
    spec = next(b for b in re.findall(r"```toml\n(.*?)```", guide, re.S) if b.startswith("experiment = "))
    raw = tomllib.loads(spec)
    assert "threshold" not in raw["search"], "the example states success in [success], not the legacy key"
    for preset in (None, "quick"):
        parse(raw, name="annotated", preset=preset)
