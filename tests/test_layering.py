"""The package's import layering (pyproject's [tool.importlinter] contract): each layer of the pipeline
imports only the layers below it, and experiments import nothing of the engine."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def lint_imports(package_parent: Path) -> subprocess.CompletedProcess:
    """import-linter over the `jaxmem` package found in `package_parent`, with the project's contracts."""
    script = "import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())"
    return subprocess.run(
        [sys.executable, "-c", script, "--config", str(ROOT / "pyproject.toml"), "--no-cache"],
        cwd=package_parent,
        env={"PYTHONPATH": str(package_parent), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
    )


def test_the_package_keeps_its_layers():
    result = lint_imports(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


def test_an_experiment_importing_the_engine_breaks_the_contract(tmp_path):
    shutil.copytree(ROOT / "jaxmem", tmp_path / "jaxmem", ignore=shutil.ignore_patterns("__pycache__"))
    draws = tmp_path / "jaxmem" / "experiments" / "draws.py"
    draws.write_text(draws.read_text() + "\nfrom jaxmem.engine import program  # noqa\n")
    result = lint_imports(tmp_path)
    assert result.returncode != 0
    assert "jaxmem.experiments.draws -> jaxmem.engine.program" in result.stdout
