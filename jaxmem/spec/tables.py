"""The typed tables of a sweep spec: the kinds of their values (pydantic types that also say in words what a value
must be), `key` (a table key: its default and one-line meaning, which the JSON Schema and docs/spec.md show), and
`validate`, which reads TOML data into a table and turns pydantic's errors into one problem per field, each named by
its dotted path (an unknown key with the closest valid one)."""

from __future__ import annotations

import dataclasses
import difflib
import functools
import math
import re
import types
import typing
from collections.abc import Iterable
from typing import Annotated, Any

from pydantic import BeforeValidator, ConfigDict, Field, PlainValidator, Strict, TypeAdapter, ValidationError
from pydantic.fields import FieldInfo

from jaxmem.spec.expr import ExpressionError, names_in

METRIC = "a recorded metric"  # what a metric name must be, in messages
CONFIG = ConfigDict(extra="forbid", populate_by_name=True)  # every table's: an unknown key is an error
MAX_INT = 2**31 - 1  # sizes, step counts and seeds reach the device as int32


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


def names_of(expression) -> set[str]:
    """The names an expression uses (none for a number or a missing value)."""
    return names_in(expression) if isinstance(expression, str) else set()


# -- the kinds of values ------------------------------------------------------------------------------------
class BadValue(ValueError):
    """A value that is wrong in a way its message says in full ("cannot parse expression ...")."""


class NotAKey(BadValue):
    """A field of a table's dataclass that the spec does not write (it follows from other tables)."""


def _refuse(value):
    raise NotAKey()


NOT_A_KEY = BeforeValidator(_refuse)  # `Annotated[SkipJsonSchema[kind], NOT_A_KEY]`: not read from TOML


class WrongKind(ValueError):
    """A value of the wrong kind: the field's words say what it must be."""


@dataclasses.dataclass(frozen=True)
class Words:
    """What a value must be, in words ("a finite number"); `limits` words a value of the right kind out of its
    range (default: the bounds' own words, ">= 1")."""

    kind: str
    limits: str | None = None


def key(doc: str, alias: str | None = None, **limits) -> Any:
    """A table key's one-line meaning, its TOML name where the attribute's differs, and its limits (ge, gt,
    lt, ...), for `Annotated[kind, key(...)]`: the JSON Schema and docs/spec.md show them."""
    return Field(description=doc, alias=alias, **limits)


def is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _finite(value) -> float:
    if not is_number(value):
        raise WrongKind()
    return float(value)


def _names(value) -> tuple:
    return (value,) if isinstance(value, str) else value


def _formula(value) -> str:
    if not isinstance(value, str):
        raise WrongKind()
    try:
        names_in(value)
    except ExpressionError as err:
        raise BadValue(str(err)) from None
    return value


def _expression(value) -> str | float:
    return value if is_number(value) else _formula(value)


def _pair(open_ends: bool):
    def read(value) -> tuple[float, float]:
        ok = isinstance(value, list) and len(value) == 2
        ok = ok and all(is_number(v) or open_ends and isinstance(v, float) and math.isinf(v) for v in value)
        if not ok:
            raise WrongKind()
        if value[0] > value[1]:
            raise BadValue(f"lo must not exceed hi, got {[float(v) for v in value]}")
        return float(value[0]), float(value[1])

    return read


GONE = object()  # a bad table of a list, left out when it is read (the others keep their places)


def many(item: Any, single: tuple[type, ...] = ()) -> Any:
    """A tuple of `item`s, written as a list (or as one item, a value of a `single` type)."""
    return Annotated[tuple[item, ...], BeforeValidator(_as_list(single))]


def one_or_many(item: Any, single: tuple[type, ...] = (dict,)) -> Any:
    """A tuple of `item`s, written as one item or a list of them (in the JSON Schema too)."""
    return Annotated[many(item, single), Field(json_schema_extra=_or_one)]


def _as_list(single: tuple[type, ...]):
    def as_list(value):
        value = [value] if isinstance(value, single) and not isinstance(value, bool) else value
        return [v for v in value if v is not GONE] if isinstance(value, list) else value

    return as_list


def _or_one(schema: dict) -> None:
    """The JSON Schema of `one_or_many`: an item, or an array of items."""
    array = {"type": "array", "items": schema.pop("items")}
    schema.pop("type", None)
    schema["anyOf"] = [array["items"], array]


def plain(read, schema_type, words: str) -> Any:
    """A kind that `read` checks and converts in full; `schema_type` gives its JSON Schema."""
    return Annotated[Any, PlainValidator(read, json_schema_input_type=schema_type), Words(words)]


Text = Annotated[str, Strict(), Words("a string")]
Flag = Annotated[bool, Strict(), Words("true or false")]
Integer = Annotated[int, Strict(), Words("an integer")]
Number = Annotated[float, BeforeValidator(_finite), Words("a finite number")]
Positive = Annotated[float, BeforeValidator(_finite), Field(gt=0), Words("a number > 0", "a number > 0")]
NonNegative = Annotated[float, BeforeValidator(_finite), Field(ge=0), Words("a number >= 0", "a number >= 0")]
Names = Annotated[
    tuple[str, ...], BeforeValidator(_names), Field(json_schema_extra=_or_one), Words("a name or a list of names")
]
Formula = plain(_formula, str, "an expression string")
Expression = plain(_expression, float | str, "a number or an expression string")
Pair = plain(_pair(False), tuple[float, float], "[lo, hi]")
Bounds = plain(_pair(True), tuple[float, float], "[lo, hi] (numbers; -inf or inf for an open end)")


# -- reading a table ----------------------------------------------------------------------------------------
@functools.cache
def adapter(cls) -> TypeAdapter:
    return TypeAdapter(cls)


def validate(cls, data: dict, prefix: str = "", top: bool = False) -> tuple[Any, list[str], set[str]]:
    """`data` read into the table class `cls`: the object (built from the good values, the bad ones left at their
    defaults; None when a required one is bad), a problem per bad value (its path after `prefix`; with `top`, an
    unknown top-level name is an unknown 'section or key') and the dotted paths of the bad values."""
    problems, bad, data = [], set(), _copy(data)
    for attempt in range(100):  # each pass leaves out at least one value
        try:
            return adapter(cls).validate_python(data), problems, bad
        except ValidationError as err:
            errors = [Problem(cls, data, e) for e in err.errors()]
        if attempt == 0:
            problems += [p.message(prefix, top) for p in _one_per_key(errors)]
        cuts = sorted({p.cut for p in errors if p.cut}, key=lambda loc: [str(x) for x in loc], reverse=True)
        bad |= {joined(prefix, dotted(loc)) for loc in cuts}
        if not [loc for loc in cuts if _remove(data, loc)]:
            break
    return None, problems, bad


def _one_per_key(errors: list[Problem]) -> list[Problem]:
    """The errors at distinct keys, in order; at one key (the members of a union), the one that says most."""
    by_key: dict[tuple, list[Problem]] = {}
    for problem in errors:
        by_key.setdefault(problem.loc, []).append(problem)
    return [min(group, key=Problem.rank) for group in by_key.values()]


def _copy(value):
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    return [_copy(v) for v in value] if isinstance(value, list) else value


def _remove(data, loc: tuple) -> bool:
    """Leave out the value at `loc` (a table given where a list of them is read counts as item 0)."""
    parents = [data]
    for part in loc[:-1]:
        here = parents[-1]
        if isinstance(here, dict) and isinstance(part, int):
            parents.append(here)
        elif isinstance(here, (dict, list)) and (part in here if isinstance(here, dict) else part < len(here)):
            parents.append(here[part])
        else:
            return False
    parent, last = parents[-1], loc[-1]
    if isinstance(last, int) and not isinstance(parent, list):  # the one value given for a list of them
        parents[-2][loc[-2]] = []
        return True
    if isinstance(parent, list) and last < len(parent) and parent[last] is not GONE:
        parent[last] = GONE
        return True
    return isinstance(parent, dict) and parent.pop(last, _remove) is not _remove


def joined(prefix: str, path: str) -> str:
    """A dotted path below the table at `prefix`."""
    return prefix + path if not prefix or not path or path.startswith("[") else f"{prefix}.{path}"


def dotted(loc: tuple) -> str:
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in loc).lstrip(".")


TYPE_OF_TABLE = {"dataclass_type", "dataclass_args_type", "model_type", "dict_type"}
UNKNOWN = {"unexpected_keyword_argument", "extra_forbidden"}
MISSING = {"missing", "missing_argument", "missing_keyword_only_argument"}
LIMITS = {"greater_than": ">", "greater_than_equal": ">=", "less_than": "below", "less_than_equal": "<="}
LIMITS |= {"finite_number": "finite"}


class Problem:
    """One pydantic error, placed at the key it concerns (`where`: the table or leaf node there)."""

    def __init__(self, root, data, error: dict):
        self.error, self.kind = error, error["type"]
        loc = tuple(error["loc"])
        if isinstance(error.get("ctx", {}).get("error"), NotAKey):
            self.kind, loc = "extra_forbidden", loc
        self.loc, self.node, self.words = _place(root, loc[:-1] if self.kind in UNKNOWN else loc)
        if self.kind in UNKNOWN:
            self.loc += (loc[-1],)
        self.value = _value_at(data, self.loc, error.get("input"))
        self.cut = self.loc[:-1] if self.kind in MISSING and _table_depth(self.loc) else self.loc

    def rank(self) -> int:
        """Where errors at one key disagree (the members of a union), the one that says most."""
        if isinstance(self.error.get("ctx", {}).get("error"), BadValue):
            return 0
        return 1 if self.kind in LIMITS or self.kind == "literal_error" else 2

    def message(self, prefix: str, top: bool) -> str:
        path = joined(prefix, dotted(self.loc))
        if self.kind in UNKNOWN:
            what = "section or key" if top and len(self.loc) == 1 else "key"
            return f"{path}: unknown {what}{hint(self.loc[-1], _keys(self.node))}"
        if self.kind in MISSING:
            return f"{path}: missing"
        if self.kind in TYPE_OF_TABLE or self.node[0] == "tables" and self.kind in ("list_type", "tuple_type"):
            what = "a table" if self.kind in TYPE_OF_TABLE else "a list of tables"
            return f"{path}: must be {what}, got {self.value!r}"
        cause = self.error.get("ctx", {}).get("error")
        if isinstance(cause, BadValue):
            return f"{path}: {cause}"
        return f"{path}: must be {self._words()}, got {self.value!r}"

    def _words(self) -> str:
        ctx = self.error.get("ctx", {})
        if self.kind == "literal_error":
            return f"one of {list(typing.get_args(self.node[1]))}"
        if self.kind in LIMITS:
            if self.words and self.words.limits:
                return self.words.limits
            bound = next(iter(ctx.values()), "")
            return f"{LIMITS[self.kind]} {'2**31' if bound == MAX_INT + 1 else bound}".strip()
        return self.words.kind if self.words else "valid"


def _shape(annotation) -> tuple[str, Any, Words | None]:
    """What a table's key holds: ("table", class), ("tables", class) (a list of them), ("map", class) (a
    table of them by name) or ("leaf", annotation); and its Words."""
    words = None
    while typing.get_origin(annotation) is Annotated:
        for given in (m for m in annotation.__metadata__ if isinstance(m, Words)):
            words = given if words is None else Words(given.kind or words.kind, given.limits or words.limits)
        annotation = annotation.__origin__
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        members = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(members) == 1:
            kind, inner, inner_words = _shape(members[0])
            return kind, inner, inner_words or words
    if dataclasses.is_dataclass(annotation):
        return "table", annotation, words
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin in (tuple, list) and args and (len(args) == 1 or args[-1] is Ellipsis):
        kind, inner, inner_words = _shape(args[0])
        return ("tables", inner, None) if kind == "table" else ("leaf", annotation, words or inner_words)
    if origin is dict:
        kind, inner, inner_words = _shape(args[1])
        return ("map", inner, None) if kind == "table" else ("leaves", args[1], inner_words)
    return "leaf", annotation, words


def _keys(node) -> dict[str, Any]:
    """A table's keys (as written in TOML) and their annotations."""
    if node[0] != "table":
        return {}
    return table_keys(node[1])


def table_keys(cls) -> dict[str, Any]:
    """A table's keys (as written in TOML) and their annotations."""
    fields = annotated_fields(cls)
    return {toml_name(f, hint): hint for f, hint in fields if NOT_A_KEY not in getattr(hint, "__metadata__", ())}


def annotated_fields(cls) -> list[tuple[dataclasses.Field, Any]]:
    """A table's fields with their full annotations."""
    hints = typing.get_type_hints(cls, include_extras=True)
    return [(f, hints[f.name]) for f in dataclasses.fields(cls) if f.init]


def toml_name(field: dataclasses.Field, annotation) -> str:
    infos = [m for m in getattr(annotation, "__metadata__", ()) if isinstance(m, FieldInfo)]
    return next((i.alias for i in infos if i.alias), field.name)


def _place(root, loc: tuple) -> tuple[tuple, tuple, Words | None]:
    """The part of `loc` that names a table's key (a leaf's own positions left out: a list of numbers is
    one value), the node there and its words."""
    node, words, placed = ("table", root, None), None, ()
    for part in loc:
        kind = node[0]
        if kind == "table" and part in _keys(node):
            node = _shape(_keys(node)[part])
            words = node[2]
        elif kind in ("tables", "map"):
            node, words = ("table", node[1], None), None
        elif kind == "leaves":
            node = _shape(node[1])
            words = node[2] or words
        else:
            break
        placed += (part,)
    return placed, node, words


def in_spec_order(problems: list[str], root) -> list[str]:
    """`problems` ordered as their keys are in the tables (an unknown key first in its table), a problem that
    names no key last; the order of problems at one key kept."""
    return sorted(problems, key=lambda problem: _position(problem, root))


def _position(problem: str, root) -> tuple:
    path = problem.split(": ", 1)[0]
    parts = [int(p) if p.isdigit() else p for p in re.split(r"\.|\[|\]\.?", path) if p]
    node, position = ("table", root, None), []
    for part in parts:
        keys = list(_keys(node)) if node[0] == "table" else []
        if node[0] == "table" and part in keys:
            node = _shape(_keys(node)[part])
            position.append(keys.index(part))
        elif node[0] == "table":
            position.append(-1 if "unknown" in problem else len(keys))
            break
        else:
            node = ("table", node[1], None) if node[0] in ("tables", "map") else node
            position.append(part if isinstance(part, int) else 0)
    return tuple(position)


def _table_depth(loc: tuple) -> bool:
    """Whether a key at `loc` lies in a table below the top level (whose whole table is then left out)."""
    return len(loc) > 1


def _value_at(data, loc: tuple, default):
    for part in loc:
        if isinstance(data, dict) and isinstance(part, int):
            continue  # one table given for a list of them
        try:
            data = data[part]
        except (KeyError, IndexError, TypeError):
            return default
    return data
