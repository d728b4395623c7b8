"""Tests for jaxmem.spec: parsing, validation (every error names its field) and fingerprints."""

import copy
import itertools
import json
import math
import tomllib
from pathlib import Path

import pytest
from helpers import jaxmem_cli

from jaxmem.cli.main import main
from jaxmem.spec.report_tables import Guide, ReportSpec
from jaxmem.spec.sweep import SearchSpec, SpecError, SuccessRule, TrainSpec, axis_values, load, parse, read_toml

REPO = Path(__file__).resolve().parents[1]
FIG1 = REPO / "sweeps" / "nichani24" / "fig1_mlp.toml"
ESCAPE = REPO / "sweeps" / "nichani24" / "escape_times.toml"
CROSINGS = "report.trajectory.crosings: unknown key (did you mean 'crossings'?)"
SLOP = "report.expect_slop: unknown key (did you mean 'expect_slope'?)"


def base(**override):
    """A small valid MLP capacity search; keyword arguments replace whole top-level entries."""
    raw = {
        "experiment": "assoc_memory",
        "description": "test sweep",
        "seeds": [0, 1],
        "fixed": {"model": "mlp"},
        "grid": {"d": [8, 16], "m_over_d": [1, 2]},
        "derived": {"m": "m_over_d * d"},
        "train": {"steps": 64, "eval_every": 16, "early_stop": 0.99, "learning_rates": [1e-2, 3e-2]},
        "search": {"variable": "N", "lo": "d", "hi": "m * d", "resolution": 0.05, "probes": 3},
    }
    raw.update(copy.deepcopy(override))
    return raw


def with_(raw, path, value):
    """Copy of `raw` with the dotted `path` set to `value`."""
    raw = copy.deepcopy(raw)
    *parents, leaf = path.split(".")
    table = raw
    for key in parents:
        table = table.setdefault(key, {})
    table[leaf] = value
    return raw


def problems_of(raw, preset=None):
    with pytest.raises(SpecError) as err:
        parse(raw, "t", preset=preset)
    assert err.value.problems, "SpecError without problems"
    message = str(err.value)
    assert all(p in message for p in err.value.problems)
    return message, err.value.problems


# -- valid specs ----------------------------------------------------------------------------------


def test_base_spec_parses_and_expands_derived():
    spec = parse(base(), "t")
    assert spec.experiment == "assoc_memory" and spec.name == "t" and spec.preset == ""
    assert spec.seeds == (0, 1)
    assert spec.train == TrainSpec(steps=64, eval_every=16, early_stop=0.99, learning_rates=(0.01, 0.03))
    assert isinstance(spec.search, SearchSpec) and spec.search.variable == "N" and spec.search.probes == 3
    assert len(spec.points) == 4 and spec.skipped == ()
    assert {(p["d"], p["m_over_d"]) for p in spec.points} == set(itertools.product([8, 16], [1, 2]))
    for p in spec.points:
        assert p["m"] == p["m_over_d"] * p["d"] and isinstance(p["m"], int)
        assert p["model"] == "mlp"
        assert "N" not in p  # the searched variable is not part of a point
        # defaults of the experiment are filled in
        assert p["M"] == 0 and p["init"] == "standard" and p["mlp_bias"] is True
    assert set(spec.axes) == {"d", "m_over_d", "m"}


def test_seeds_as_a_count():
    assert parse(base(seeds=3), "t").seeds == (0, 1, 2)


def test_fig1_quick_preset_is_the_default():
    raw = tomllib.loads(FIG1.read_text())
    spec = load(FIG1)
    assert spec.name == "fig1_mlp" and spec.preset == "quick"
    assert spec == load(FIG1, "quick")
    quick = raw["presets"]["quick"]
    assert list(spec.seeds) == quick["seeds"]
    assert spec.train.steps == quick["train"]["steps"] and spec.train.eval_every == quick["train"]["eval_every"]
    assert spec.search.resolution == quick["search"]["resolution"]
    expected = set(itertools.product(quick["grid"]["d"], quick["grid"]["m_over_d"]))
    assert {(p["d"], p["m_over_d"]) for p in spec.points} == expected
    assert all(p["m"] == p["m_over_d"] * p["d"] for p in spec.points)
    # the preset replaces the grid table's axes but base tables it does not mention survive
    assert spec.resolved["report"] == raw["report"]
    assert spec.report.fit == raw["report"]["fit"] and spec.report.guide.expr == raw["report"]["guide"]["expr"]
    assert spec.report.expect_slope == tuple(raw["report"]["expect_slope"]) and spec.report.collapse is True
    assert spec.search.mode == raw["search"]["mode"]


def test_fig1_paper_preset_expands_the_exponent_axis():
    raw = tomllib.loads(FIG1.read_text())
    spec = load(FIG1, "paper")
    assert spec.preset == "paper" and list(spec.seeds) == raw["seeds"]
    axis = raw["grid"]["d"]
    first, last, step = axis["exponents"]
    exps = [first + i * step for i in range(int(round((last - first) / step)) + 1)]
    expected_d = sorted({math.floor(axis["base"] ** e) for e in exps})
    assert sorted({p["d"] for p in spec.points}) == expected_d
    assert len(spec.points) == len(expected_d) * len(raw["grid"]["m_over_d"])
    assert spec.train.steps == raw["train"]["steps"]
    assert spec.train.learning_rates == tuple(raw["train"]["learning_rates"])
    assert load(FIG1, "quick").fingerprint != spec.fingerprint


def test_preset_is_deep_merged(tmp_path):
    raw = base(presets={"small": {"train": {"steps": 32}, "grid": {"d": [8]}}})
    spec = parse(raw, "t", preset="small")
    assert spec.preset == "small"
    assert spec.train.steps == 32 and spec.train.eval_every == 16  # sibling key kept
    assert {p["d"] for p in spec.points} == {8} and {p["m_over_d"] for p in spec.points} == {1, 2}
    assert "presets" not in spec.resolved
    # no preset named: without a quick preset, the base is used
    assert parse(raw, "t").train.steps == 64


# -- grid axes ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "axis, expected",
    [
        ([3, 1, 2], [3, 1, 2]),
        ({"range": [2, 5]}, [2, 3, 4, 5]),
        ({"range": [1, 10, 3]}, [1, 4, 7, 10]),
        ({"range": [1, 9, 3]}, [1, 4, 7]),
        ({"exponents": [0, 3, 1]}, [1, 2, 4, 8]),
        ({"exponents": [1, 3, 1], "base": 3}, [3, 9, 27]),
        ({"exponents": [0, 1, 0.25], "base": 2, "round": "floor"}, [1, 2]),
        ({"exponents": [0, 1, 0.5], "base": 4, "round": "ceil"}, [1, 2, 4]),
        ({"log_range": [1, 100], "num": 3, "round": "round"}, [1, 10, 100]),
        ({"log_range": [5, 5], "num": 1}, [5.0]),
    ],
)
def test_axis_forms(axis, expected):
    assert axis_values("grid.x", axis) == pytest.approx(expected)


def test_log_range_is_geometric():
    values = axis_values("grid.x", {"log_range": [2, 2 * 3**4], "num": 5})
    assert values == pytest.approx([2, 6, 18, 54, 162])


def test_exponent_axis_with_rounding_gives_ints_through_parse():
    spec = parse(base(grid={"d": {"exponents": [3, 4, 0.5], "base": 2, "round": "floor"}, "m_over_d": [1]}), "t")
    assert [p["d"] for p in spec.points] == [8, math.floor(2**3.5), 16]
    assert all(isinstance(p["d"], int) for p in spec.points)


@pytest.mark.parametrize(
    "axis, fragment",
    [
        ([], "grid.x: empty list"),
        ({"range": [5, 1]}, "grid.x: produces no values"),
        ({"range": [1, 5, 0]}, "grid.x.range"),
        ({"range": [1]}, "grid.x.range"),
        ({"log_range": [1, 8]}, "grid.x.log_range"),
        ({"log_range": [0, 8], "num": 3}, "grid.x.log_range"),
        ({"exponents": [1, 3]}, "grid.x.exponents"),
        ({"range": [1, 3], "log_range": [1, 3], "num": 2}, "grid.x: give exactly one"),
        ({"range": [1, 3], "step": 1}, "grid.x: give exactly one"),
        ({"range": [1, 3], "round": "up"}, "grid.x.round"),
        ("8", "grid.x: must be a list or a table"),
        (8, "grid.x: must be a list or a table"),
    ],
)
def test_bad_axes(axis, fragment):
    with pytest.raises(ValueError) as err:
        axis_values("grid.x", axis)
    assert fragment in str(err.value)


def test_empty_grid_axis_is_a_spec_error():
    message, _ = problems_of(with_(base(), "grid.d", []))
    assert "grid.d" in message and "empty" in message


@pytest.mark.parametrize(
    "axis",
    [
        {"range": [1, "9"]},
        {"range": [1, 9, "2"]},
        {"log_range": ["1", 8], "num": 2},
        {"exponents": [1, 3, 1], "base": "2"},
    ],
)
def test_non_numeric_axis_arguments_are_spec_errors(axis):
    message, _ = problems_of(with_(base(), "grid.d", axis))
    assert "grid.d" in message


# -- errors, each naming its field -----------------------------------------------------------------


@pytest.mark.parametrize(
    "raw, fragments",
    [
        pytest.param(
            {k: v for k, v in base().items() if k != "experiment"}, ["experiment: missing"], id="no-experiment"
        ),
        pytest.param(
            base(experiment="assoc_memry"),
            ["experiment: unknown experiment 'assoc_memry'", "did you mean 'assoc_memory'"],
            id="unknown-experiment",
        ),
        pytest.param(
            base(serch={"variable": "N"}),
            ["serch: unknown section or key", "did you mean 'search'"],
            id="unknown-top-level",
        ),
        pytest.param(
            with_(base(), "fixed.mlp_bais", False),
            ["fixed.mlp_bais: unknown field", "did you mean 'mlp_bias'"],
            id="unknown-fixed-field",
        ),
        pytest.param(with_(base(), "grid.dd", [8]), ["grid.dd: unknown field", "did you mean 'd'"], id="unknown-grid"),
        pytest.param(
            with_(base(), "train.step", 10), ["train.step: unknown key", "did you mean 'steps'"], id="unknown-train-key"
        ),
        pytest.param(
            with_(base(), "search.probe", 2),
            ["search.probe: unknown key", "did you mean 'probes'"],
            id="unknown-search-key",
        ),
        pytest.param(
            with_(base(), "engine.pad_ratoi", 2.0),
            ["engine.pad_ratoi: unknown key", "did you mean 'pad_ratio'"],
            id="unknown-engine-key",
        ),
        pytest.param(
            with_(base(), "train.steps", "many"), ["train.steps: unknown name 'many' in expression"], id="steps-str"
        ),
        pytest.param(
            with_(base(), "train.steps", 64.0),
            ["train.steps: must be an integer or an expression string, got 64.0"],
            id="steps-float",
        ),
        pytest.param(
            with_(base(), "train.learning_rates", ["fast"]),
            ["train.learning_rates: must be a number or a non-empty"],
            id="lr-str",
        ),
        pytest.param(
            with_(base(), "train.learning_rates", []),
            ["train.learning_rates: must be a number or a non-empty"],
            id="lr-empty",
        ),
        pytest.param(
            with_(base(), "train.early_stop", True),
            ["train.early_stop: must be a number (or false for none), got True"],
            id="early-stop-bool",
        ),
        pytest.param(
            with_(base(), "engine.record_trajectory", 1),
            ["engine.record_trajectory: must be true or false, got 1"],
            id="bool-as-int",
        ),
        pytest.param(with_(base(), "train", 5), ["train: must be a table"], id="train-not-table"),
        pytest.param(
            base(grid={"d": ["x"]}, fixed={"model": "mlp", "m": 8}, derived={}),
            ["d must be of type int, got 'x'"],
            id="d-str",
        ),
        pytest.param(with_(base(), "fixed.model", "rnn"), ["model must be one of"], id="bad-choice"),
        pytest.param(
            with_(base(), "train.steps", 100),
            ["train.steps: 100 is not a multiple of train.eval_every = 16"],
            id="steps-multiple",
        ),
        pytest.param(with_(base(), "train.eval_every", 0), ["train.eval_every: must be >= 1"], id="eval-every-0"),
        pytest.param(with_(base(), "train.steps", -16), ["train.steps: must be >= 0"], id="steps-negative"),
        pytest.param(
            with_(base(), "train.learning_rates", [1e-2, -1e-3]),
            ["train.learning_rates: must be positive"],
            id="lr-negative",
        ),
        pytest.param(
            with_(base(), "train.learning_rates", [0.0]), ["train.learning_rates: must be positive"], id="lr-zero"
        ),
        pytest.param(
            with_(base(), "train.learning_rates", [math.inf]),
            ["train.learning_rates: must be positive and finite"],
            id="lr-inf",
        ),
        pytest.param(with_(base(), "grid.d", [0, 8]), ["d must be >= 1, got 0"], id="d-zero-minimum"),
        pytest.param(
            with_(base(), "search.variable", "model"),
            ["search.variable: 'model' is not an integer field"],
            id="search-variable-str-field",
        ),
        pytest.param(
            with_(base(), "search.variable", "Q"),
            ["search.variable: 'Q' is not an integer field"],
            id="search-variable-unknown",
        ),
        pytest.param(
            with_(base(), "grid.N", [8, 16]), ["search.variable: 'N' is searched"], id="search-variable-in-grid"
        ),
        pytest.param(
            with_(base(), "search.mode", "fast"),
            ["search.mode: must be one of ['verified', 'paper'], got 'fast'"],
            id="search-mode",
        ),
        pytest.param(with_(base(), "search.threshold", 1.5), ["search.threshold: must be in (0, 1]"], id="threshold"),
        pytest.param(with_(base(), "search.probes", 0), ["search.probes: must be >= 1"], id="probes"),
        pytest.param(with_(base(), "search.resolution", -0.1), ["search.resolution: must be >= 0"], id="resolution"),
        pytest.param({**base(), "search": {"lo": 1, "hi": 2}}, ["search.variable: missing"], id="search-missing-key"),
        pytest.param(base(seeds=[0, 1, 0]), ["seeds: duplicates"], id="duplicate-seeds"),
        pytest.param(base(seeds=0), ["seeds: must be a positive count"], id="zero-seeds"),
        pytest.param(base(seeds=[-1]), ["seeds: must be"], id="negative-seed"),
        pytest.param(with_(base(), "engine.pad_ratio", 0.5), ["engine.pad_ratio: must be >= 1"], id="pad-ratio"),
        pytest.param(with_(base(), "fixed.d", 8), ["d: given in more than one of fixed / grid / derived"], id="clash"),
        pytest.param(
            with_(base(), "derived.m", "m_over_d * q"), ["derived", "unknown name 'q'"], id="derived-unknown-name"
        ),
        pytest.param(
            with_(base(), "search.lo", "x + 1"), ["search.lo/hi", "unknown name 'x'"], id="bound-unknown-name"
        ),
        pytest.param(base(derived={}), ["grid.m_over_d: unknown field"], id="helper-without-derived"),
    ],
)
def test_bad_input_names_the_field(raw, fragments):
    message, _ = problems_of(raw)
    for fragment in fragments:
        assert fragment in message, f"{fragment!r} not in:\n{message}"
    assert message.startswith("invalid sweep spec <spec>")


def test_wrong_type_feeding_a_derived_field_is_a_spec_error():
    # the layout of sweeps/nichani24/fig1_mlp.toml: d on the grid, m derived from it
    message, _ = problems_of(with_(base(), "grid.d", ["x"]))
    assert "d" in message and "'x'" in message


def test_duplicate_list_axis_values_are_not_duplicate_points():
    raw = with_(base(), "grid.d", [8, 16, 8])
    try:
        spec = parse(raw, "t")
    except SpecError as err:
        assert "grid.d" in str(err)
    else:
        ids = [tuple(sorted(p.items())) for p in spec.points]
        assert len(ids) == len(set(ids)) == 4


def test_missing_required_field():
    raw = base()
    del raw["fixed"]["model"]
    message, _ = problems_of(raw)
    assert "missing required field(s) model" in message


def test_lower_bound_expression_below_one_makes_every_point_impossible():
    message, _ = problems_of(with_(base(), "search.lo", "d - 100"))
    assert "every point is impossible" in message and "[-9" in message and "below 1" in message


def test_lower_bound_below_one_names_search_lo():
    message, _ = problems_of(with_(base(), "search.lo", 0))
    assert "search.lo" in message


@pytest.mark.parametrize("value", [["x"], [0, 8]])
def test_bad_grid_value_names_the_dotted_path(value):
    message, _ = problems_of(base(grid={"d": value}, fixed={"model": "mlp", "m": 8}, derived={}))
    assert "grid.d" in message


def test_unknown_metric_is_rejected():
    message, _ = problems_of(with_(base(), "train.metric", "acc"))
    assert "train.metric" in message


def test_unknown_preset():
    message, _ = problems_of(base(presets={"quick": {}, "paper": {}}), preset="nope")
    assert "--preset 'nope'" in message and "paper, quick" in message
    message, _ = problems_of(base(), preset="nope")
    assert "--preset 'nope'" in message and "none" in message


def test_several_problems_are_reported_together():
    raw = with_(base(bogus=1, seeds=[1, 1]), "train.steps", "many")
    raw = with_(raw, "search.mode", "fast")
    raw = with_(raw, "fixed.mlp_bais", True)
    raw = with_(raw, "engine.max_slots", -1)
    message, problems = problems_of(raw)
    for fragment in (
        "bogus:",
        "seeds: duplicates",
        "train.steps: unknown name 'many'",
        "search.mode:",
        "fixed.mlp_bais:",
        "engine.max_slots:",
    ):
        assert fragment in message
    assert len(problems) == 6


@pytest.mark.parametrize(
    "extra, fragment", [(("grid.d", [0, 8]), "d must be >= 1"), (("train.eval_every", 0), "train.eval_every")]
)
def test_independent_problems_are_all_reported_at_once(extra, fragment):
    raw = with_(with_(base(), "train.steps", "many"), *extra)
    message, _ = problems_of(raw)
    assert "train.steps" in message and fragment in message


def test_impossible_points_are_skipped_with_a_reason():
    raw = base(grid={"d": [8, 16], "m": [0, 4]}, derived={})
    spec = parse(raw, "t")
    assert sorted((p["d"], p["m"]) for p in spec.points) == [(8, 4), (16, 4)]
    assert len(spec.skipped) == 2
    assert all("m=0" in s and "mlp needs m >= 1" in s for s in spec.skipped)
    assert {p["d"] for p in spec.points} == {8, 16}


def test_spec_with_only_impossible_points_is_an_error():
    raw = base(grid={"d": [8, 16], "m": [0]}, derived={})
    message, _ = problems_of(raw)
    assert "every point is impossible" in message and "mlp needs m >= 1" in message


def test_empty_search_bracket_is_skipped():
    raw = base(
        grid={"d": [8, 16]},
        fixed={"model": "mlp", "m": 1},
        derived={},
        search={"variable": "N", "lo": "d", "hi": "2 * m * d - 9"},
    )
    spec = parse(raw, "t")  # d=8: [8, 7] is empty; d=16: [16, 23]
    assert [p["d"] for p in spec.points] == [16]
    assert len(spec.skipped) == 1 and "[8, 7]" in spec.skipped[0]


# -- load -----------------------------------------------------------------------------------------


def test_load_malformed_toml(tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text('experiment = "assoc_memory"\n[train\nsteps = 3\n')
    with pytest.raises(SpecError) as err:
        load(path)
    assert "malformed TOML" in str(err.value) and str(path) in str(err.value)


def test_load_missing_file(tmp_path):
    with pytest.raises(SpecError, match="no such file"):
        load(tmp_path / "nothing.toml")


def test_load_reports_the_file_and_field(tmp_path):
    path = tmp_path / "s.toml"
    path.write_text('experiment = "assoc_memory"\n[fixed]\nmodel = "mlp"\nm = 8\nd = 8\n[train]\nsteps = "many"\n')
    with pytest.raises(SpecError) as err:
        load(path)
    assert str(path) in str(err.value) and "train.steps" in str(err.value)


# -- fingerprint ----------------------------------------------------------------------------------

SPEC_TOML = """\
experiment = "assoc_memory"
description = "a"
seeds = [0, 1]

[fixed]
model = "mlp"
init = "standard"

[grid]
d = [8, 16]
m_over_d = [1, 2]

[derived]
m = "m_over_d * d"

[train]
steps = 64
eval_every = 16
learning_rates = [0.01]

[search]
variable = "N"
lo = "d"
hi = "m * d"

[engine]
segment_seconds = 2.0

[report]
title = "x"
"""

REORDERED_TOML = """\
seeds = [0, 1]
description = "a"
experiment = "assoc_memory"

[report]
title = "x"

[search]
hi = "m * d"
lo = "d"
variable = "N"

[train]
learning_rates = [0.01]
eval_every = 16
steps = 64

[derived]
m = "m_over_d * d"

[engine]
segment_seconds = 2.0

[grid]
m_over_d = [1, 2]
d = [8, 16]

[fixed]
init = "standard"
model = "mlp"
"""


def fingerprint_of(text, tmp_path, name="s"):
    path = tmp_path / f"{name}.toml"
    path.write_text(text)
    return load(path).fingerprint


def test_fingerprint_ignores_key_order(tmp_path):
    first = fingerprint_of(SPEC_TOML, tmp_path, "a")
    assert first == fingerprint_of(REORDERED_TOML, tmp_path, "b")
    assert first == fingerprint_of(SPEC_TOML, tmp_path, "c")  # nor the file name
    assert len(first) == 16 and int(first, 16) >= 0


@pytest.mark.parametrize(
    "old, new",
    [
        ('title = "x"', 'title = "another title"\nfit = "N*log(N)"'),
        ('description = "a"', 'description = "something else"'),
        ("segment_seconds = 2.0", "segment_seconds = 9.0\nmax_slots = 4\nrecord_trajectory = true"),
    ],
)
def test_fingerprint_ignores_presentation_and_scheduling(tmp_path, old, new):
    assert old in SPEC_TOML
    assert fingerprint_of(SPEC_TOML, tmp_path, "a") == fingerprint_of(SPEC_TOML.replace(old, new), tmp_path, "b")


@pytest.mark.parametrize(
    "old, new",
    [
        ("steps = 64", "steps = 128"),
        ("eval_every = 16", "eval_every = 32"),
        ("learning_rates = [0.01]", "learning_rates = [0.03]"),
        ("seeds = [0, 1]", "seeds = [0, 2]"),
        ("d = [8, 16]", "d = [8, 32]"),
        ('init = "standard"', 'init = "standard"\nmlp_bias = false'),
        ('m = "m_over_d * d"', 'm = "2 * m_over_d * d"'),
        ('hi = "m * d"', 'hi = "m * d"\nthreshold = 0.9'),
        ('hi = "m * d"', 'hi = "m * d"\nmode = "paper"'),
        ("segment_seconds = 2.0", "segment_seconds = 2.0\npad_ratio = 1.5"),
    ],
)
def test_fingerprint_changes_with_results(tmp_path, old, new):
    assert old in SPEC_TOML
    assert fingerprint_of(SPEC_TOML, tmp_path, "a") != fingerprint_of(SPEC_TOML.replace(old, new, 1), tmp_path, "b")


def test_fingerprint_of_preset_is_its_merged_content():
    with_preset = base(presets={"quick": {"train": {"steps": 32}}})
    direct = with_(base(), "train.steps", 32)
    assert parse(with_preset, "t").fingerprint == parse(direct, "t").fingerprint
    assert parse(with_preset, "t", preset="").fingerprint == parse(base(), "t").fingerprint


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_extends_deep_merges_a_variant_over_its_base(tmp_path):
    _write(
        tmp_path / "base.toml",
        'experiment = "assoc_memory"\nseeds = [0]\n[fixed]\nmodel = "mlp"\nm = 8\nN = 20\n[grid]\nd = [8, 16]\n'
        "[train]\nsteps = 8\neval_every = 4\n[presets.quick]\ngrid = { d = [8] }\n",
    )
    variant = _write(
        tmp_path / "variant.toml", 'extends = "base.toml"\n[fixed]\nm = 16\n[presets.quick]\nseeds = [3]\n'
    )
    spec = load(variant, "quick")
    assert spec.name == "variant"
    assert [(p["d"], p["m"], p["model"]) for p in spec.points] == [(8, 16, "mlp")]
    assert spec.seeds == (3,)
    assert "extends" not in spec.resolved


def test_extends_cycle_and_missing_base_are_spec_errors(tmp_path):
    _write(tmp_path / "a.toml", 'extends = "b.toml"\nexperiment = "assoc_memory"\n')
    _write(tmp_path / "b.toml", 'extends = "a.toml"\n')
    with pytest.raises(SpecError, match="cycle"):
        load(tmp_path / "a.toml")
    _write(tmp_path / "c.toml", 'extends = "nowhere.toml"\n')
    with pytest.raises(SpecError, match="no such file"):
        load(tmp_path / "c.toml")


def test_shipped_variants_extend_fig4():
    fig4 = load(REPO / "sweeps/nichani24/fig4_facts_vs_params.toml", "paper")
    fig7 = load(REPO / "sweeps/nichani24/fig7_heads.toml", "paper")
    fig9 = load(REPO / "sweeps/nichani24/fig9_square.toml", "paper")
    assert {p["H"] for p in fig4.points} == {8} and {p["H"] for p in fig7.points} == {4, 16}
    assert {p["scaling"] for p in fig9.points} == {"square"} and fig9.search.lo != fig4.search.lo
    assert fig4.train == fig7.train and fig4.train.learning_rates == (1e-3, 3e-3, 1e-2)


def test_pad_to_max_must_name_integer_fields_that_are_not_searched():
    with pytest.raises(SpecError) as err:
        parse(base(engine={"pad_to_max": ["mm", "N", "model"]}), name="t")
    text = str(err.value)
    assert "'mm' is not an integer field" in text and "'model' is not an integer field" in text
    assert "searched 'N' cannot be padded" in text


def test_pad_to_max_puts_points_that_differ_in_those_sizes_in_one_program():
    from jaxmem.cli.views import dry_run

    raw = base(search=None)
    del raw["search"]
    raw["grid"] = {"d": [8], "m_over_d": [1, 2, 3]}
    raw["fixed"] = {"model": "mlp", "N": 40}
    assert "in 3 buckets" in dry_run(parse(raw, name="t"))
    merged = dry_run(parse({**raw, "engine": {"pad_to_max": ["m"]}}, name="t"))
    assert "in 1 buckets" in merged and "m=32" in merged  # the largest m, 24, on the padding ladder


def test_pad_to_max_takes_a_derived_size():
    """gcn_sampling's `stubs` (n1·d1 + (N − n1)·d2) is derived: padded to its largest value over the
    sweep, graphs of every degree share one program."""
    from jaxmem.cli.views import dry_run

    raw = {
        "experiment": "gcn_sampling",
        "seeds": [0],
        "fixed": {"n_nodes": 40, "n1": 4, "d2": 1, "n_omega": 20, "m": 8},
        "grid": {"d1": [2, 10, 30]},  # stubs 40, 72, 152
        "train": {"steps": 8, "eval_every": 4, "learning_rates": [1e-2], "metric": "test_mse"},
    }
    assert "in 3 buckets" in dry_run(parse(raw, name="t"))
    merged = dry_run(parse({**raw, "engine": {"pad_to_max": ["stubs"]}}, name="t"))
    assert "in 1 buckets" in merged and "stubs=256" in merged  # 152 up the ×2 ladder
    problem = "engine.pad_to_max: 'stub' is not an integer field of gcn_sampling (did you mean 'stubs'?)"
    assert problems_of({**raw, "engine": {"pad_to_max": ["stub"]}})[1] == [problem]


def test_a_float64_sweep_is_sized_in_float64_by_the_dry_run():
    import re

    import jax

    from jaxmem.cli.views import dry_run

    raw = tomllib.loads((REPO / "sweeps/deora24/fig2_dm1_gd.toml").read_text())  # float64, default float type
    assert raw["train"]["precision"] == "float64"
    state = lambda text: float(re.search(r", ([\d.]+) MiB per device", text).group(1))  # noqa: E731
    double = state(dry_run(parse(raw, name="t", preset="quick"), verbose=True))
    single = state(dry_run(parse(with_(raw, "train.precision", "float32"), name="t", preset="quick"), verbose=True))
    assert double == pytest.approx(2 * single, rel=0.1) and not jax.config.jax_enable_x64  # floats dominate


# -- the report tables: typed, every key and expression checked before anything runs --------------------


def crosings() -> dict:
    """The escape-times sweep with `crossings` misspelled in its [report.trajectory] table."""
    raw = read_toml(ESCAPE)
    raw["report"]["trajectory"]["crosings"] = raw["report"]["trajectory"].pop("crossings")
    return raw


def test_report_tables_are_typed():
    spec = load(FIG1)
    assert isinstance(spec.report, ReportSpec) and spec.report.heatmap is None
    assert spec.report.guide == Guide("0.7*N*log(N)", "md = 0.35·N ln N (authors' guide)")
    assert spec.report.group_by == ("m_over_d",) and spec.report.search_goal == "largest"
    trajectory = load(ESCAPE).report.trajectory
    assert [c.label for c in trajectory.crossings] == ["relation learned", "subject learned"]
    assert set(trajectory.escape.predicted) == {"relation learned", "subject learned"}


def test_misspelled_report_keys_name_the_closest_valid_one():
    _, problems = problems_of(crosings())
    assert problems[0] == CROSINGS
    _, problems = problems_of(with_(base(), "report.expect_slop", [0.9, 1.1]))
    assert problems == [SLOP]


@pytest.mark.parametrize("raw, message", [(crosings(), CROSINGS), (with_(base(), "report.expect_slop", [1, 2]), SLOP)])
def test_misspelled_report_keys_exit_2_before_anything_runs(tmp_path, capsys, raw, message):
    path = tmp_path / "typo.toml"
    path.write_text(json_toml(raw))
    out_dir = tmp_path / "out"
    for argv in (["run", str(path), "--dry-run"], ["run", str(path), "--out", str(out_dir)]):
        code = main(argv)
        out, err = capsys.readouterr()
        assert code == 2 and err.startswith(f"jaxmem: error: invalid sweep spec {path}") and message in err
        assert "Traceback" not in out + err
    assert not out_dir.exists()


def test_misspelled_report_key_in_a_real_run_exits_2_without_a_traceback(tmp_path):
    path = tmp_path / "typo.toml"
    path.write_text(json_toml(crosings()))
    process = jaxmem_cli("run", path, "--out", tmp_path / "out")
    output, _ = process.communicate(timeout=300)
    assert process.returncode == 2 and CROSINGS in output and "Traceback" not in output, output


def json_toml(raw: dict) -> str:
    """A spec as TOML: every top-level entry an inline value (JSON strings and arrays are TOML)."""

    def value(v):
        if isinstance(v, dict):
            return "{" + ", ".join(f"{json.dumps(k)} = {value(x)}" for k, x in v.items()) + "}"
        if isinstance(v, list):
            return "[" + ", ".join(value(x) for x in v) + "]"
        return json.dumps(v)

    return "".join(f"{json.dumps(k)} = {value(v)}\n" for k, v in raw.items())


@pytest.mark.parametrize(
    "path, value, message",
    [
        ("report", [], "report: must be a table, got []"),
        ("report.fit", "N*log(NN)", "report.fit: 'NN' is not the searched variable (did you mean 'N'?)"),
        ("report.fit", "N*", "report.fit: cannot parse expression 'N*'"),
        ("report.guide", {"expr": "2*n"}, "report.guide.expr: 'n' is not the searched variable (did you mean 'N'?)"),
        ("report.guide", {"expr": "N", "lable": "x"}, "report.guide.lable: unknown key (did you mean 'label'?)"),
        ("report.group_by", ["m_over_dd"], "report.group_by: 'm_over_dd' is not a config field (did you mean"),
        ("report.x", "parms", "report.x: 'parms' is not a config field, params or bits (did you mean 'params'?)"),
        ("report.expect_slope", [1.1, 0.9], "report.expect_slope: lo must not exceed hi, got [1.1, 0.9]"),
        ("report.expect_slope", [1], "report.expect_slope: must be [lo, hi], got [1]"),
        ("report.collapse", "yes", "report.collapse: must be true or false, got 'yes'"),
        ("report.title", 3, "report.title: must be a string, got 3"),
        ("report.heatmap", {"x": "d*mm", "y": "d"}, "report.heatmap.x: 'mm' is not a config field (did you mean 'm'?)"),
        ("report.heatmap", {"x": "d"}, "report.heatmap.y: missing"),
        ("report.heatmap", {"x": "d", "y": "m", "treshold": 1}, "report.heatmap.treshold: unknown key (did you mean"),
        ("report.heatmap", {"x": "d", "y": "m", "better": "most"}, "report.heatmap.better: must be one of ['max',"),
        (
            "report.heatmap",
            {"x": "d", "y": "m", "lines": [{"x": [1, 2], "y": "log(-x)"}]},
            "report.heatmap.lines[0].y: cannot evaluate 'log(-x)'",
        ),
        (
            "report.heatmap",
            {"x": "d", "y": "m", "lines": [{"x": [1, 2], "y": "2*d"}]},
            "report.heatmap.lines[0].y: 'd' is not the line's variable x",
        ),
        (
            "report.trajectory",
            {"crossings": [{"metric": "acc", "below": 0.5}]},
            "report.trajectory.crossings[0].metric: 'acc' is not a recorded metric; allowed: accuracy, loss",
        ),
        (
            "report.trajectory",
            {"references": [{"y": "log(dd)"}]},
            "report.trajectory.references[0].y: 'dd' is not a config field, lr or seed (did you mean 'd'?)",
        ),
        (
            "report.trajectory",
            {"group_by": "modle"},
            "report.trajectory.group_by: 'modle' is not a config field, lr or seed (did you mean 'model'?)",
        ),
        (
            "report.trajectory",
            {"rates": [{"metric": "loss", "predicted": "los * 2"}]},
            "report.trajectory.rates[0].predicted: 'los' is not a config field, lr, seed, step, time or a recorded "
            "metric (did you mean 'loss'?)",
        ),
        (
            "report.trajectory",
            {"plateau": {"metric": "loss", "near": 1, "tol": -1}},
            "report.trajectory.plateau[0].tol: must be a number >= 0, got -1",
        ),
        ("report.trajectory", {"stages": {"from": 0, "to": 1}}, "report.trajectory.stages: must be a list of tables"),
        (
            "report.trajectory",
            {"crossings": [{"metric": "loss", "below": 1}], "escape": {"x": "d", "predicted": {"loss ≤ 2": 1}}},
            "report.trajectory.escape.predicted.loss ≤ 2: unknown key (did you mean 'loss ≤ 1'?)",
        ),
    ],
    ids=lambda v: str(v)[:40] if isinstance(v, str) else None,
)
def test_bad_report_tables_name_the_field(path, value, message):
    _, problems = problems_of(with_(base(), path, value))
    assert message in "\n".join(problems), problems


def test_report_names_are_checked_against_the_run_they_describe():
    """Helper axes, the searched variable and, with gradient flow, the solver's step count are names too."""
    trajectory = {"group_by": ["m_over_d", "N"], "metrics": ["loss"], "references": [{"y": "log(m_over_d * N)"}]}
    spec = parse(with_(base(), "report.trajectory", trajectory), "t")
    assert spec.report.trajectory.group_by == ("m_over_d", "N")
    solver = with_(base(), "report.trajectory", {"metrics": ["solver_steps"]})
    assert "'solver_steps' is not a recorded metric" in problems_of(solver)[0]
    assert parse(with_(solver, "train.integrator", "gradient_flow"), "t").report.trajectory.metrics == ("solver_steps",)


def test_unknown_keys_in_presets_name_the_preset():
    raw = base(presets={"quick": {"trian": {"steps": 32}}, "paper": {"serch": {}, "seeds": 1}, "big": 3})
    _, problems = problems_of(raw)
    assert "presets.quick.trian: unknown section or key (did you mean 'train'?)" in problems
    assert "presets.paper.serch: unknown section or key (did you mean 'search'?)" in problems
    assert "presets.big: must be a table, got 3" in problems


# -- the success rule ------------------------------------------------------------------------------------


def grid_only(train: dict | None = None, **override):
    """base() without its search (N fixed), its [train] table updated by `train`."""
    raw = base(fixed={"model": "mlp", "N": 16}, **override)
    del raw["search"]
    raw["train"].update(train or {})
    return raw


def test_success_rule_without_a_success_table_keeps_the_legacy_meaning():
    assert parse(base(), "t").success == SuccessRule("accuracy", "at_least", 0.99, "best")  # search's default
    assert parse(with_(base(), "search.threshold", 0.9), "t").success == SuccessRule("accuracy", "at_least", 0.9)
    assert parse(grid_only({"early_stop": 1.0}), "t").success == SuccessRule("accuracy", "at_least", 1.0)
    assert parse(grid_only({"early_stop": False}), "t").success is None
    assert parse(grid_only({"metric": "loss"}), "t").success == SuccessRule("loss", "at_least", 0.99)


def test_success_table():
    table = {"metric": "loss", "at_most": 0.05, "counts": "final"}
    assert parse(base(success=table), "t").success == SuccessRule("loss", "at_most", 0.05, "final")
    assert parse(grid_only(success={"at_least": 40}), "t").success == SuccessRule("accuracy", "at_least", 40.0)
    assert parse(base(success={"at_most": -2.5}), "t").success.threshold == -2.5  # any finite number


def test_success_and_legacy_threshold_together_is_an_error_naming_both():
    _, problems = problems_of(with_(base(success={"at_least": 0.9}), "search.threshold", 0.95))
    assert any("success" in p and "search.threshold" in p for p in problems), problems


def test_the_legacy_threshold_alone_stays_in_0_1():
    assert "search.threshold: must be in (0, 1], got 2.0" in problems_of(with_(base(), "search.threshold", 2.0))[0]


@pytest.mark.parametrize(
    "table, message",
    [
        ({"metric": "los", "at_most": 0.1}, "success.metric: 'los' is not a metric of assoc_memory (did you mean"),
        ({"metric": "loss"}, "success: needs exactly one of at_least, at_most, got neither"),
        ({"at_least": 0.9, "at_most": 0.1}, "success: needs exactly one of at_least, at_most, got ['at_least', 'at_mo"),
        ({"at_least": math.inf}, "success.at_least: must be a finite number, got inf"),
        ({"at_least": "high"}, "success.at_least: must be a finite number, got 'high'"),
        ({"at_least": 0.9, "counts": "last"}, "success.counts: must be one of ['best', 'final'], got 'last'"),
        ({"at_least": 0.9, "conuts": "best"}, "success.conuts: unknown key (did you mean 'counts'?)"),
        (5, "success: must be a table, got 5"),
    ],
)
def test_bad_success_tables_name_the_field(table, message):
    message_text, _ = problems_of(base(success=table))
    assert message in message_text, message_text


def test_derived_success_rule_leaves_the_fingerprint_as_it_was():
    """Derived defaults stay out of `resolved`: every existing spec keeps its fingerprint (pinned:
    these are the fingerprints before [success] existed)."""
    spec = parse(base(), "t")
    assert spec.success is not None and "success" not in spec.resolved
    assert load(REPO / "tests" / "specs" / "tiny_mlp.toml").fingerprint == "0bbb02b67a2d3107"
    assert load(REPO / "tests" / "specs" / "tiny_linear.toml").fingerprint == "da4d9e8fbca248a3"


def test_every_key_of_every_table_says_what_it_is():
    """docs/spec.md and the JSON Schema read each key's meaning and kind from the tables: none may lack them."""
    from jaxmem.spec.document import SweepTables, _tables, kinds
    from jaxmem.spec.tables import table_keys

    tables = dict(_tables("", SweepTables))
    assert {"train", "search", "engine", "success", "report", "report.trajectory.crossings[]"} <= set(tables)
    for path, cls in tables.items():
        described = kinds(cls)
        assert set(described) == set(table_keys(cls)), path
        for name, (kind, meaning) in described.items():
            assert meaning and kind != "value", f"{path}.{name}"
