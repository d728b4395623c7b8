"""Reading TOML tables of a sweep spec: typed reads of their values (each kind a function that returns
the value or raises BadValue saying what it must be), unknown keys named by their dotted path with the
closest valid name, and every problem collected rather than raised. Shared by jaxmem.spec.sweep and
jaxmem.spec.report_tables."""

from __future__ import annotations

import difflib
import math
from collections.abc import Callable, Iterable

from jaxmem.spec.expr import ExpressionError, names_in

METRIC = "a recorded metric"  # what a metric name must be, in messages


def suggest(word: str, options: Iterable[str]) -> str:
    """' (did you mean 'x'?)' naming the option closest to `word` (or equal but for case), or ''."""
    options, word = [str(o) for o in options], str(word)
    close = difflib.get_close_matches(word, options, n=1) or [o for o in options if o.lower() == word.lower()]
    return f" (did you mean {close[0]!r}?)" if close else ""


def hint(word: str, allowed: Iterable[str]) -> str:
    """The closest allowed name (suggest), or every allowed name when none is close."""
    allowed = sorted(allowed)
    return suggest(word, allowed) or "; allowed: " + (", ".join(allowed) or "none")


def unknown_keys(path: str, table: dict, allowed: Iterable[str], what: str = "key") -> list[str]:
    """A problem per key of `table` (at dotted `path`, '' for the top level) that is not in `allowed`."""
    prefix = f"{path}." if path else ""
    return [f"{prefix}{key}: unknown {what}{hint(key, allowed)}" for key in table if key not in allowed]


def unknown_names(where: str, found: Iterable[str], allowed: frozenset[str] | None, what: str) -> list[str]:
    """A problem per name in `found` that is not in `allowed` (None: not checked), `what` saying what it must be."""
    if allowed is None:
        return []
    return [f"{where}: {n!r} is not {what}{hint(n, allowed)}" for n in dict.fromkeys(found) if n not in allowed]


def names_of(expression) -> set[str]:
    """The names an expression uses (none for a number or a missing value)."""
    return names_in(expression) if isinstance(expression, str) else set()


class BadValue(ValueError):
    """A value of the wrong kind or out of range; the message says what it must be."""


def expect(ok: bool, what: str, value) -> None:
    if not ok:
        raise BadValue(f"must be {what}, got {value!r}")


def is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def text(value) -> str:
    expect(isinstance(value, str), "a string", value)
    return value


def flag(value) -> bool:
    expect(isinstance(value, bool), "true or false", value)
    return value


def number(value) -> float:
    expect(is_number(value), "a finite number", value)
    return float(value)


def positive(value) -> float:
    expect(is_number(value) and value > 0, "a number > 0", value)
    return float(value)


def non_negative(value) -> float:
    expect(is_number(value) and value >= 0, "a number >= 0", value)
    return float(value)


def choice(*options: str) -> Callable:
    """The kind of a value that must be one of `options`."""

    def one_of(value) -> str:
        expect(isinstance(value, str) and value in options, f"one of {list(options)}", value)
        return value

    return one_of


def field_names(value) -> tuple[str, ...]:
    """A name, or a list of names."""
    value = [value] if isinstance(value, str) else value
    expect(isinstance(value, list) and all(isinstance(v, str) for v in value), "a name or a list of names", value)
    return tuple(value)


def pair(value) -> tuple[float, float]:
    expect(isinstance(value, list) and len(value) == 2 and all(map(is_number, value)), "[lo, hi]", value)
    return float(value[0]), float(value[1])


def bounds(value) -> tuple[float, float]:
    """[lo, hi] where either end may be open (-inf, inf), e.g. an expected slope that must be > 0."""
    ok = isinstance(value, list) and len(value) == 2
    ok = ok and all(isinstance(v, (int, float)) and not isinstance(v, bool) and not math.isnan(v) for v in value)
    expect(ok, "[lo, hi] (numbers; -inf or inf for an open end)", value)
    return float(value[0]), float(value[1])


def formula(value) -> str:
    """An expression string (jaxmem.spec.expr), parsed now."""
    expect(isinstance(value, str), "an expression string", value)
    try:
        names_in(value)
    except ExpressionError as err:
        raise BadValue(str(err)) from None
    return value


def expression(value) -> str | float:
    """A number, or an expression string parsed now."""
    if is_number(value):
        return value
    expect(isinstance(value, str), "a number or an expression string", value)
    return formula(value)


class Table:
    """One TOML table at a dotted `path`: its unknown keys, and typed reads of its values; every
    problem is appended to `problems`."""

    def __init__(self, path: str, value, keys: Iterable[str], problems: list[str]):
        self.path, self.problems = path, problems
        self.data = value if isinstance(value, dict) else {}
        if not isinstance(value, dict):
            problems.append(f"{path}: must be a table, got {value!r}")
        problems += unknown_keys(path, self.data, keys)

    def get(self, key: str, kind: Callable, default=None):
        """The value at `key` as `kind` reads it; `default` when it is absent or bad (a problem)."""
        if key not in self.data:
            return default
        try:
            return kind(self.data[key])
        except BadValue as err:
            self.problems.append(f"{self.path}.{key}: {err}")
            return default

    def need(self, key: str, kind: Callable):
        """Like get, for a key the table must have (None when it is missing: a problem)."""
        if key not in self.data:
            self.problems.append(f"{self.path}.{key}: missing")
        return self.get(key, kind)

    def check(self, key: str, found: Iterable[str], allowed: frozenset[str] | None, what: str) -> None:
        """Names read from `key` must be in `allowed` (None: not checked)."""
        self.problems += unknown_names(f"{self.path}.{key}", found, allowed, what)

    def metric(self, metrics: frozenset[str] | None) -> str | None:
        """The required `metric` key, one of `metrics`."""
        value = self.need("metric", text)
        self.check("metric", [] if value is None else [value], metrics, METRIC)
        return value

    def tables(self, key: str, keys: Iterable[str], single: bool = False) -> list[Table]:
        """The list of tables at `key` (or with `single`, also one table), each read with `keys`."""
        value = self.data.get(key, [])
        value = [value] if single and isinstance(value, dict) else value
        if not isinstance(value, list):
            self.problems.append(f"{self.path}.{key}: must be a list of tables, got {value!r}")
            return []
        return [Table(f"{self.path}.{key}[{i}]", v, keys, self.problems) for i, v in enumerate(value)]
