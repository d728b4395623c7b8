"""sweeps/readme_numbers.py beside a device campaign's results: a gallery entry's claims with the CPU and the
device verdicts and their sizes, a targets row's device verdict, and "no device run" where there is none."""

import json
from pathlib import Path

import pytest
from test_numbers_regenerate import script

from jaxmem.report.headline import Headline, verdicts_of

SLOPE = {"section": "Fitted slope", "claim": "Expected slope in [0.85, 1.15]", "outcome": "INCONCLUSIVE"}
RANK = {"section": "Relations / y against x", "claim": "ρ ≥ 0.8", "measured": 0.95, "outcome": "PASS"}
META = {
    "quick": {"device": "cpu x1 (cpu)", "resolved_spec": json.dumps({"grid": {"d": [8, 11, 16, 22]}})},
    "gpu": {"device": "NVIDIA H200 x1 (gpu)", "resolved_spec": json.dumps({"grid": {"d": [8, 11, 16, 22, 32, 45]}})},
}


@pytest.fixture(scope="module")
def rn():
    return script()


def fake_headline(folder: Path, preset: str, seeds: tuple, runs: int, *entries: dict) -> Headline:
    """A headline of `runs` runs whose verdicts.json holds `entries`."""
    folder.mkdir(parents=True)
    (folder / "verdicts.json").write_text(json.dumps({"verdicts": list(entries)}))
    (folder / "runs.csv").write_text("run_id\n" + "".join(f"r{i}\n" for i in range(runs)))
    return Headline(folder, "fig1_linear", preset, "N", seeds, ("d",), {}, verdicts_of(folder), "")


@pytest.fixture
def headlines(rn, tmp_path, monkeypatch):
    monkeypatch.setattr(rn, "run_meta", lambda headline: META[headline.preset])
    cpu = fake_headline(tmp_path / "cpu", "quick", (0, 1, 2), 12, SLOPE, RANK)
    device = fake_headline(tmp_path / "gpu", "gpu", (0, 1, 2, 3, 4), 90, {**SLOPE, "outcome": "PASS", "measured": 1.02})
    return {("fig1_linear", "quick"): cpu, ("fig1_linear", "gpu"): device}


def gallery_block(rn, sweep: str = "fig1_linear"):
    return rn.Block(rn.GALLERY, sweep, "quick", "gallery", (), ())


def test_a_gallery_entry_shows_each_claim_on_the_cpu_and_on_the_named_device_with_sizes(rn, headlines):
    text = rn.device_comparison(gallery_block(rn), headlines)
    assert "at the CPU size (`quick`, seeds 0–2; d 8–22 (4 values); 12 runs on cpu x1 (cpu))" in text
    assert "on the device (`gpu`, seeds 0–4; d 8–45 (6 values); 90 runs on NVIDIA H200 x1 (gpu))" in text
    assert "| Fitted slope: Expected slope in [0.85, 1.15] | **INCONCLUSIVE** | **PASS** (1.02) |" in text
    assert "| Relations / y against x: ρ ≥ 0.8 | **PASS** (0.95) | not checked |" in text


def test_a_gallery_entry_without_a_device_run_says_so_and_why(rn, headlines):
    del headlines[("fig1_linear", "gpu")]
    assert rn.device_comparison(gallery_block(rn), headlines) == (
        "Device: no device run yet (`PYTHONPATH=$PWD python benchmarks/device_campaign.py --out $OUT` runs the "
        "`gpu` presets)."
    )
    headlines[("escape_times", "quick")] = headlines[("fig1_linear", "quick")]  # decided on the CPU: no gpu preset
    text = rn.device_comparison(gallery_block(rn, "escape_times"), headlines)
    assert text == "Device: no device run (no `gpu` preset: benchmarks/GPU_PRESETS.md says why)."


def test_a_targets_row_shows_the_device_verdict_with_its_size_or_no_device_run(rn, headlines):
    store = rn.Block(rn.GALLERY, "fig1_linear", "quick", "verdicts", ("Fitted",), ())
    cell = rn.device_cell(store, headlines, "T1")
    assert cell.startswith("`gpu`, seeds 0–4; d 8–45 (6 values); 90 runs on NVIDIA H200 x1 (gpu):<br>")
    assert "Expected slope in [0.85, 1.15]: measured 1.02: **PASS**" in cell
    del headlines[("fig1_linear", "gpu")]
    assert rn.device_cell(store, headlines, "T1").startswith("no device run yet")


def test_device_runs_are_read_for_gallery_and_targets_blocks_only(rn):
    gallery = gallery_block(rn)
    assert [(s.sweep, s.preset) for s in rn.device_stores(gallery)] == [("fig1_linear", "gpu")]
    assert rn.device_stores(rn.Block(rn.GALLERY, "fig1_linear", "quick", "capacity", (), ())) == []
