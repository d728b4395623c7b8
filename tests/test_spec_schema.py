"""The JSON Schema of sweep specs (docs/sweep.schema.json, `jaxmem schema`) and the reference docs/spec.md: both
generated from the spec's tables, committed as generated, and carried by every shipped sweep."""

import copy
import json
import os
import subprocess
import tomllib
from pathlib import Path

import jsonschema
import pytest

from jaxmem.cli.main import main
from jaxmem.spec.document import reference, schema_text
from jaxmem.spec.sweep import SpecError, parse

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = ROOT / "docs" / "sweep.schema.json"
SHIPPED = subprocess.run(
    ["git", "ls-files", "sweeps/**/*.toml", "examples/*.toml"], cwd=ROOT, capture_output=True, text=True, check=True
).stdout.split()


@pytest.fixture(scope="module")
def validator():
    schema = json.loads(SCHEMA.read_text())
    jsonschema.Draft7Validator.check_schema(schema)  # taplo (the TOML language server) reads draft 7
    return jsonschema.Draft7Validator(schema)


def test_the_committed_schema_and_reference_are_what_the_code_writes():
    assert SCHEMA.read_text() == schema_text(), "run: jaxmem schema --out docs/sweep.schema.json"
    assert (ROOT / "docs" / "spec.md").read_text() == reference() + "\n", "run: jaxmem schema --docs --out docs/spec.md"


@pytest.mark.parametrize("name", SHIPPED)
def test_every_shipped_sweep_carries_the_schema_and_validates_against_it(validator, name):
    path = ROOT / name
    directive = path.read_text().splitlines()[0]
    assert directive.startswith("#:schema ") and (path.parent / directive.split()[1]).resolve() == SCHEMA
    errors = [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(tomllib.loads(path.read_text()))]
    assert errors == []


FIG1 = tomllib.loads((ROOT / "sweeps" / "nichani24" / "fig1_mlp.toml").read_text())


@pytest.mark.parametrize(
    "where, value, problem",
    [
        (("train", "stpes"), 3, "train.stpes: unknown key (did you mean 'steps'?)"),
        (("engine", "pad_ratio"), 0.5, "engine.pad_ratio: must be >= 1, got 0.5"),
        (("search", "mode"), "fast", "search.mode: must be one of ['verified', 'paper'], got 'fast'"),
        (("train", "learning_rates"), [], "train.learning_rates: must be a number or a non-empty list"),
        (("report", "heatmap"), {"x": "d"}, "report.heatmap.y: missing"),
        (("report", "trajectory", "plateau"), {"metric": "loss", "near": 1, "tol": -1}, "plateau[0].tol: must be"),
    ],
)
def test_the_schema_refuses_what_the_spec_refuses(validator, where, value, problem):
    """An editor flags, as you type, what `jaxmem run` would refuse (and the reverse for the valid file)."""
    raw = copy.deepcopy(FIG1)
    table = raw
    for key in where[:-1]:
        table = table.setdefault(key, {})
    table[where[-1]] = value
    del raw["presets"]
    assert not validator.is_valid(raw)
    with pytest.raises(SpecError) as err:
        parse(raw, "fig1_mlp")
    assert any(problem in p for p in err.value.problems), err.value.problems


def test_jaxmem_schema_writes_the_schema_and_the_reference(tmp_path, capsys):
    assert main(["schema", "--out", str(tmp_path / "s.json")]) == 0
    assert json.loads((tmp_path / "s.json").read_text()) == json.loads(SCHEMA.read_text())
    assert main(["schema", "--docs"]) == 0 and "## report.trajectory.crossings[]" in capsys.readouterr().out
    assert main(["list", "--spec"]) == 0 and "| `matmul_precision` |" in capsys.readouterr().out
    assert os.path.relpath(SCHEMA, ROOT / "sweeps" / "nichani24") == "../../docs/sweep.schema.json"


def test_the_reference_covers_axis_forms_expressions_and_field_kinds():
    """docs/spec.md names every axis key, every function and operator of the expression language, every field kind."""
    from jaxmem.experiments.interface import KINDS
    from jaxmem.spec import expr
    from jaxmem.spec.document import AXIS

    text = (ROOT / "docs" / "spec.md").read_text()
    named = [f"| `{key}` |" for key in AXIS["anyOf"][1]["properties"]] + [f"| {kind} |" for kind in KINDS]
    named += [f"`{name}`" for name in expr.FUNCTIONS] + [f"`{symbol}`" for symbol in expr.SYMBOLS.values()]
    assert [n for n in named if n not in text] == []
    assert set(expr.SYMBOLS) == set(expr._BINARY) | set(expr._UNARY)
