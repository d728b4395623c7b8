"""The typed tables of a sweep spec: the kinds of their values (pydantic types that also say in words what a value
must be), `key` (a table key: its default, one-line meaning and limits, which the JSON Schema and docs/spec.md
show) and `read`, the one reader of TOML data into a table: a problem per bad value, named by its dotted path (an
unknown key with the closest valid one), the bad value left out and the rest still read."""

from __future__ import annotations

import dataclasses
import difflib
import functools
import math
import types
import typing
from collections.abc import Iterable
from typing import Annotated, Any

from pydantic import BeforeValidator, Field, PlainValidator, Strict, TypeAdapter, ValidationError, WithJsonSchema

from jaxmem.spec.expr import ExpressionError, names_in

MAX_INT = 2**31 - 1  # sizes, step counts and seeds reach the device as int32
GONE = object()  # a value left out: bad, or a table that is


def suggest(word: str, options: Iterable[str]) -> str:
    """' (did you mean 'x'?)' naming the option closest to `word` (or equal but for case), or ''."""
    options, word = [str(o) for o in options], str(word)
    close = difflib.get_close_matches(word, options, n=1) or [o for o in options if o.lower() == word.lower()]
    return f" (did you mean {close[0]!r}?)" if close else ""


def hint(word: str, allowed: Iterable[str]) -> str:
    """The closest allowed name (suggest), or every allowed name when none is close."""
    allowed = sorted(allowed)
    return suggest(word, allowed) or "; allowed: " + (", ".join(allowed) or "none")


def unknown_names(where: str, found: Iterable[str], allowed: frozenset[str] | None, what: str) -> list[str]:
    """A problem per name in `found` that is not in `allowed` (None: not checked), `what` saying what it must be."""
    if allowed is None:
        return []
    return [f"{where}: {n!r} is not {what}{hint(n, allowed)}" for n in dict.fromkeys(found) if n not in allowed]


def one_of(given: dict[str, bool], path: str, problems: list[str]) -> str | None:
    """The one key of `given` (alternative -> whether the table gives it) that is given; None, with a
    problem at `path`, when none or several are."""
    sides = [side for side, present in given.items() if present]
    if len(sides) != 1:
        problems.append(f"{path}: needs exactly one of {', '.join(given)}, got {sides or 'neither'}")
        return None
    return sides[0]


def names_of(expression) -> set[str]:
    """The names an expression uses (none for a number or a missing value)."""
    return names_in(expression) if isinstance(expression, str) else set()


def fill(table, **defaults):
    """`table` with its empty keys set to `defaults`."""
    return dataclasses.replace(table, **{k: v for k, v in defaults.items() if getattr(table, k) in (None, "")})


# -- the kinds of values ------------------------------------------------------------------------------------
class BadValue(ValueError):
    """A value that is wrong in a way its message says in full; any other ValueError: the kind's words say it."""


@dataclasses.dataclass(frozen=True)
class Words:
    """What a value must be, in words ("a finite number"); `limits` words a value of the right kind out of its
    range (default: the bounds' own words, ">= 1")."""

    kind: str
    limits: str | None = None


def key(doc: str, default: Any = dataclasses.MISSING, **limits) -> Any:
    """A table key: its one-line meaning, its default (a class: a fresh one of it) and its limits (ge, lt, ...,
    alias: its TOML name), which the JSON Schema and docs/spec.md show (pydantic reads a field's metadata); and
    the names its value may be (`names`) or use in an expression (`uses`): (a set of the context, its words)."""
    factory = default if isinstance(default, type) else dataclasses.MISSING
    default = dataclasses.MISSING if isinstance(default, type) else default
    return dataclasses.field(default=default, default_factory=factory, metadata={"description": doc, **limits})


def is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _finite(value) -> float:
    if not is_number(value):
        raise ValueError()
    return float(value)


def _formula(value) -> str:
    if not isinstance(value, str):
        raise ValueError()
    try:
        names_in(value)
    except ExpressionError as err:
        raise BadValue(str(err)) from None
    return value


def _pair(open_ends: bool):
    def read(value) -> tuple[float, float]:
        ok = isinstance(value, list) and len(value) == 2
        if not ok or not all(is_number(v) or open_ends and isinstance(v, float) and math.isinf(v) for v in value):
            raise ValueError()
        if value[0] > value[1]:
            raise BadValue(f"lo must not exceed hi, got {[float(v) for v in value]}")
        return float(value[0]), float(value[1])

    return read


def one_or_many(item: Any, single: tuple[type, ...] = (dict,)) -> Any:
    """A tuple of `item`s, written as a list or as one item (a value of a `single` type; in the JSON Schema too)."""
    one = BeforeValidator(lambda value: [value] if isinstance(value, single) and not isinstance(value, bool) else value)
    return Annotated[tuple[item, ...], one, Field(json_schema_extra=_or_one)]


def _or_one(schema: dict) -> None:
    """The JSON Schema of `one_or_many`: an item, or an array of items."""
    schema.pop("type", None)
    schema["anyOf"] = [schema["items"], {"type": "array", "items": schema.pop("items")}]


def plain(read, schema_type, words: str) -> Any:
    """A kind that `read` checks and converts in full; `schema_type` gives its JSON Schema."""
    return Annotated[Any, PlainValidator(read, json_schema_input_type=schema_type), Words(words)]


Text = Annotated[str, Strict(), Words("a string")]
Flag = Annotated[bool, Strict(), Words("true or false")]
Integer = Annotated[int, Strict(), Words("an integer")]
Number = Annotated[float, BeforeValidator(_finite), Words("a finite number")]
Positive = Annotated[Number, Field(gt=0), Words("a number > 0", "a number > 0")]
NonNegative = Annotated[Number, Field(ge=0), Words("a number >= 0", "a number >= 0")]
Names = Annotated[
    tuple[str, ...],
    BeforeValidator(lambda v: (v,) if isinstance(v, str) else v),
    Field(json_schema_extra=_or_one),
    Words("a name or a list of names"),
]
Formula = plain(_formula, str, "an expression string")
Expression = plain(lambda v: v if is_number(v) else _formula(v), float | str, "a number or an expression string")
Pair = plain(_pair(False), tuple[float, float], "[lo, hi]")
# A TOML editor validates a spec as JSON, which has no inf: taplo passes TOML's inf as null, so the schema takes it.
OPEN_PAIR = {"type": "array", "items": {"type": ["number", "null"]}, "minItems": 2, "maxItems": 2}
Bounds = Annotated[
    Any,
    PlainValidator(_pair(True)),
    WithJsonSchema(OPEN_PAIR),
    Words("[lo, hi] (numbers; -inf or inf for an open end)"),
]


# -- reading a table ----------------------------------------------------------------------------------------
NOT_LIMITS = ("description", "alias", "json_schema_extra", "names", "uses")


@functools.cache
def table_keys(cls) -> dict[str, tuple[dataclasses.Field, Any]]:
    """A table's keys, as TOML writes them: the field each sets and its kind, limits included (a field made
    without `key` is none: it follows from other tables)."""
    hints = typing.get_type_hints(cls, include_extras=True)
    keys = {}
    for field in (f for f in dataclasses.fields(cls) if "description" in f.metadata):
        limits = {k: v for k, v in field.metadata.items() if k not in NOT_LIMITS}
        kind = Annotated[hints[field.name], Field(**limits)] if limits else hints[field.name]
        keys[field.metadata.get("alias", field.name)] = (field, kind)
    return keys


def joined(path: str, name: str) -> str:
    return f"{path}.{name}" if path and name else path or name


def required(field: dataclasses.Field) -> bool:
    return field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING


def read(cls, data, path: str, problems: list[str], bad: set[str], context=None):
    """`data` read into the table class `cls`: a problem per bad value (an unknown key with the closest valid
    one) or unknown name (against `context`), each named by its dotted path below `path`, a bad value left out
    (its default used) and its path added to `bad`; then the table's own `checked`. None when `data` is no table
    or lacks a required key."""
    if not isinstance(data, dict):
        problems.append(f"{path}: must be a table, got {data!r}")
        return None
    keys, values = table_keys(cls), {}
    problems += [f"{joined(path, k)}: unknown key{hint(k, keys)}" for k in data if k not in keys]
    for name, (field, kind) in keys.items():
        at = joined(path, name)
        if name in data:
            values[field.name] = value = _value(kind, data[name], at, problems, bad, context)
            if value is not GONE and context is not None:
                problems += _unknown_used(field, value, at, context)
        elif required(field):
            problems.append(f"{at}: missing")
    values = {k: v for k, v in values.items() if v is not GONE}
    if any(required(f) and f.name not in values for f, _ in keys.values()):
        return None
    table = cls(**values)
    return table.checked(data, context, path, problems) if hasattr(table, "checked") else table


def _value(kind, value, path: str, problems: list[str], bad: set[str], context):
    """One key's value read (a table, a list or map of them, or a leaf that pydantic checks), or GONE."""
    shape, inner, metadata = key_shape(kind)
    for convert in (m.func for m in metadata if isinstance(m, BeforeValidator) and shape in ("table", "tables")):
        value = convert(value)
    if shape == "table":
        found = read(inner, value, path, problems, bad, context)
    elif shape == "tables" and not isinstance(value, list):
        problems.append(f"{path}: must be a list of tables, got {value!r}")
        found = None
    elif shape == "tables":
        items = [read(inner, item, f"{path}[{i}]", problems, bad, context) for i, item in enumerate(value)]
        bad |= {f"{path}[{i}]" for i, item in enumerate(items) if item is None}
        found = tuple(item for item in items if item is not None)
    elif shape == "map" and isinstance(value, dict):
        found = {k: _value(inner, v, joined(path, k), problems, bad, context) for k, v in value.items()}
        found = {k: v for k, v in found.items() if v is not GONE}
    else:
        found = _leaf(kind, value, path, problems)
    if found is None or found is GONE:
        bad.add(path)
        return GONE
    return found


def _unknown_used(field: dataclasses.Field, value, path: str, context) -> list[str]:
    """A problem per name that the value of `field` is (its key's `names`; a table's: its keys) or uses (`uses`)
    and `context` lacks."""
    if "uses" in field.metadata:
        (names, what), found = field.metadata["uses"], names_of(value)
    elif "names" in field.metadata:
        names, what = field.metadata["names"]
        found = [value] if isinstance(value, str) else [n[0] if isinstance(n, tuple) else n for n in value or ()]
    else:
        return []
    return unknown_names(path, [n for n in found if n], getattr(context, names), what)


def _leaf(kind, value, path: str, problems: list[str]):
    try:
        return adapter(kind).validate_python(value)
    except ValidationError as err:
        error = min(err.errors(), key=_rank)
        cause = error.get("ctx", {}).get("error")
        why = cause if isinstance(cause, BadValue) else f"must be {_words(kind, error)}, got {value!r}"
        problems.append(f"{path}: {why}")
        return GONE


LIMITS = {"greater_than": ">", "greater_than_equal": ">=", "less_than": "below", "less_than_equal": "<="}
LIMITS |= {"finite_number": "finite"}


def _rank(error: dict) -> int:
    """Where errors at one key disagree (the members of a union), the one that says most."""
    if isinstance(error.get("ctx", {}).get("error"), BadValue):
        return 0
    return 1 if error["type"] in LIMITS or error["type"] == "literal_error" else 2


def _words(kind, error: dict) -> str:
    """What a value of `kind` must be, in the words of its Words (the outermost that says it) or its Literal."""
    shape, inner, metadata = key_shape(kind)
    words = Words("valid")
    for given in (m for m in metadata if isinstance(m, Words)):
        words = Words(given.kind or words.kind, given.limits or words.limits)
    if error["type"] == "literal_error":
        return f"one of {list(typing.get_args(inner))}"
    if error["type"] not in LIMITS:
        return "a table" if shape == "map" else words.kind
    bound = next(iter(error.get("ctx", {}).values()), "")
    return words.limits or f"{LIMITS[error['type']]} {'2**31' if bound == MAX_INT + 1 else bound}".strip()


def key_shape(kind) -> tuple[str, Any, list]:
    """What a key holds: ("table", class), ("tables", class) (a list of them), ("map", kind) (a table of
    values by name) or ("leaf", kind without Annotated and None); and the metadata on the way (outer last)."""
    metadata: list = []
    while True:
        if typing.get_origin(kind) is Annotated:
            metadata, kind = [*kind.__metadata__, *metadata], kind.__origin__
        elif typing.get_origin(kind) in (typing.Union, types.UnionType) and type(None) in typing.get_args(kind):
            members = [a for a in typing.get_args(kind) if a is not type(None)]
            if len(members) > 1:
                return "leaf", kind, metadata
            kind = members[0]
        else:
            break
    args = typing.get_args(kind)
    if dataclasses.is_dataclass(kind):
        return "table", kind, metadata
    if typing.get_origin(kind) is tuple and args[-1] is Ellipsis and dataclasses.is_dataclass(args[0]):
        return "tables", args[0], metadata
    return ("map", args[1], metadata) if typing.get_origin(kind) is dict else ("leaf", kind, metadata)


@functools.cache
def adapter(kind) -> TypeAdapter:
    return TypeAdapter(kind)
