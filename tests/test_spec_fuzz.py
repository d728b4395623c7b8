"""Property-based fuzzing of sweep specs (hypothesis): whatever a spec file holds, `jaxmem run SPEC
--dry-run` either plans it or exits 2 with a `jaxmem: error: ...` message, never a traceback.

Specs are valid bases mutated at random paths (wrong types, odd numbers, bad expressions, unknown,
misspelled or missing keys and sections, bad presets), plus raw bytes, random text and `extends` chains
and cycles; the report tables ([report], [report.heatmap], [report.trajectory]) also on their own.
"""

import contextlib
import copy
import datetime
import io
import json
import math
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from jaxmem.cli.main import main
from jaxmem.spec.sweep import read_toml

ROOT = Path(__file__).resolve().parents[1]
FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

BASES = [
    {  # a search over a grid with a helper axis, a derived field and both presets
        "experiment": "assoc_memory",
        "description": "fuzz base",
        "seeds": [0, 1],
        "fixed": {"model": "mlp", "d": 8},
        "grid": {"m": [8, 16], "ratio": {"range": [1, 2]}},
        "derived": {"M": "ratio * m"},
        "train": {"steps": 64, "eval_every": 32, "early_stop": 0.99, "learning_rates": [0.01, 0.03]},
        "search": {"variable": "N", "lo": "d", "hi": "m * d", "threshold": 0.99, "resolution": 0.05, "probes": 2},
        "engine": {"segment_seconds": 0.2, "search_pad_floor": 1.0, "record_trajectory": True, "pad_to_max": ["m"]},
        "report": {"fit": "N"},
        "presets": {"quick": {"seeds": [0], "grid": {"m": [8]}}, "paper": {"train": {"steps": 128}}},
    },
    {  # a plain grid, with exponents, of another experiment
        "experiment": "factual_recall",
        "seeds": 1,
        "fixed": {"S": 8, "R": 4, "D": 2, "T": 8, "d": 8, "d_h": 4, "batch": 16, "test_size": 16},
        "grid": {"H": [1, 2], "m": {"exponents": [2, 4, 1], "base": 2, "round": "floor"}},
        "train": {"steps": 32, "eval_every": 16, "learning_rates": 0.01},
        "engine": {"pad_to_max": ["H", "m"]},
    },
    read_toml(ROOT / "sweeps" / "nichani24" / "escape_times.toml"),  # a shipped spec, as written
]
REPORT = {  # every key of the report tables, valid for BASES[0]
    "title": "fuzz",
    "x": "params",
    "x_label": "params",
    "fit": "N*log(N)",
    "guide": {"expr": "2*N", "label": "guide"},
    "group_by": ["m"],
    "expect_slope": [0.5, 2.0],
    "collapse": True,
    "references": False,
    "heatmap": {
        "x": "m*d",
        "y": "ratio",
        "x_label": "md",
        "y_label": "ratio",
        "metric": "max_metric",
        "better": "max",
        "threshold": 0.9,
        "vmin": 0.0,
        "vmax": 1.0,
        "annotate": True,
        "lines": [{"x": [1, 100], "y": "2 + x/2", "label": "l", "color": "red", "style": "-"}, {"x": 8, "y": [1, 2]}],
    },
    "trajectory": {
        "metrics": ["loss", "accuracy"],
        "x": "time",
        "x_scale": "log",
        "y_scale": "linear",
        "x_label": "t",
        "y_label": "v",
        "title": "curves",
        "layout": "metric",
        "log_y": ["loss"],
        "group_by": ["m"],
        "color_by": ["lr"],
        "seeds": "band",
        "references": [{"y": "log(m)", "label": "ln m", "color": "0.3", "style": "--"}],
        "stages": [{"from": 0, "to": 32, "label": "early", "color": "0.9"}],
        "crossings": [{"metric": "accuracy", "above": "0.5", "label": "half"}, {"metric": "loss", "below": 1}],
        "plateau": {"metric": "loss", "near": "log(d)", "tol": 0.1, "label": "p"},
        "escape": {
            "x": "log(m)",
            "x_label": "ln m",
            "y": "step",
            "group_by": ["d"],
            "tolerance": 0.2,
            "predicted": {"half": "1/lr"},
        },
        "rates": [
            {"metric": "loss", "scale": "loglog", "decades": 1, "predicted": "-1", "tolerance": 0.1, "label": "r"}
        ],
        "trends": [{"metric": "accuracy", "direction": "increasing", "tol": 1e-6, "label": "up"}],
    },
}

NAMES = ["d", "m", "N", "M", "H", "S", "model", "steps", "variable", "lo", "hi", "range", "log_range", "exponents"]
NAMES += ["num", "base", "round", "quick", "paper", "fixed", "grid", "derived", "train", "search", "engine"]
NAMES += ["presets", "extends", "experiment", "seeds", "learning_rates", "pad_to_max", "goal", "mode", "integrator"]
NAMES += ["report", "success", "metric", "at_least", "at_most", "counts", "best", "final", "loss", "accuracy"]
NAMES += ["fit", "guide", "expr", "label", "group_by", "expect_slope", "collapse", "heatmap", "trajectory", "x", "y"]
NAMES += ["lines", "metrics", "crossings", "below", "above", "plateau", "near", "tol", "escape", "predicted"]
NAMES += ["references", "stages", "from", "to", "rates", "trends", "scale", "log_y", "layout", "lr", "time"]
EXPRESSIONS = [
    "d ** 2",
    "d **",
    "__import__('os').getcwd()",
    "d ** 99999",
    "10 ** 1000",
    "2 ** 1023 * 2",
    "1e400",
    "-1e400",
    "1/0",
    "log(-1)",
    "exp(1000)",
    "ceil(1e400)",
    "int(1e400 - 1e400)",
    "max()",
    "min(d)",
    "round(d, 10**9)",
    "d.real",
    "d[0]",
    "[d]",
    "(d, m)",
    "{d}",
    "'abc'",
    "d * 'x'",
    "True",
    "None",
    "lambda: 1",
    "d if m else 1",
    "f'{d}'",
    "d; m",
    "unknown_name",
    "",
    " ",
    "m // 0",
    "m % 0",
    "0 ** -1",
    "(-8) ** 0.5",
    "abs(-d)",
    "floor(m / 3)",
    "sqrt(d) * 1e308 * 1e308",
    "((2 ** 1024) ** 1024) ** 1024",
    "2 ** (" + " * ".join(["2 ** 1000"] * 15) + ")",
]
NUMBERS = [0, -1, 1, 2, 3, 7, 2**31, 2**63 - 1, -(2**63), 10**12, 0.0, -0.5, 0.5, 1.5, 1e-300, 1e308]
NUMBERS += [math.inf, -math.inf, math.nan]
SCALARS = st.one_of(
    st.sampled_from(NUMBERS),
    st.sampled_from(EXPRESSIONS),
    st.sampled_from(NAMES + ["mlp", "linear", "assoc_memory", "nonexistent", "../..", "\x00", "x" * 300]),
    st.integers(-(2**63), 2**63 - 1),
    st.floats(),
    st.booleans(),
    st.text(max_size=8),
    st.datetimes(),
    st.dates(),
    st.times(),
)
KEYS = st.sampled_from(NAMES) | st.text(min_size=1, max_size=10)
VALUES = st.recursive(
    SCALARS, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(KEYS, inner, max_size=3), max_leaves=6
)


# -- writing TOML (no writer in the standard library) --------------------------------------------------
def toml_value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf") if math.isinf(value) else repr(value)
    if isinstance(value, str):
        return json.dumps(value)  # JSON escapes are TOML escapes (a lone surrogate makes the file malformed)
    if isinstance(value, (datetime.datetime, datetime.date, datetime.time)):
        return value.isoformat()
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    return "{" + ", ".join(f"{json.dumps(str(k))} = {toml_value(v)}" for k, v in value.items()) + "}"


def toml(spec: dict) -> str:
    return "".join(f"{json.dumps(str(k))} = {toml_value(v)}\n" for k, v in spec.items())


# -- mutating a spec -----------------------------------------------------------------------------------
def paths(tree: dict, prefix=()) -> list[tuple]:
    """Every key path of the nested tables of a spec."""
    found = []
    for key, value in tree.items():
        found.append(prefix + (key,))
        if isinstance(value, dict):
            found += paths(value, prefix + (key,))
    return found


def parent_of(spec: dict, path: tuple) -> dict:
    for key in path[:-1]:
        spec = spec[key]
    return spec


def typo(word: str, data) -> str:
    """`word` with one letter dropped, doubled, or swapped with the next."""
    i = data.draw(st.integers(0, max(len(word) - 1, 0)), label="letter")
    kind = data.draw(st.sampled_from(["drop", "double", "swap"]), label="typo")
    if kind == "drop":
        return word[:i] + word[i + 1 :]
    if kind == "double":
        return word[: i + 1] + word[i:]
    return word[:i] + word[i + 1 : i + 2] + word[i : i + 1] + word[i + 2 :]


def mutate(spec: dict, data, choices: list[tuple] | None = None) -> None:
    """One random edit at one of `choices` (default: any path): set a value, delete a key, add an
    unknown key, rename a key, or misspell it."""
    path = data.draw(st.sampled_from(choices or paths(spec)), label="path")
    parent = parent_of(spec, path)
    kind = data.draw(st.sampled_from(["set", "delete", "add", "rename", "typo"]), label="kind")
    if kind == "set":
        parent[path[-1]] = data.draw(VALUES, label="value")
    elif kind == "delete":
        del parent[path[-1]]
    elif kind == "add":
        parent[data.draw(KEYS, label="new key")] = data.draw(VALUES, label="value")
    elif kind == "rename":
        parent[data.draw(KEYS, label="new name")] = parent.pop(path[-1])
    else:
        parent[typo(str(path[-1]), data)] = parent.pop(path[-1])


# -- the property --------------------------------------------------------------------------------------
def dry_run(path: Path) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["run", str(path), "--dry-run"])
    return code, out.getvalue(), err.getvalue()


def assert_planned_or_refused(path: Path) -> None:
    """Exit 0 with a plan, or exit 2 with `jaxmem: error: ...` naming the file; nothing else on stderr."""
    code, out, err = dry_run(path)
    assert "Traceback" not in out + err
    if code == 0:
        assert out.startswith("sweep ") and "first round:" in out, out
    else:
        assert code == 2, (code, err)
        assert err.startswith("jaxmem: error: ") and str(path) in err.splitlines()[0], err
        assert out == ""


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return tmp_path_factory.mktemp("fuzz")


@FUZZ
@given(data=st.data())
def test_mutated_specs_are_planned_or_refused_clearly(folder, data):
    spec = copy.deepcopy(data.draw(st.sampled_from(BASES), label="base"))
    for _ in range(data.draw(st.integers(1, 3), label="edits")):
        if not spec:
            break
        mutate(spec, data)
    path = folder / "mutated.toml"
    path.write_text(toml(spec))
    assert_planned_or_refused(path)


def test_the_report_base_is_valid(folder):
    path = folder / "report.toml"
    path.write_text(toml({**BASES[0], "report": REPORT}))
    code, out, err = dry_run(path)
    assert code == 0, err


@FUZZ
@given(data=st.data())
def test_mutated_report_tables_are_planned_or_refused_clearly(folder, data):
    """Edits inside [report], [report.heatmap] and [report.trajectory] only: a SpecError naming the
    field (exit 2) or a valid spec, never another exception."""
    spec = copy.deepcopy({**BASES[0], "report": REPORT})
    for _ in range(data.draw(st.integers(1, 3), label="edits")):
        report = spec.get("report")
        choices = paths(report, ("report",)) if isinstance(report, dict) else []
        if not choices:
            break
        mutate(spec, data, choices)
    path = folder / "mutated_report.toml"
    path.write_text(toml(spec))
    assert_planned_or_refused(path)


@FUZZ
@given(content=st.binary(max_size=200) | st.text(max_size=200).map(str.encode))
def test_arbitrary_bytes_are_refused_clearly(folder, content):
    path = folder / "bytes.toml"
    path.write_bytes(content)
    assert_planned_or_refused(path)


EXTENDS = ["a.toml", "b.toml", "c.toml", "base.toml", "missing.toml", ".", "", "\x00", "x" * 300, 3, ["a.toml"], {}]


@settings(FUZZ, max_examples=60)
@given(targets=st.lists(st.sampled_from(EXTENDS) | st.none(), min_size=3, max_size=3))
def test_extends_chains_and_cycles_are_resolved_or_refused(folder, targets):
    """a.toml, b.toml and c.toml each extend one of EXTENDS (None: nothing), so chains, cycles and
    self-references, missing files, folders, bad names and non-strings all occur; base.toml is valid."""
    (folder / "base.toml").write_text(toml(BASES[0]))
    for name, target in zip(["a.toml", "b.toml", "c.toml"], targets):
        (folder / name).write_text(toml({"seeds": [3]} if target is None else {"extends": target, "seeds": [3]}))
    assert_planned_or_refused(folder / "a.toml")


# Every spec below crashed `jaxmem run --dry-run` with a traceback (or hung) before it was fixed; each
# must now be refused with a message naming the field.
FOUND = [
    (("presets", "quick"), 0, "presets.quick: must be a table"),
    (("experiment",), [], "experiment: must be a string, got []"),
    (("derived", "M"), "d **", "derived.M: cannot parse expression 'd **'"),
    (("grid", "m"), [datetime.datetime(2000, 1, 1)], "grid.m: m must be of type int"),
    (("grid", "m"), {"exponents": [2, 4, 1], "round": []}, "grid.m.round: must be one of"),
    (("extends",), "\x00", "extends: no such file"),
    (("extends",), "x" * 300, "extends: no such file"),
    (("fixed", "d"), 10**12, "fixed.d: d must be below 2**31"),
    (("train", "steps"), 2**62, "train.steps: must be below 2**31"),
    (("engine", "search_pad_ratio"), math.nan, "engine.search_pad_ratio: must be a finite number, got nan"),
    (("search", "hi"), "1e400", "search.lo/hi: '1e400' is inf"),
    (("search", "hi"), "10 ** 1000", "search.lo/hi: '10 ** 1000' exceeds 2**31"),
    (("derived", "M"), "ratio * 1e400", "derived: M = 'ratio * 1e400' is inf"),
    (("derived", "M"), "ratio * 2 ** 1023 * 2", "derived: M must be below 2**31, got a 1025-bit integer"),
    (("derived", "M"), "ratio * ((2 ** 1024) ** 1024) ** 1024", "exceeds 2**4096"),
    (("derived", "M"), "ratio * " + EXPRESSIONS[-1], "exponent too large"),
    (("grid", "ratio"), {"range": [1, 10**9]}, "grid.ratio.range: gives 1000000000 values"),
    (("grid", "ratio"), {"range": [1, 2, 1e-300]}, "grid.ratio.range: gives a 997-bit integer values"),
    (("grid", "ratio"), {"range": [1, math.inf]}, "grid.ratio.range: arguments must be finite numbers"),
    (("grid", "ratio"), {"exponents": [0, 2000, 1], "base": 10}, "grid.ratio.exponents: must lie within"),
    (("grid", "ratio"), {"exponents": [0, 1000, 1], "base": 10.0}, "grid.ratio.exponents: 10.0 ** 1000 overflows"),
    (("grid", "ratio"), {"log_range": [1, 2], "num": 10**9}, "grid.ratio.num: must be in [1, 1000000]"),
    (("seeds",), 10**9, "seeds: at most 1000000 seeds, each below 2**31"),
    (("seeds",), [2**40], "seeds: at most 1000000 seeds, each below 2**31"),
]


@pytest.mark.parametrize("where, value, message", FOUND, ids=[f"{'.'.join(w)}={str(v)[:20]}" for w, v, _ in FOUND])
def test_specs_that_crashed_are_refused_naming_the_field(folder, where, value, message):
    spec = copy.deepcopy(BASES[0])
    if where[0] != "presets":
        del spec["presets"]  # its quick preset would override the edit
    parent_of(spec, where)[where[-1]] = value
    path = folder / "found.toml"
    path.write_text(toml(spec))
    code, _, err = dry_run(path)
    assert code == 2 and err.startswith("jaxmem: error: ") and message in err, err


def test_non_utf8_bytes_are_refused_as_malformed_toml(folder):
    path = folder / "latin1.toml"
    path.write_bytes('experiment = "assoc_memory" # é'.encode("latin-1"))
    code, _, err = dry_run(path)
    assert code == 2 and "malformed TOML" in err and "utf-8" in err, err
