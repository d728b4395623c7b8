"""The li_thesis sweeps: one per figure, every spec and preset loads and validates, and the n* sweeps
search the smallest n under the thesis's success rules."""

from pathlib import Path

import pytest

from jaxmem.spec import sweep as specmod

SWEEPS = sorted((Path(__file__).parent.parent / "sweeps" / "li_thesis").glob("*.toml"))
BY_NAME = {p.stem: p for p in SWEEPS}


def test_every_figure_of_the_issue_has_a_sweep():
    ch2 = {"ch2_alpha", "ch2_sigma", "ch2_iterations", "ch2_cnn", "ch2_attention", "ch2_sparsify", "ch2_width"}
    ch4 = {"ch4_dim", "ch4_mean", "ch4_cov", "ch4_rate_mean", "ch4_rate_cov", "ch4_rate_k", "ch4_error_n"}
    assert ch2 | ch4 | {"ch4_minority_cov", "ch4_minority_mean", "ch4_fraction"} <= set(BY_NAME)


@pytest.mark.parametrize("preset", ["quick", "paper"])
@pytest.mark.parametrize("path", SWEEPS, ids=lambda p: p.stem)
def test_spec_loads_and_validates(path, preset):
    spec = specmod.load(path, preset=preset)
    assert spec.points and not spec.skipped


@pytest.mark.parametrize(
    ("name", "metric", "threshold"),
    [("ch2_alpha", "test_loss", 1e-3), ("ch2_cnn", "test_loss", 1e-3), ("ch2_sigma", "test_loss", 1e-3)]
    + [(name, "v_w", 1e-3) for name in ("ch4_dim", "ch4_mean", "ch4_cov")],
)
def test_sample_complexity_sweeps_search_the_smallest_n(name, metric, threshold):
    for preset in ("quick", "paper"):
        spec = specmod.load(BY_NAME[name], preset=preset)
        assert spec.search.variable == "n" and spec.search.goal == "smallest"
        assert (spec.success.metric, spec.success.direction, spec.success.threshold) == (metric, "at_most", threshold)


def test_the_paper_presets_use_the_thesis_sizes():
    assert {p["m"] for p in specmod.load(BY_NAME["ch2_alpha"], preset="paper").points} == {1000}
    assert len(specmod.load(BY_NAME["ch2_alpha"], preset="paper").seeds) == 20
    dims = {p["d"] for p in specmod.load(BY_NAME["ch4_dim"], preset="paper").points}
    assert dims == {5, 10, 15, 20, 30, 40}
    assert {p["replicas"] for p in specmod.load(BY_NAME["ch4_dim"], preset="paper").points} == {20}
