"""The whole sweep spec as one typed table (`SweepTables`: every table of a spec, presets merged), the JSON Schema
of a spec file that `jaxmem schema` writes (TOML editors check a sweep against it as you type), and the reference
docs/spec.md, both generated from the tables' annotations so that neither can drift from the code."""

from __future__ import annotations

import dataclasses
import json
import typing
from typing import Annotated, Any

from pydantic import WithJsonSchema

from jaxmem.spec.report_tables import ReportSpec
from jaxmem.spec.sections import EngineSpec, SearchSpec, SuccessTable, TrainSpec
from jaxmem.spec.tables import CONFIG, MAX_INT, BadValue, Expression, Text, adapter, annotated_fields, key, plain
from jaxmem.spec.tables import toml_name

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
                "base": {"type": "number", "minimum": 0, "exclusiveMinimum": True},
                "round": {"enum": ["floor", "round", "ceil"]},
            },
            "oneOf": [{"required": [k]} for k in ("range", "log_range", "exponents")],
        },
    ],
}
Axis = Annotated[Any, WithJsonSchema(AXIS)]  # read by jaxmem.spec.sweep.axis_values, whose messages name the problem
Seeds = plain(_seeds, int | list[int], "a count or a list of seeds")


@dataclasses.dataclass(frozen=True)
class SweepTables:
    """A sweep spec, its preset merged in: the experiment, the grid of its configs, and how they run and report."""

    __pydantic_config__ = CONFIG
    experiment: Annotated[Text | None, key("a shipped experiment's name, or 'module:ATTRIBUTE' next to the spec")] = (
        None
    )
    description: Annotated[Text, key("what the sweep measures: its first line is `jaxmem list`'s")] = ""
    seeds: Annotated[Seeds, key("a count n (seeds 0 to n-1), or a list of seeds")] = (0,)
    fixed: Annotated[dict[str, Any], key("experiment fields held constant: name = value")] = dataclasses.field(
        default_factory=dict
    )
    grid: Annotated[
        dict[str, Axis], key("the axes: field (or helper name) = its values; the grid is their product")
    ] = dataclasses.field(default_factory=dict)
    derived: Annotated[dict[str, Expression], key("fields computed at each point: name = expression")] = (
        dataclasses.field(default_factory=dict)
    )
    train: Annotated[TrainSpec, key("training and evaluation")] = dataclasses.field(default_factory=TrainSpec)
    search: Annotated[SearchSpec | None, key("a search per point and seed")] = None
    engine: Annotated[EngineSpec, key("packing runs into programs")] = dataclasses.field(default_factory=EngineSpec)
    success: Annotated[SuccessTable | None, key("the success rule (default: train.metric >= search.threshold)")] = None
    final_eval: Annotated[
        dict[str, Axis], key("test-time axes: each finished run's final parameters evaluated at every point")
    ] = dataclasses.field(default_factory=dict)
    report: Annotated[ReportSpec, key("report.md, its tables, plots and verdicts")] = dataclasses.field(
        default_factory=ReportSpec
    )


SECTIONS = frozenset(toml_name(f, hint) for f, hint in annotated_fields(SweepTables))
FILE_ONLY = {
    "extends": {"type": "string", "description": "a spec file (next to this one) whose tables this file's merge over"},
}


# -- the JSON Schema -------------------------------------------------------------------------------------------
def schema() -> dict:
    """The JSON Schema of a sweep spec file: the tables, `extends`, and presets (each a partial spec merged over
    the file's). A file that extends another is partial too: it restates only what differs."""
    full = adapter(SweepTables).json_schema(ref_template="#/definitions/{model}")
    defs = {name: _tidy(d) for name, d in full.pop("$defs").items()}
    defs["SweepTables"] = tables = _tidy(full)
    presets = {
        "description": "named variants: `jaxmem run SPEC --preset NAME` merges [presets.NAME] over the spec "
        "(default: quick, where there is one)",
        "type": "object",
        "additionalProperties": {"$ref": "#/definitions/SweepTablesPartial"},
    }
    defs["SweepFile"] = {**tables, "properties": {**tables["properties"], **FILE_ONLY, "presets": presets}}
    defs |= {f"{name}Partial": _partial(d) for name, d in defs.items()}
    extending = {"allOf": [{"required": ["extends"]}, {"$ref": "#/definitions/SweepFilePartial"}]}
    return {
        "$schema": "http://json-schema.org/draft-04/schema#",
        "title": "jaxmem sweep spec",
        "description": tables.get("description", "")
        + " `jaxmem schema` writes this file; docs/spec.md lists the keys.",
        "anyOf": [{"$ref": "#/definitions/SweepFile"}, extending],
        "definitions": defs,
    }


NAMED = ("properties", "$defs")  # schema keys whose values are tables by name


LIMITS = {"ge": "minimum", "le": "maximum", "gt": "exclusiveMinimum", "lt": "exclusiveMaximum"}
EXCLUSIVE = {"exclusiveMinimum": "minimum", "exclusiveMaximum": "maximum"}  # draft 4: a flag on the bound


def _tidy(node):
    """pydantic's schema as TOML and JSON Schema draft 4 (the TOML language servers') have it: no null (TOML has
    none), no titles, limits and tuples in draft 4's words, a list's least length on its array."""
    if isinstance(node, list):
        return [_tidy(n) for n in node]
    if not isinstance(node, dict):
        return node
    node = {k: {n: _tidy(p) for n, p in v.items()} if k in NAMED else _tidy(v) for k, v in node.items() if k != "title"}
    node = {LIMITS.get(k, k): v for k, v in node.items()}
    for exclusive, bound in EXCLUSIVE.items():
        if not isinstance(node.get(exclusive, True), bool):
            node[bound], node[exclusive] = node[exclusive], True
    if "const" in node:
        node["enum"] = [node.pop("const")]
    if "prefixItems" in node:
        node["items"] = node.pop("prefixItems")
    options = [o for o in node.get("anyOf", []) if o != {"type": "null"}]
    if "anyOf" in node:
        node.pop("anyOf")
        node = {**options[0], **node} if len(options) == 1 else {**node, "anyOf": options}
    if "minLength" in node and "anyOf" in node:
        least = node.pop("minLength")
        node["anyOf"] = [{**o, "minItems": least} if o.get("type") == "array" else o for o in node["anyOf"]]
    if node.get("default", 0) is None or node.get("type") == "object" and node.get("default") == []:
        node.pop("default")
    return node


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
    for path, cls in _tables("", SweepTables):
        lines += [f"## {path or 'top level'}", "", _doc(cls), "", "| key | kind | default | meaning |"]
        lines += ["| --- | --- | --- | --- |"]
        described = kinds(cls)
        for field, hint in annotated_fields(cls):
            name = toml_name(field, hint)
            if name in described:
                kind, meaning = described[name]
                lines.append(f"| `{name}` | {kind} | {_default(field)} | {meaning} |")
        lines.append("")
    return "\n".join(lines)


def _tables(path: str, cls) -> list[tuple[str, type]]:
    """Every table below `cls` (itself first), with its dotted path ([] for a list of tables)."""
    found = [(path, cls)]
    for field, hint in annotated_fields(cls):
        inner, many = _table_of(hint)
        if inner is not None and inner is not cls:
            sub = f"{path}.{toml_name(field, hint)}".lstrip(".")
            found += _tables(f"{sub}[]" if many else sub, inner)
    return found


def _table_of(hint) -> tuple[type | None, bool]:
    while typing.get_origin(hint) is Annotated:
        hint = hint.__origin__
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    if dataclasses.is_dataclass(hint):
        return hint, False
    if typing.get_origin(hint) in (tuple, list) and args and dataclasses.is_dataclass(args[0]):
        return args[0], True
    if len(args) == 1 and dataclasses.is_dataclass(args[0]):
        return args[0], False
    return None, False


def kinds(cls) -> dict[str, tuple[str, str]]:
    """A table's keys: their kinds in words and their meanings."""
    properties = _tidy(adapter(cls).json_schema(ref_template="{model}"))["properties"]
    return {name: (_words(p).replace("|", "\\|"), p.get("description", "")) for name, p in properties.items()}


def _words(node: dict) -> str:
    if "anyOf" in node:
        return " or ".join(_words(n) for n in node["anyOf"])
    if "$ref" in node:
        return f"table ({node['$ref']})"
    if "enum" in node:
        return " / ".join(f'"{v}"' for v in node["enum"])
    if "const" in node:
        return json.dumps(node["const"])
    if node.get("type") == "array":
        items = node.get("items", {})
        return "[lo, hi]" if isinstance(items, list) else f"list of {_words(items) if items else 'values'}"
    if node.get("type") == "object":
        value = node.get("additionalProperties")
        return f"table of {_words(value)}" if isinstance(value, dict) and value else "table"
    return {"integer": "integer", "number": "number", "string": "string", "boolean": "true/false"}.get(
        node.get("type"), "value"
    )


def _default(field: dataclasses.Field) -> str:
    if field.default_factory is not dataclasses.MISSING:
        value = field.default_factory()
        return "" if dataclasses.is_dataclass(value) else f"`{json.dumps(value)}`"
    if field.default is dataclasses.MISSING:
        return "required"
    value = list(field.default) if isinstance(field.default, tuple) else field.default
    return "" if value is None else f"`{json.dumps(value)}`"


def _doc(cls) -> str:
    return " ".join((cls.__doc__ or "").split())
