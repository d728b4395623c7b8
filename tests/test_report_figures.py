"""The report's figures at gallery size (issue 37 item 8), on tiny synthetic frames: a caption with the
figure's claims, verdicts, preset and seeds; the claim's variables on the axes and its law drawn; censored
searches marked; numbers written to their precision; every text inside the figure and clear of the others."""

from __future__ import annotations

import math

import matplotlib.image as mpimg
import numpy as np
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.collections import PathCollection

from jaxmem.report.capacity.fit import summarise
from jaxmem.report.capacity.plot import plot_capacity
from jaxmem.report.captions import caption, captioned, captioning, seeds_text
from jaxmem.report.grid.plot import colour_range, plot_heatmap
from jaxmem.report.grid.report import profile_laws
from jaxmem.report.final_eval_plot import plot_final_eval
from jaxmem.report.laws import figure_laws
from jaxmem.report.relations import summarise as summarise_relation
from jaxmem.report.relations_plot import plot_relations
from jaxmem.report.trajectory.plot import plot_trajectories
from jaxmem.report.verdicts import Claim, Verdict, inconclusive
from jaxmem.spec.report_relations import Relation
from jaxmem.spec.sweep import stored_report_spec

INF = float("inf")


def search(point: str, seed: int, config: dict, capacity: float, censored: str = "", variable: str = "n") -> dict:
    """A searches-table row; a censored search has no capacity, its last probe in first_failure."""
    answered = not censored
    return {
        "point": point,
        "seed": seed,
        **config,
        "variable": variable,
        "capacity": capacity if answered else math.nan,
        "first_failure": capacity * 1.5 if answered else capacity,
        "censored": censored,
        "rounds": 3,
        "probes": 3,
        "non_monotone": False,
        "params": 100.0,
        "bits": 10.0,
        "status": "done",
    }


def u_shaped() -> pd.DataFrame:
    """ch4_cov-like: n* against σ, low in the middle, two searches at each end censored above 8000."""
    values = {0.1: [8000, 8000, 4000, 8000], 1.0: [2000, 4000, 4000, 4000], 10.0: [8000, 8000, 8000, 4000]}
    rows = []
    for sigma, ns in values.items():
        for seed, n in enumerate(ns):
            rows.append(search(f"s{sigma}", seed, {"sigma1": sigma}, n, "above" if sigma != 1.0 and seed < 2 else ""))
    return pd.DataFrame(rows)


def inverse_square() -> pd.DataFrame:
    """ch2_alpha-like: N* = −150 + 56·α⁻² with seed noise, three α."""
    rng = np.random.default_rng(0)
    rows = []
    for alpha in (0.42, 0.46, 0.5):
        for seed in range(5):
            n = -150 + 56 / alpha**2 * (1 + 0.05 * rng.standard_normal())
            rows.append(search(f"a{alpha}", seed, {"alpha": alpha}, float(n)))
    return pd.DataFrame(rows)


def capacity_figure(tmp_path, table: dict, searches: pd.DataFrame, claims=(), preset="quick"):
    """capacity.png's figure as the report draws it (with the laws of the table's relations), captioned
    with `claims`, and the spec."""
    spec = stored_report_spec({"report": table})
    summary = summarise(spec, searches)
    plotted = {"capacity", summary["variable"]} if spec.fit in (None, summary["variable"]) else {spec.fit}
    laws = figure_laws(spec.relations, pd.DataFrame(), searches, spec.x, plotted)
    seeds = sorted(searches["seed"].unique())
    with captioning(list(claims), preset, seeds) as pending:
        plot_capacity(tmp_path / "capacity.png", spec, searches, summary, laws)
    assert (tmp_path / "capacity.png").exists()
    return pending[0].figure


def texts(fig) -> list[str]:
    return [t.get_text() for t in fig.findobj(lambda a: hasattr(a, "get_text") and a.get_visible())]


def test_a_caption_holds_the_claim_its_value_and_interval_the_verdict_the_preset_and_the_seeds():
    claims = [
        Claim("Relations / R2.2: N* = a + b·α*^-2", "b in [0, inf]", Verdict("PASS"), 47.13, (15.8, 97.6), (0, INF)),
        Claim("Relations / R2.2: N* = a + b·α*^-2", "R² ≥ 0.9", inconclusive("not distinguishable"), 0.93),
        Claim("Linear fits", "N*: b in [0, inf]", inconclusive("slope CI spans 0"), 70.0, (-28, 168), diagnostic=True),
        Claim("Heatmap / Floor", "the floor", Verdict("PASS")),
    ]
    text = caption(claims, ("Relations", "Linear fits"), "quick", [0, 1, 2, 3, 4])
    assert text == (
        "Relations / R2.2: N* = a + b·α*^-2: b in [0, inf]: 47 (95 % CI [16, 98]) → PASS; "
        "R² ≥ 0.9: 0.930 → INCONCLUSIVE (not distinguishable). quick preset, seeds 0–4."
    )  # the diagnostic and the other figure's claim are left out
    assert caption(claims, (), "paper", [3]) == "No automatic verdict on this figure. paper preset, seed 3."
    assert seeds_text([0, 2, 3]) == "seeds 0, 2, 3"


def test_a_saved_figure_carries_its_caption_below_everything_it_draws(tmp_path):
    claim = Claim("Fitted slope", "Expected slope in [0.8, 1.2]", Verdict("PASS"), 1.01, (0.9, 1.1), (0.8, 1.2))
    fig = capacity_figure(tmp_path, {"x": "sigma1", "expect_slope": [0.8, 1.2]}, u_shaped(), [claim], "testable")
    text = caption([claim], ("Fitted slope",), "testable", [0, 1, 2, 3])
    assert "Expected slope in [0.8, 1.2]: 1.01 (95 % CI [0.90, 1.10]) → PASS" in text
    assert text.endswith("testable preset, seeds 0–3.")
    out = captioned(fig, text, {"dpi": 100})
    assert [t.get_text().replace("\n", " ") for t in out.texts] == [text]
    saved = mpimg.imread(tmp_path / "capacity.png")
    width, height = fig.get_size_inches() * 100
    assert saved.shape[1] == round(width * 1.2) and saved.shape[0] > round(height * 1.2)  # dpi 120, a caption below


def test_censored_searches_are_drawn_as_triangles_at_their_last_probe(tmp_path):
    fig = capacity_figure(tmp_path, {"x": "sigma1"}, u_shaped())
    ax = fig.axes[0]
    hollow = [
        c
        for c in ax.collections
        if isinstance(c, PathCollection) and len(c.get_facecolors()) == 0 and len(c.get_offsets())
    ]
    assert hollow and {tuple(p) for c in hollow for p in c.get_offsets()} == {(0.1, 8000.0), (10.0, 8000.0)}
    assert "search censored above its range" in texts(ax.get_legend())


def test_a_flat_power_fit_is_drawn_and_its_slope_written_to_its_precision(tmp_path):
    """ch4_cov: a slope of 5e-16 (an even U on a log axis) was neither drawn nor written readably."""
    fig = capacity_figure(tmp_path, {"x": "sigma1"}, u_shaped())
    ax = fig.axes[0]
    fits = [line for line in ax.get_lines() if line.get_label().startswith("power fit")]
    assert len(fits) == 1 and np.isfinite(fits[0].get_ydata()).all() and len(fits[0].get_ydata()) > 1
    legend = " ".join(texts(ax.get_legend()))
    assert "e-1" not in legend and "power fit: slope 0.0 (95 % CI [" in legend


def test_the_claimed_law_is_drawn_in_place_of_a_power_fit(tmp_path):
    """ch2_alpha: the claim is N* = a + b·α*⁻², so the figure draws that law, fitted as the relation is."""
    relation = {
        "label": "R2.2: N* = a + b·α*^-2",
        "x": "alpha**-2",
        "y": "capacity",
        "fit": "linear",
        "expect_slope": [0, INF],
    }
    fig = capacity_figure(tmp_path, {"x": "alpha", "fit": "n", "relation": [relation]}, inverse_square())
    labels = [line.get_label() for line in fig.axes[0].get_lines()]
    law = [line for line in fig.axes[0].get_lines() if line.get_label().startswith("R2.2")]
    assert not any(label.startswith("power fit") for label in labels)
    assert len(law) == 1
    x, y = law[0].get_xdata(), law[0].get_ydata()
    np.testing.assert_allclose(y, -150 + 56 / x**2, rtol=0.1)  # the law, curved on these axes


def test_the_y_axis_is_the_fitted_quantity(tmp_path):
    """fig4_facts_vs_params: the fit is of facts = size², so the y axis is size², not size."""
    rows = [search(f"p{p}", 0, {"p": p}, math.sqrt(0.15 * p), variable="size") for p in (1000.0, 2000.0, 4000.0)]
    searches = pd.DataFrame(rows).assign(params=lambda f: f["p"])
    fig = capacity_figure(tmp_path, {"fit": "size*size", "expect_slope": [0.8, 1.2]}, searches)
    ax = fig.axes[0]
    assert ax.get_ylabel().startswith("size·size")
    dots = [c for c in ax.collections if isinstance(c, PathCollection) and len(c.get_facecolors())]
    np.testing.assert_allclose(sorted(dots[0].get_offsets()[:, 1]), [150.0, 300.0, 600.0])
    fit = next(line for line in ax.get_lines() if line.get_label().startswith("power fit"))
    assert "slope 1.00" in fit.get_label()


def error_runs() -> pd.DataFrame:
    """ch4_error_n-like: the error ∝ n^-0.5 at one d, three seeds."""
    rows = [
        {"seed": s, "n": n, "d": 5, "final_error_w": 160 / math.sqrt(n) * (1 + 0.02 * s)}
        for n in (1000, 2000, 4000, 8000)
        for s in range(3)
    ]
    return pd.DataFrame(rows)


def heatmap_figure(tmp_path, heatmap: dict, cells: pd.DataFrame, runs: pd.DataFrame, relations=()):
    """heatmap.png's figure as the report draws it (with the claimed laws along a one-row grid)."""
    report_spec = stored_report_spec({"report": {"heatmap": heatmap, "relation": list(relations)}})
    spec = report_spec.heatmap
    laws, about = profile_laws(report_spec, spec, cells, runs)
    with captioning([], "quick", [0, 1, 2]) as pending:
        plot_heatmap(tmp_path / "heatmap.png", spec, cells, [], "title", spec.metric, None, laws, about)
    return pending[0].figure


def test_a_heatmap_of_one_row_is_a_line_on_log_axes_with_the_claimed_law(tmp_path):
    """ch4_error_n: one d, so the heatmap was one coloured row, with no log axes and no law."""
    runs = error_runs()
    cells = runs.groupby("n", as_index=False)["final_error_w"].mean().assign(x=lambda f: f["n"], y=5)
    law = {"label": "slope against n", "x": "n", "y": "final_error_w", "fit": "power", "expect_slope": [-0.65, -0.4]}
    heatmap = {"x": "n", "y": "d", "metric": "final_error_w", "better": "min"}
    fig = heatmap_figure(tmp_path, heatmap, cells, runs, [law])
    ax = fig.axes[0]
    assert not ax.collections  # no colour mesh, no colour bar
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    drawn = [line for line in ax.get_lines() if line.get_label().startswith("slope against n")]
    assert len(drawn) == 1 and "b = -0.500 (95 % CI [-0.500, -0.500])" in drawn[0].get_label()
    np.testing.assert_allclose(drawn[0].get_ydata(), 161.6 / np.sqrt(drawn[0].get_xdata()), rtol=0.01)


def test_a_narrow_colour_range_starts_at_zero_says_so_and_shows_the_threshold(tmp_path):
    """e1_phase1_bias: values 0.462–0.497 were stretched over the whole colour map; its 0.46 not drawn."""
    values = {(16, 4): 0.497, (32, 4): 0.462, (64, 4): 0.475, (16, 8): 0.468, (32, 8): 0.467, (64, 8): 0.463}
    cells = pd.DataFrame([{"x": x, "y": y, "final_c_bias": v} for (x, y), v in values.items()])
    heatmap = {"x": "d", "y": "k", "metric": "final_c_bias", "better": "min", "threshold": 0.46}
    fig = heatmap_figure(tmp_path, heatmap, cells, pd.DataFrame())
    mesh = fig.axes[0].collections[0]
    assert mesh.get_clim() == (0.0, 0.497)
    bar = fig.axes[1]
    assert "values 0.462–0.497, scale from 0" in bar.get_ylabel()
    assert [line.get_ydata()[0] for line in bar.get_lines()] == [0.46]
    assert colour_range(np.array([0.2, 0.9]), stored_report_spec({"report": {"heatmap": heatmap}}).heatmap)[:2] == (
        0.2,
        0.9,
    )  # a wide range keeps the data's limits


def overlapping(fig) -> list[str]:
    """Titles, axis labels, legend entries and figure texts (suptitle, caption) that overlap another, and
    axis labels longer than their axis."""
    renderer = FigureCanvasAgg(fig).get_renderer()  # a closed figure has no canvas of its own
    fig.draw_without_rendering()  # its layout engine places the texts
    texts = [t for t in fig.texts if t.get_text().strip()]
    problems = []
    for ax in (a for a in fig.axes if a.get_visible()):
        labels = [ax.title, ax.xaxis.label, ax.yaxis.label]
        texts += [t for t in labels if t.get_text().strip()]
        texts += ax.get_legend().get_texts() if ax.get_legend() else []
        frame = ax.get_window_extent(renderer)
        x_label, y_label = (label.get_window_extent(renderer) for label in (ax.xaxis.label, ax.yaxis.label))
        problems += [f"{ax.xaxis.label.get_text()!r} longer than its axis"] if x_label.width > frame.width else []
        problems += [f"{ax.yaxis.label.get_text()!r} longer than its axis"] if y_label.height > frame.height else []
    for legend in fig.legends:
        texts += legend.get_texts()
    boxes = [(t.get_text()[:30], t.get_window_extent(renderer)) for t in texts]
    for i, (a, box_a) in enumerate(boxes):
        problems += [f"{a!r} over {b!r}" for b, box_b in boxes[i + 1 :] if box_a.overlaps(box_b)]
    return problems


def test_a_long_y_label_is_wrapped_along_its_axis(tmp_path):
    """thm6_regime: seven metrics' names as one y label ran past the top and shrank the plot."""
    metrics = ["loss", "relation_loss", "subject_loss", "hallucination", "invariant_drift", "kq_subject_max"]
    time = np.geomspace(1, 1000, 20)
    frame = pd.DataFrame({"panel": "all", "series": "all", "run_id": "r0", "time": time})
    frame = frame.assign(**{m: np.exp(-time / (i + 1) / 100) + 1e-3 for i, m in enumerate(metrics)})
    spec = stored_report_spec({"report": {"trajectory": {"metrics": metrics, "x": "time", "x_scale": "log"}}})
    labels = {"title": "Thm 6 regime", "x_label": "time (step × lr)", "y_label": ", ".join(metrics)}
    with captioning([], "quick", [0]) as pending:
        plot_trajectories(
            tmp_path / "trajectory.png", frame, spec.trajectory, metrics, ["all"], {}, pd.DataFrame(), labels
        )
    assert overlapping(pending[0].figure) == []


def test_a_final_eval_figure_draws_only_the_metrics_that_change_along_x(tmp_path):
    """ch7_lts: 16 panels, 7 of them flat lines (the training loss, parameter norms), titles over labels."""
    rows = []
    for run, alpha in enumerate((0.4, 0.6, 1.0)):
        for l_ts in (1, 2, 4, 8, 16, 32):
            changing = {f"error_{i}": alpha / (l_ts + i) for i in range(6)}
            flat = {f"norm_{i}": alpha + i for i in range(9)}
            rows.append({"run_id": f"r{run}", "alpha_test": alpha, "l_ts": l_ts, **changing, **flat})
    frame = pd.DataFrame(rows).assign(error_copy=lambda f: f["error_0"])
    metrics = [c for c in frame.columns if c.startswith(("error", "norm"))]
    with captioning([], "quick", [0]) as pending:
        plot_final_eval(tmp_path / "final_eval.png", frame, "l_ts", metrics, ["alpha_test"])
    fig = pending[0].figure
    titles = [ax.get_title() for ax in fig.axes if ax.get_visible() and ax.axison]
    assert titles == ["error_0 = error_copy", "error_1", "error_2", "error_3", "error_4", "error_5"]
    assert "not drawn: norm_0, norm_1" in fig._suptitle.get_text().replace("\n", " ")
    assert overlapping(fig) == []


def test_relations_draw_a_fitted_line_only_where_the_relation_claims_a_law(tmp_path):
    """ch2_alpha's 'N* non-increasing in α*' is a claim about order: no line fitted to it is drawn."""
    rows = pd.DataFrame({"group": "all", "x": [0.42, 0.46, 0.5] * 3, "y": [150, 80, 45, 140, 90, 50, 160, 70, 40]})
    rows = rows.assign(side="")
    monotone = Relation(x="alpha", y="capacity", label="non-increasing", monotone="non-increasing")
    law = Relation(x="alpha", y="capacity", label="a line", expect_slope=(-INF, 0.0))
    results = [(r, *summarise_relation(r, rows)) for r in (monotone, law)]
    with captioning([], "quick", [0]) as pending:
        plot_relations(tmp_path / "relations.png", results)
    dashed = [[line for line in ax.get_lines() if line.get_linestyle() == "--"] for ax in pending[0].figure.axes[:2]]
    assert [len(lines) for lines in dashed] == [0, 1]
