"""The li_thesis sweeps: one per figure, every spec and preset loads and validates, and the n* sweeps
search the smallest n under the thesis's success rules."""

from pathlib import Path

import numpy as np
import pytest

from jaxmem.spec import sweep as specmod
from jaxmem.spec.expr import evaluate

SWEEPS = sorted((Path(__file__).parent.parent / "sweeps" / "li_thesis").glob("*.toml"))
BY_NAME = {p.stem: p for p in SWEEPS}


def test_every_figure_of_the_issue_has_a_sweep():
    ch2 = {"ch2_alpha", "ch2_sigma", "ch2_iterations", "ch2_cnn", "ch2_attention", "ch2_sparsify", "ch2_width"}
    ch4 = {"ch4_dim", "ch4_mean", "ch4_cov", "ch4_rate_mean", "ch4_rate_cov", "ch4_rate_k", "ch4_error_n"}
    assert ch2 | ch4 | {"ch4_minority_cov", "ch4_minority_mean", "ch4_fraction", "ch4_tensor"} <= set(BY_NAME)


@pytest.mark.parametrize("preset", ["quick", "paper", "gpu"])
@pytest.mark.parametrize("path", SWEEPS, ids=lambda p: p.stem)
def test_spec_loads_and_validates(path, preset):
    if preset == "gpu" and "[presets.gpu]" not in path.read_text():
        pytest.skip(f"{path.stem} has no gpu preset (sweeps/li_thesis/GPU_PRESETS.md says why)")
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


@pytest.mark.parametrize(
    ("name", "fits"),
    [
        ("ch2_alpha", {("alpha**-2", "n")}),
        ("ch2_cnn", {("alpha**-2", "n"), ("alpha**-4", "n")}),
        ("ch2_sigma", {("sigma", "1/sqrt(n)")}),
        ("ch4_dim", {("d", "n"), ("d*log(d)**2", "n")}),
    ],
)
def test_n_star_fits_are_lines_with_intercept_in_the_theory_variable(name, fits):
    """The report's fit_linear holds the claimed variable, and every expression evaluates on a point."""
    spec = specmod.load(BY_NAME[name], preset="quick")
    assert {(f.x, f.y) for f in spec.report.fit_linear} == fits
    names = {**spec.points[0], "n": 100}
    for fit in spec.report.fit_linear:
        assert np.isfinite(evaluate(fit.x, names)) and evaluate(fit.y, names) > 0
    assert spec.report.success_map is not None


@pytest.mark.parametrize(
    "name", ["ch4_dim", "ch4_mean", "ch4_cov", "ch4_error_n", "ch4_minority_cov", "ch4_minority_mean", "ch4_fraction"]
)
def test_ch4_convergence_sweeps_take_the_curvature_step(name):
    """V_W and the final risks need GD at Ŵ_n: the 1/L̂ step (README), not the spec's η_0 (c = 1)."""
    for preset in ("quick", "paper"):
        assert {p["step_rule"] for p in specmod.load(BY_NAME[name], preset=preset).points} == {"curvature"}
