"""Tests for jaxmem.spec: parsing, validation (every error names its field) and fingerprints."""

import copy
import itertools
import math
import tomllib
from pathlib import Path

import pytest

from jaxmem.spec.sweep import SearchSpec, SpecError, TrainSpec, axis_values, load, parse

REPO = Path(__file__).resolve().parents[1]
FIG1 = REPO / "sweeps" / "nichani24" / "fig1_mlp.toml"


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
    assert spec.report == raw["report"]
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
        pytest.param(with_(base(), "train.steps", "many"), ["train.steps: expected int, got 'many'"], id="steps-str"),
        pytest.param(with_(base(), "train.steps", 64.0), ["train.steps: expected int"], id="steps-float"),
        pytest.param(with_(base(), "train.learning_rates", ["fast"]), ["train.learning_rates: expected"], id="lr-str"),
        pytest.param(with_(base(), "train.learning_rates", []), ["train.learning_rates: expected"], id="lr-empty"),
        pytest.param(with_(base(), "train.early_stop", True), ["train.early_stop: expected"], id="early-stop-bool"),
        pytest.param(
            with_(base(), "engine.record_trajectory", 1), ["engine.record_trajectory: expected bool"], id="bool-as-int"
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
            ["search.mode: must be 'verified' or 'paper', got 'fast'"],
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
        "train.steps: expected int",
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
