"""A user's own experiment, outside the package: the worked example of docs/guide/own-experiment.md
(examples/relu_teacher.py) run as a sweep by the CLI from another folder, and an Experiment object handed to
`jaxmem.run`."""

from __future__ import annotations

import importlib.util
import json
import math

import pytest

import jaxmem
from helpers import ROOT, jaxmem_cli
from jaxmem.spec.sweep import SpecError, parse

EXAMPLE = ROOT / "examples" / "relu_teacher.toml"


def example_module():
    spec = importlib.util.spec_from_file_location("relu_teacher_copy", ROOT / "examples" / "relu_teacher.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_readme_example_runs_from_outside_the_package(tmp_path):
    out = tmp_path / "out"
    process = jaxmem_cli("run", EXAMPLE, "--preset", "quick", "--out", out, cwd=tmp_path)
    output, _ = process.communicate(timeout=600)
    assert process.returncode == 0, output
    searches = jaxmem.load_results(out, "searches")
    runs = jaxmem.load_results(out, "runs")
    assert len(searches) == 2 and (out / "report.md").exists()
    for s in searches.itertuples():
        assert math.isfinite(s.capacity) and 4 <= s.capacity <= 128
        at = runs[(runs["point"] == s.point) & (runs["seed"] == s.seed)]
        final_error = at["final_metrics"].map(lambda m: json.loads(m)["test_error"])
        # the smallest n found succeeds (final test error <= 5 %), the value below it fails
        assert (final_error[at["value"] == s.capacity] <= 0.05).all()
        if math.isfinite(s.first_failure):
            assert (final_error[at["value"] == s.first_failure] > 0.05).all()
            assert s.first_failure < s.capacity
    # a later `jaxmem report`, from another folder, finds the module again (its folder is stored)
    (out / "report.md").unlink()
    (tmp_path / "elsewhere").mkdir()
    process = jaxmem_cli("report", out, cwd=tmp_path / "elsewhere")
    output, _ = process.communicate(timeout=300)
    assert process.returncode == 0, output
    assert "## Buckets" in (out / "report.md").read_text()


def test_an_experiment_object_runs_through_jaxmem_run(tmp_path):
    module = example_module()
    spec = {
        "seeds": [0],
        "fixed": {"d": 4, "m": 8, "k": 2, "n_test": 64},
        "grid": {"n": [8, 64]},
        "train": {"steps": 200, "eval_every": 100, "learning_rates": [0.01], "metric": "test_error"},
    }
    report = jaxmem.run(spec, tmp_path / "out", experiment=module.EXPERIMENT)
    runs = jaxmem.load_results(tmp_path / "out")
    assert report.exists() and sorted(runs["n"]) == [8, 64] and (runs["steps_run"] == 200).all()


@pytest.mark.parametrize(
    "name, message",
    [
        ("no_such_module_xyz:EXPERIMENT", "cannot import 'no_such_module_xyz'"),
        ("json:dumps", "json.dumps is a function, not a jaxmem Experiment"),
        ("json:NOPE", "json.NOPE is no such attribute"),
        ("assoc_memroy", "did you mean 'assoc_memory'"),
    ],
)
def test_a_bad_experiment_reference_is_a_spec_error(name, message):
    with pytest.raises(SpecError) as err:
        parse({"experiment": name, "fixed": {}}, name="bad")
    assert message in str(err.value)


def test_the_guide_shows_the_example_as_it_is():
    guide = (ROOT / "docs" / "guide" / "own-experiment.md").read_text()
    module = (ROOT / "examples" / "relu_teacher.py").read_text()
    spec = EXAMPLE.read_text().split("[presets.quick]")[0].rstrip()
    assert f"```python\n{module.rstrip()}\n```" in guide
    assert f"```toml\n{spec}\n```" in guide
