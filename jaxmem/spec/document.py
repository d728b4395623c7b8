"""The whole sweep spec as one typed table (`SweepTables`: every table of a spec, presets merged), the JSON Schema
of a spec file that `jaxmem schema` writes (TOML editors check a sweep against it as you type), and the reference
docs/spec.md, both generated from the tables' annotations so that neither can drift from the code."""

from __future__ import annotations

import ast
import dataclasses
import itertools
import json
import typing
from pathlib import Path
from typing import Annotated, Any

from pydantic import WithJsonSchema

from jaxmem.spec import expr
from jaxmem.spec.report_tables import ReportSpec
from jaxmem.spec.sections import EngineSpec, SearchSpec, SuccessTable, TrainSpec
from jaxmem.spec.tables import MAX_INT, BadValue, Expression, Text, Words, key_shape, adapter, key, plain, table_keys

MAX_VALUES = 10**6  # the most values an axis, the seeds or the grid may have: more is a typo, not a sweep


def short(number) -> str:
    """A number for a message: a huge integer by its size (str() of one over 4300 digits even fails)."""
    huge = isinstance(number, int) and number.bit_length() > 64
    return f"a {number.bit_length()}-bit integer" if huge else f"{number}"


def _seeds(value) -> tuple[int, ...]:
    count = isinstance(value, int) and not isinstance(value, bool) and value >= 1
    listed = isinstance(value, list) and value and all(isinstance(s, int) and not isinstance(s, bool) for s in value)
    if not (count or listed and min(value) >= 0):
        raise BadValue(f"must be a positive count or a non-empty list of non-negative integers, got {value!r}")
    if (value if count else len(value)) > MAX_VALUES or listed and max(value) > MAX_INT:
        raise BadValue(f"at most {MAX_VALUES} seeds, each below 2**31, got {short(value) if count else value}")
    if listed and len(set(value)) != len(value):
        raise BadValue(f"duplicates in {value}")
    return tuple(range(value)) if count else tuple(value)


NUMBERS = {"type": "array", "items": {"type": "number"}}
AXIS = {
    "description": "a list of values, or a table: {range = [start, stop, step]} (stop included), "
    "{log_range = [lo, hi], num = k} or {exponents = [first, last, step], base = 2}; round = floor | round | ceil",
    "anyOf": [
        {"type": "array", "minItems": 1},
        {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "range": {**NUMBERS, "minItems": 2, "maxItems": 3},
                "log_range": {**NUMBERS, "minItems": 2, "maxItems": 2},
                "exponents": {**NUMBERS, "minItems": 3, "maxItems": 3},
                "num": {"type": "integer", "minimum": 1},
                "base": {"type": "number", "exclusiveMinimum": 0},
                "round": {"enum": ["floor", "round", "ceil"]},
            },
            "oneOf": [{"required": [k]} for k in ("range", "log_range", "exponents")],
        },
    ],
}
AXIS_WORDS = {  # docs/spec.md's words for each key of an axis table (one per key of AXIS's table)
    "range": "`[start, stop]` or `[start, stop, step]`: start, start + step, ... up to stop, included (step 1)",
    "log_range": "`[lo, hi]` (both > 0) with `num`: num values log-spaced from lo to hi, both included",
    "exponents": "`[first, last, step]`: base ** e for e = first, first + step, ... up to last, included",
    "num": "log_range's count of values (>= 1)",
    "base": "exponents' base (> 0; default 2)",
    "round": '`"floor"`, `"round"` or `"ceil"`: each value rounded to an integer (e.g. a size from a log_range)',
}
Axis = Annotated[Any, WithJsonSchema(AXIS), Words("a list of values or a table")]  # read by sweep.axis_values
Seeds = plain(_seeds, int | list[int], "a count or a list of seeds")


@dataclasses.dataclass(frozen=True)
class SweepTables:
    """A sweep spec, its preset merged in: the experiment, the grid of its configs, and how they run and report."""

    experiment: Text | None = key("a shipped experiment's name, or 'module:ATTRIBUTE' next to the spec", None)
    description: Text = key("what the sweep measures: its first line is `jaxmem list`'s", "")
    seeds: Seeds = key("a count n (seeds 0 to n-1), or a list of seeds", (0,))
    fixed: dict[str, Any] = key("experiment fields held constant: name = value", dict)
    grid: dict[str, Axis] = key("the axes: field (or helper name) = its values; the grid is their product", dict)
    derived: dict[str, Expression] = key("fields computed at each point: name = expression", dict)
    train: TrainSpec = key("training and evaluation", TrainSpec)
    search: SearchSpec | None = key("a search per point and seed", None)
    engine: EngineSpec = key("packing runs into programs", EngineSpec)
    success: SuccessTable | None = key("the success rule (default: train.metric >= search.threshold)", None)
    final_eval: dict[str, Axis] = key(
        "test-time axes: each finished run's final parameters evaluated at every point", dict
    )
    report: ReportSpec = key("report.md, its tables, plots and verdicts", ReportSpec)


SECTIONS = frozenset(table_keys(SweepTables))


# -- the JSON Schema -------------------------------------------------------------------------------------------
def schema() -> dict:
    """The JSON Schema of a sweep spec file: the tables, `extends`, and presets (each a partial spec merged over
    the file's). A file that extends another is partial too: it restates only what differs."""
    full = adapter(SweepTables).json_schema(ref_template="#/definitions/{model}")
    defs = {name: _tidy(d) for name, d in full.pop("$defs").items()}
    defs["SweepTables"] = tables = _tidy(full)
    extends = {"type": "string", "description": "a spec file (next to this one) whose tables this file's merge over"}
    presets = {
        "description": "named variants: `jaxmem run SPEC --preset NAME` merges [presets.NAME] over the spec "
        "(default: quick, where there is one)",
        "type": "object",
        "additionalProperties": {"$ref": "#/definitions/SweepTablesPartial"},
    }
    defs["SweepFile"] = {**tables, "properties": {**tables["properties"], "extends": extends, "presets": presets}}
    defs |= {f"{name}Partial": _partial(d) for name, d in defs.items()}
    return {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "title": "jaxmem sweep spec",
        "description": tables["description"] + " `jaxmem schema` writes this file; docs/spec.md lists the keys.",
        "if": {"required": ["extends"]},  # (not anyOf: a validator reports an error inside a branch at its key)
        "then": {"$ref": "#/definitions/SweepFilePartial"},
        "else": {"$ref": "#/definitions/SweepFile"},
        "definitions": defs,
    }


LIMITS = {"ge": "minimum", "le": "maximum", "gt": "exclusiveMinimum", "lt": "exclusiveMaximum"}


def _tidy(node):
    """pydantic's schema as TOML and JSON Schema draft 7 (the TOML language servers' newest) have it: no null
    (TOML has none), no titles, limits and tuples in draft 7's words, no unknown keys, every table closed (an
    unknown key is named where it stands) and reached without anyOf (`_by_type`)."""
    if isinstance(node, list):
        return [_tidy(n) for n in node]
    if not isinstance(node, dict):
        return node
    named = ("properties", "$defs")  # keys whose values are tables by name
    node = {k: {n: _tidy(p) for n, p in v.items()} if k in named else _tidy(v) for k, v in node.items() if k != "title"}
    node = {LIMITS.get(k, k): v for k, v in node.items()}
    if "prefixItems" in node:
        node["items"] = node.pop("prefixItems")
    options = [o for o in node.pop("anyOf", []) if o != {"type": "null"}]
    if len(options) > 1 and any("$ref" in o for o in options):
        node |= _by_type(options)
    elif options:
        node = {**options[0], **node} if len(options) == 1 else {**node, "anyOf": options}
    if node.get("default", 0) is None or node.get("type") == "object" and node.get("default") == []:
        node.pop("default")
    return {**node, "additionalProperties": False} if "properties" in node else node


def _by_type(options: list[dict]) -> dict:
    """A choice between a table and other kinds (a table or a list of them, an expression or a table) as
    if/then/else on the value's JSON type: an error inside the table is then reported at its key, where anyOf
    reports only that no option matched, on the table's first line."""
    first, *rest = options
    otherwise = _by_type(rest) if len(rest) > 1 else rest[0]
    return {"if": {"type": "object" if "$ref" in first else first["type"]}, "then": first, "else": otherwise}


def _partial(node):
    """A table's schema with no key required, each sub-table partial too (presets and extends merge tables)."""
    if isinstance(node, list):
        return [_partial(n) for n in node]
    if not isinstance(node, dict):
        return node
    node = {k: _partial(v) for k, v in node.items() if k != "required" or "properties" not in node}
    if isinstance(node.get("$ref"), str) and not node["$ref"].endswith("Partial"):
        node["$ref"] += "Partial"
    return node


def schema_text() -> str:
    return json.dumps(schema(), indent=2, ensure_ascii=False) + "\n"


# -- docs/spec.md ----------------------------------------------------------------------------------------------
def reference() -> str:
    """docs/spec.md: every table, and per key its kind, default and meaning."""
    lines = [
        "# Sweep spec reference",
        "",
        "Generated by `jaxmem schema --docs` from the spec's tables (jaxmem/spec); do not edit by hand.",
        "A spec is a TOML file; `jaxmem schema` writes the JSON Schema that TOML editors check it against.",
        '`extends = "other.toml"` merges the file over another; `[presets.NAME]` tables merge over the spec.',
        "",
    ]
    lines += _axis_forms() + _expressions() + _field_kinds()
    for path, cls in _tables("", SweepTables):
        lines += [f"## {path or 'top level'}", "", " ".join(cls.__doc__.split()), ""]
        lines += ["| key | kind | default | meaning |", "| --- | --- | --- | --- |"]
        for name, (kind, meaning) in kinds(cls).items():
            lines.append(f"| `{name}` | {kind} | {_default(table_keys(cls)[name][0])} | {meaning} |")
        lines.append("")
    return "\n".join(lines)


def _axis_forms() -> list[str]:
    """The forms of a grid (or final_eval) axis, from the schema's AXIS."""
    lines = ["## Grid axes", "", "An axis of `[grid]` or `[final_eval]` is a list of values (`d = [8, 16, 32]`), or a"]
    lines += ["table with exactly one of range, log_range, exponents (`d = {range = [8, 64, 8]}`):", ""]
    lines += ["| key | value |", "| --- | --- |"]
    lines += [f"| `{name}` | {AXIS_WORDS[name]} |" for name in AXIS["anyOf"][1]["properties"]]
    return lines + ["", f"Repeated values are dropped (the first kept); an axis has at most {MAX_VALUES:,} values.", ""]


def _expressions() -> list[str]:
    """The expression language of jaxmem.spec.expr: names, operators and functions."""
    operators = " ".join(f"`{s}`" for s in expr.SYMBOLS.values())
    functions = ", ".join(f"`{name}`" for name in expr.FUNCTIONS)
    return [
        "## Expressions",
        "",
        "A string where a number or a formula may stand (derived fields, search bounds, train.steps, report "
        "axes) is an arithmetic expression: numbers, the names its key allows (a point's config fields, a "
        "run's metrics, ...: each key's meaning says which), parentheses and",
        "",
        f"- operators: {operators} (`^` is refused: write a power as `**`; an exponent at most "
        f"{expr.MAX_EXPONENT}, an integer power at most 2**{expr.MAX_BITS})",
        f"- functions (Python's math): {functions}",
        "",
        "Nothing else (no attributes, comparisons, strings, keyword arguments); an unknown name is named with "
        "the names known there.",
        "",
    ]


def _field_kinds() -> list[str]:
    """The kinds of an experiment's config fields, as jaxmem/experiments/interface.py's docstring states them
    (read from its source: importing it would import JAX)."""
    source = (Path(__file__).parents[1] / "experiments" / "interface.py").read_text()
    doc = ast.get_docstring(ast.parse(source)).splitlines()
    start = next(i for i, line in enumerate(doc) if line.startswith("- `fields`")) + 1
    block = list(itertools.takewhile(lambda line: line.startswith("    "), doc[start:]))
    rows, kind = {}, ""
    for line in block:
        word = line[4:].split(maxsplit=1)
        if not line[4].isspace():
            kind, line = word[0], word[1] if len(word) > 1 else ""
        rows[kind] = f"{rows.get(kind, '')} {line.strip()}".strip()
    lines = ["## Field kinds", "", "Each field of an experiment (`fixed`, `grid`, `derived`) has a kind:", ""]
    lines += ["| kind | what the engine does with it |", "| --- | --- |"]
    return lines + [f"| {kind} | {words} |" for kind, words in rows.items()] + [""]


def _tables(path: str, cls) -> list[tuple[str, type]]:
    """Every table below `cls` (itself first), with its dotted path ([] for a list of tables)."""
    found = [(path, cls)]
    for name, (_, kind) in table_keys(cls).items():
        shape, inner, _ = key_shape(kind)
        if shape in ("table", "tables"):
            found += _tables(f"{path}.{name}".lstrip(".") + "[]" * (shape == "tables"), inner)
    return found


def kinds(cls) -> dict[str, tuple[str, str]]:
    """A table's keys: their kinds in words and their meanings."""
    keys = table_keys(cls).items()
    return {name: (_kind(kind).replace("|", "\\|"), field.metadata["description"]) for name, (field, kind) in keys}


def _kind(kind) -> str:
    shape, inner, metadata = key_shape(kind)
    words = [m.kind for m in metadata if isinstance(m, Words) and m.kind]
    if shape in ("table", "tables"):
        return f"{'list of tables' if shape == 'tables' else 'table'} ({inner.__name__})"
    if typing.get_origin(inner) is typing.Literal:
        return " / ".join(json.dumps(v) for v in typing.get_args(inner))
    if shape == "map":
        return f"table of {_kind(inner)}" if inner is not Any else "table"
    return words[-1] if words else "value"


def _default(field: dataclasses.Field) -> str:
    value = field.default_factory() if field.default_factory is not dataclasses.MISSING else field.default
    if value is dataclasses.MISSING:
        return "required"
    value = list(value) if isinstance(value, tuple) else value
    return "" if value is None or dataclasses.is_dataclass(value) else f"`{json.dumps(value)}`"
