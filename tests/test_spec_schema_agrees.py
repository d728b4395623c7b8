"""jaxmem's spec loader and the JSON Schema an editor checks a spec against (docs/sweep.schema.json) agree: on every
shipped sweep (both accept it) and on mutations of shipped sweeps that the schema can judge (misspelled keys, wrong
kinds, strings for numbers, values below a key's limit, open bounds): both accept or both refuse each. Spec
loading only, nothing compiles."""

import copy
import functools
import itertools
import json
import math
import random
import tomllib
from pathlib import Path

import jsonschema
import pytest

from jaxmem.spec.document import SweepTables
from jaxmem.spec.sweep import SpecError, load, parse
from jaxmem.spec.tables import Bounds, Flag, key_shape, table_keys

ROOT = Path(__file__).resolve().parents[1]
VALIDATOR = jsonschema.Draft7Validator(json.loads((ROOT / "docs" / "sweep.schema.json").read_text()))
SHIPPED = sorted((ROOT / "sweeps").glob("*/*.toml"))
BASES = ["nichani24/fig1_mlp.toml", "li_thesis/ch2_alpha.toml", "li_thesis/ch6_mechanism.toml", "deora24/thm1_gd.toml"]
MUTATIONS = 50
HOWS = ("misspell", "string", "bool", "below", "open", "table")


def accepts(raw: dict, name: str) -> bool:
    try:
        parse(raw, name)
    except SpecError:
        return False
    return True


def test_jaxmem_and_the_schema_accept_every_shipped_sweep():
    refused = [p.name for p in SHIPPED if not VALIDATOR.is_valid(tomllib.loads(p.read_text()))]
    assert len(SHIPPED) >= 85 and refused == []
    for path in SHIPPED:
        load(path)  # (its default preset; every other preset's kinds and limits too)


def typed_leaves(data, cls, path=()) -> list[tuple[tuple, object]]:
    """(path, (field, kind)) of every value in `data` that a key of the table class `cls` types (tables and lists
    of tables walked, free tables such as [fixed] and [grid] left out: only the experiment knows their kinds)."""
    leaves = []
    for name, value in data.items():
        if name not in table_keys(cls):
            continue
        field, kind = table_keys(cls)[name]
        shape, inner, _ = key_shape(kind)
        if shape == "table" and isinstance(value, dict):
            leaves += typed_leaves(value, inner, (*path, name))
        elif shape == "tables" and isinstance(value, (dict, list)):
            items = enumerate(value) if isinstance(value, list) else [(None, value)]
            for i, item in items:
                leaves += typed_leaves(item, inner, (*path, name) if i is None else (*path, name, i))
        elif shape == "leaf":
            leaves.append(((*path, name), (field, kind)))
    return leaves


def mutated(value, field, kind, how: str):
    """`value` changed `how`, and whether jaxmem and the schema must then refuse it (None: it depends on the kind);
    None for a change that does not apply to this value."""
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    limit = field.metadata.get("ge", field.metadata.get("gt"))
    if how == "string" and number:
        return str(value), None  # ("3" is an expression where one may stand)
    if how == "bool" and kind is not Flag and key_shape(kind)[1] is not Flag:
        return True, True
    if how == "below" and number and limit is not None:
        return limit - 1, True
    if how == "open" and kind == Bounds | None:
        return [-math.inf, math.inf], False
    if how == "table" and not isinstance(value, dict):
        return {"value": value}, True
    return None


@functools.cache
def mutations() -> list[tuple[str, dict, str, bool | None]]:
    """MUTATIONS deterministic changes to BASES, each kind of change (HOWS) in turn: (base, changed data, what
    changed, whether both must refuse it)."""
    found = []
    for base in BASES:
        raw = tomllib.loads((ROOT / "sweeps" / base).read_text())
        spots = [(("",), leaf) for leaf in typed_leaves(raw, SweepTables)]
        for preset, table in raw.get("presets", {}).items():
            spots += [(("presets", preset), leaf) for leaf in typed_leaves(table, SweepTables)]
        for (prefix, (path, (field, kind))), how in itertools.product(spots, HOWS):
            where = [p for p in prefix if p] + list(path)
            changed = copy.deepcopy(raw)
            table = changed
            for step in where[:-1]:
                table = table[step]
            name = ".".join(map(str, where))
            if how == "misspell":
                table[where[-1] + "_"] = table.pop(where[-1])
                found.append((how, (base, changed, f"{name}_", True)))
            elif (change := mutated(table[where[-1]], field, kind, how)) is not None:
                table[where[-1]] = change[0]
                found.append((how, (base, changed, f"{name} = {change[0]!r}", change[1])))
    kinds = [
        random.Random(0).sample(group, len(group)) for group in (([m for h, m in found if h == how]) for how in HOWS)
    ]
    return [m for row in itertools.zip_longest(*kinds) for m in row if m is not None][:MUTATIONS]


@pytest.mark.parametrize("base, raw, what, refused", mutations(), ids=lambda x: x if isinstance(x, str) else "")
def test_jaxmem_and_the_schema_agree_on_a_mutated_sweep(base, raw, what, refused):
    schema_ok, jaxmem_ok = VALIDATOR.is_valid(raw), accepts(raw, Path(base).stem)
    assert schema_ok == jaxmem_ok, f"{base}, {what}: the schema {'accepts' if schema_ok else 'refuses'} it, jaxmem not"
    assert refused is None or schema_ok is not refused


def test_the_mutations_cover_each_kind_of_change():
    whats = [what for _, _, what, _ in mutations()]
    assert len(whats) == MUTATIONS and sum(w.endswith("_") for w in whats) >= MUTATIONS // len(HOWS)
    assert sum("[-inf, inf]" in w for w in whats) >= 2 and sum("= True" in w for w in whats) >= MUTATIONS // len(HOWS)
    assert sum("= '" in w for w in whats) >= MUTATIONS // len(HOWS) and sum("{'value'" in w for w in whats) >= 5
