"""`jaxmem run SPEC --set PATH=VALUE`: spec values overridden from the command line. A value is read as
TOML (`[8, 16]`, `5`, `1e-3`, `true`, `"mlp"`; a bare word is a string) and set at its dotted path in the
raw spec and in every preset, so it wins whichever preset is chosen; the spec is validated afterwards and
stores the result like any other value."""

from __future__ import annotations

import copy
import hashlib
import re
import tomllib

from jaxmem.spec.sweep import SpecError

SOURCE = "--set"
_WORD = re.compile(r"[A-Za-z_][\w.:+-]*")


def parse(text: str) -> tuple[list[str], object]:
    """'grid.d=[8,16]' -> (['grid', 'd'], [8, 16])."""
    path, sep, value = text.partition("=")
    keys = path.strip().split(".")
    if not sep or not all(k.strip() for k in keys):
        raise SpecError(SOURCE, [f"{text!r}: expected PATH=VALUE, e.g. grid.d=[8,16] or seeds=5"])
    try:
        return [k.strip() for k in keys], tomllib.loads(f"value = {value.strip()}")["value"]
    except tomllib.TOMLDecodeError as err:
        if _WORD.fullmatch(value.strip()):
            return [k.strip() for k in keys], value.strip()
        raise SpecError(SOURCE, [f"{path.strip()}: {value.strip()!r} is not a TOML value ({err})"]) from None


def set_at(table: dict, keys: list[str], value) -> None:
    """table[k1][k2]...[kn] = value, making the missing tables; SpecError naming the path where a
    non-table stands in the way."""
    for depth, key in enumerate(keys[:-1]):
        inner = table.setdefault(key, {})
        if not isinstance(inner, dict):
            where = ".".join(keys[: depth + 1])
            raise SpecError(SOURCE, [f"{'.'.join(keys)}: {where} is {inner!r}, not a table"])
        table = inner
    table[keys[-1]] = value


def apply(raw: dict, overrides: list[str]) -> dict:
    """A copy of the raw spec with every `PATH=VALUE` set in it and in each of its presets."""
    out = copy.deepcopy(raw)
    presets = out.get("presets")
    tables = [out] + [p for p in presets.values() if isinstance(p, dict)] if isinstance(presets, dict) else [out]
    for text in overrides:
        keys, value = parse(text)
        if keys[0] == "presets":
            raise SpecError(SOURCE, [f"{text!r}: set the values themselves; --preset chooses a preset"])
        for table in tables:
            set_at(table, keys, copy.deepcopy(value))
    return out


def tag(overrides: list[str]) -> str:
    """A short, stable name for a set of overrides (for the default output folder)."""
    return hashlib.sha1("\n".join(overrides).encode()).hexdigest()[:8]
