"""`jaxmem.run`: a sweep from Python, with the spec as a file, as data, or already loaded, and
optionally an Experiment object of the caller's own instead of a named one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from jaxmem.driver.sweep import run_sweep
from jaxmem.experiments.interface import Experiment
from jaxmem.experiments.registry import register
from jaxmem.spec.sweep import SweepSpec, load, parse, read_toml


def run(
    spec: str | Path | dict | SweepSpec,
    out_dir: str | Path,
    *,
    experiment: Experiment | None = None,
    preset: str | None = None,
    quiet: bool = True,
) -> Path:
    """Run (or resume) a sweep into `out_dir` and write its report; returns the report's path.
    `spec`: a TOML file's path, the spec as data (its tables as dicts), or a SweepSpec.
    `experiment`: run this Experiment (registered under its name) instead of the one the spec names."""
    return run_sweep(loaded(spec, experiment, preset), Path(out_dir), quiet=quiet)


def loaded(spec: Any, experiment: Experiment | None, preset: str | None) -> SweepSpec:
    """The validated SweepSpec of any of `run`'s spec forms."""
    if isinstance(spec, SweepSpec):
        if experiment is not None:
            raise ValueError("give the experiment in the spec data, not beside an already loaded SweepSpec")
        return spec
    if experiment is None and not isinstance(spec, dict):
        return load(spec, preset)
    raw = dict(spec) if isinstance(spec, dict) else read_toml(Path(spec))
    if experiment is not None:
        raw["experiment"] = register(experiment)
    return parse(raw, name="sweep" if isinstance(spec, dict) else Path(spec).stem, preset=preset)
