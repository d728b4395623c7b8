"""The READMEs' generated numbers (sweeps/readme_numbers.py): blocks rendered from a report's headline
(jaxmem.report.headline), rewritten in place, checked; and a quick preset rerun whose numbers must equal
the README's."""

import dataclasses
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from jaxmem.report.headline import Headline, sections_of, verdicts_of

ROOT = Path(__file__).resolve().parent.parent
REPORT = """# A report

partial: 1 of 2 grid points with results, 3 of 4 searches not finished; sweep interrupted at t.

## Fitted slope (partial: 1 of 4 searches)

Least squares of ln(N) on ln(d).

- Slope: **0.9** (95 % CI [0.8, 1.0])
- Expected slope in [0.85, 1.15]: **INCONCLUSIVE** (slope CI [0.8, 1] crosses 0.85) (on a partial sweep)

## Relations

### y against x

| check | verdict |
|---|---|
| ρ | **PASS** |

- ρ ≥ 0.8: **PASS**; medians non-increasing in x: **FAIL** (a step up at x = 3)
"""


def script():
    spec = importlib.util.spec_from_file_location("readme_numbers", ROOT / "sweeps" / "readme_numbers.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["readme_numbers"] = module
    spec.loader.exec_module(module)
    return module


SLOPE = {
    "section": "Fitted slope",
    "claim": "Expected slope in [0.85, 1.15]",
    "measured": 0.9,
    "interval": [0.8, 1.0],
    "outcome": "INCONCLUSIVE",
    "reason": "slope CI [0.8, 1] crosses 0.85",
}


def verdicts_in(folder: Path, *entries: dict) -> pd.DataFrame:
    """verdicts.json holding `entries` written into `folder`, read back as a headline's verdicts."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "verdicts.json").write_text(json.dumps({"verdicts": list(entries)}))
    return verdicts_of(folder)


def test_every_verdict_is_read_from_verdicts_json_with_its_section_diagnostics_left_out(tmp_path):
    rank = {"section": "Relations / y against x", "claim": "ρ ≥ 0.8", "measured": 0.95, "outcome": "PASS"}
    diagnostic = {**rank, "section": "Linear fits", "outcome": "INCONCLUSIVE", "diagnostic": True}
    floor = {"section": "Heatmap / Floor", "claim": "cells below the floor fail", "outcome": "not testable here"}
    found = verdicts_in(tmp_path, SLOPE, rank, diagnostic, {**floor, "reason": "one x"})
    assert found.to_dict("records") == [
        {
            "section": "Fitted slope",
            "check": "Expected slope in [0.85, 1.15]: measured 0.9 (95 % CI [0.8, 1]): **INCONCLUSIVE** "
            "(slope CI [0.8, 1] crosses 0.85)",
            "outcomes": "INCONCLUSIVE",
            "claim": "Expected slope in [0.85, 1.15]",
            "measured": 0.9,
        },
        {
            "section": "Relations / y against x",
            "check": "ρ ≥ 0.8: measured 0.95: **PASS**",
            "outcomes": "PASS",
            "claim": "ρ ≥ 0.8",
            "measured": 0.95,
        },
        {
            "section": "Heatmap / Floor",
            "check": "cells below the floor fail: **not testable here** (one x)",
            "outcomes": "not testable here",
            "claim": "cells below the floor fail",
            "measured": None,
        },
    ]
    assert verdicts_of(tmp_path / "none").empty  # a report without verdicts.json states none
    stored = Headline(tmp_path, "e1_phase1_bias", "quick", "", (0,), ("d",), {}, found, "")
    assert script().claim_outcomes(stored) == {  # the device comparison's cells, from the same frame
        ("Fitted slope", "Expected slope in [0.85, 1.15]"): "**INCONCLUSIVE** (0.9)",
        ("Relations / y against x", "ρ ≥ 0.8"): "**PASS** (0.95)",
        ("Heatmap / Floor", "cells below the floor fail"): "**not testable here**",
    }


def test_blocks_are_rendered_from_their_store_or_say_how_to_make_it(tmp_path):
    numbers = script()
    readme = tmp_path / "README.md"
    readme.write_text(
        "Prose 1.\n\n<!-- numbers: e1_phase1_bias quick verdicts -->\nstale 0.5\n<!-- /numbers -->\n\n"
        '<!-- numbers: e2_sample_complexity quick section "Fitted slope" -->\n<!-- /numbers -->\nProse 2.\n'
    )
    sections = sections_of(REPORT)
    verdicts = verdicts_in(tmp_path, SLOPE)
    stored = Headline(tmp_path, "e1_phase1_bias", "quick", "", (0, 1, 2), ("d",), sections, verdicts, "")
    headlines = {("e1_phase1_bias", "quick"): stored, ("e2_sample_complexity", "quick"): None}
    text = numbers.rewritten(readme, headlines, lambda block: True)
    command = "`python sweeps/readme_numbers.py --run --sweeps e1_phase1_bias --presets quick`"
    assert "stale" not in text and text.startswith("Prose 1.") and text.endswith("<!-- /numbers -->\nProse 2.\n")
    assert f"*`quick` preset, seeds 0–2; regenerate: {command}*" in text
    assert "| Fitted slope | Expected slope in [0.85, 1.15]: measured 0.9 (95 % CI [0.8, 1]): **INCONCLUSIVE**" in text
    assert "*Not run here: the `quick` preset of `e2_sample_complexity`" in text
    readme.write_text(text)
    assert numbers.rewritten(readme, headlines, lambda block: True) == text  # rendering is a fixed point
    e1_gone = {**headlines, ("e1_phase1_bias", "quick"): None}
    assert numbers.rewritten(readme, e1_gone, lambda b: b.kind != "verdicts") == text  # blocks not chosen stay


def test_a_quoted_section_keeps_a_repeated_measurement_only_when_asked(tmp_path):
    """Two runs crossing at the same step: the default drops the column as constant, all_columns=true keeps it."""
    numbers = script()
    rows = ["| runs of | relation learned [step] | converged [step] |", "|---|---|---|", "| a | 1691 | 4985 |"]
    body = "\n".join([*rows, "| b | 1691 | 4984 |"])
    sections = {"Crossing times": body}
    stored = Headline(tmp_path, "s", "quick", "", (0,), (), sections, verdicts_of(tmp_path), "")
    quoted = {
        flag: numbers.section_kind(numbers.parse_block(tmp_path, f's quick section "Crossing times"{flag}'), stored)
        for flag in ("", " all_columns=true")
    }
    assert "1691" not in quoted[""] and "4985" in quoted[""]
    assert quoted[" all_columns=true"] == body


def test_a_targets_table_reads_each_row_from_its_own_store(tmp_path):
    """Rows name their stores: verdicts of the sections or claims naming the target (or of the given section
    prefixes); a missing
    store says so; a row's own judgement follows them, marked "judged by hand"."""
    numbers = script()
    readme = tmp_path / "README.md"
    rows = [
        "Rx | y falls | e1_phase1_bias quick | d = 8 | why x",
        "Rz | y fits | e1_phase1_bias quick 'Fitted slope' | d = 8 | why z | not met",
        "Ry | y rises | e2_sample_complexity quick | d = 4 | why y",
    ]
    readme.write_text("<!-- numbers: - - targets\n" + "\n".join(rows) + "\n-->\nstale\n<!-- /numbers -->\n")
    rx = {"section": "Relations / Rx: y against x", "claim": "ρ ≤ −0.8", "outcome": "FAIL", "reason": "ρ = 0.2"}
    trend = {"section": "Trajectories / Trends", "claim": "Rx: y (all runs): increasing", "outcome": "PASS"}
    other = {**trend, "claim": "Rx2: z (all runs): increasing"}  # Rx2 is another target than Rx
    verdicts = verdicts_in(tmp_path, rx, SLOPE, trend, other)
    stored = Headline(tmp_path, "e1_phase1_bias", "quick", "", (0, 1), (), {}, verdicts, "")
    headlines = {("e1_phase1_bias", "quick"): stored, ("e2_sample_complexity", "quick"): None}
    text = numbers.rewritten(readme, headlines, lambda block: True)
    assert (
        "| Rx | y falls | `e1_phase1_bias` `quick`, seeds 0, 1: d = 8 | Rx: y against x: ρ ≤ −0.8: **FAIL** (ρ = 0.2)"
        "<br>Trends: Rx: y (all runs): increasing: **PASS** | no device run yet | why x |" in text
    )
    assert (
        "| Rz | y fits | `e1_phase1_bias` `quick`, seeds 0, 1: d = 8 | Fitted slope: Expected slope in [0.85, 1.15]: "
        "measured 0.9" in text
    )
    assert "crosses 0.85)<br>judged by hand: not met | no device run yet | why z |" in text
    assert (
        "| Ry | y rises | `e2_sample_complexity` `quick` (not run here): d = 4 | not run here | no device run yet | "
        "why y |" in text
    )
    assert "stale" not in text
    block = numbers.blocks_of(readme)[0]
    assert [(s.sweep, s.preset) for s in numbers.stores_of(block)] == [("e1_phase1_bias", "quick")] * 2 + [
        ("e2_sample_complexity", "quick")
    ]
    unfinished = dataclasses.replace(stored, partial="partial: 3 of 8 runs finished")  # read while it runs
    text = numbers.rewritten(readme, {**headlines, ("e1_phase1_bias", "quick"): unfinished}, lambda block: True)
    assert "| Rx | y falls | `e1_phase1_bias` `quick`, seeds 0, 1 **partial: 3 of 8 runs finished**: d = 8 |" in text


def test_a_final_block_reads_the_test_time_table_with_its_untrained_columns(tmp_path):
    """table=final_eval: per test-time point the median (min–max) over seeds, the untrained model beside."""
    numbers = script()
    rows = ["run_id,seed,l_ts,cot_error,untrained_cot_error"]
    rows += [f"r{s},{s},{n},{e / n},{u}" for s, e, u in ((0, 0.1, 0.7), (1, 0.3, 0.9)) for n in (1, 10)]
    (tmp_path / "final_eval.csv").write_text("\n".join(rows) + "\n")
    stored = Headline(tmp_path, "s", "quick", "", (0, 1), ("l_ts",), {}, verdicts_of(tmp_path), "")
    marker = "s quick final metrics=cot_error,untrained_cot_error by=l_ts table=final_eval"
    assert numbers.final_kind(numbers.parse_block(tmp_path, marker), stored).splitlines()[2:] == [
        "| 1 | 2 | 0.2 (0.1–0.3) | 0.8 (0.7–0.9) |",
        "| 10 | 2 | 0.02 (0.01–0.03) | 0.8 (0.7–0.9) |",
    ]


def storeless_targets_row(tmp_path, row: str) -> str:
    """A README of one targets block with `row`, rendered; the block must name no store to read."""
    numbers = script()
    readme = tmp_path / "README.md"
    readme.write_text(f"<!-- numbers: - - targets\n{row}\n-->\n<!-- /numbers -->\n")
    assert numbers.stores_of(numbers.blocks_of(readme)[0]) == []
    return numbers.rewritten(readme, {}, lambda block: True)


def test_a_targets_row_checked_by_a_test_reads_no_store(tmp_path):
    """A row whose third cell is a test's path: no store is read or run; its verdict is the judgement the test
    checks."""
    text = storeless_targets_row(tmp_path, "Rt | mean = A* | tests/test_x.py::test_mean | 1000 draws | why t | met")
    cells = "| Rt | mean = A* | `tests/test_x.py::test_mean`: 1000 draws | met (a test of the suite checks it) |"
    assert f"{cells} no device run | why t |" in text


def test_a_targets_row_not_built_reads_no_store(tmp_path):
    """A row whose third cell is `not built` (a target no sweep measures): no store is read or run; its verdict
    says it was not run."""
    text = storeless_targets_row(tmp_path, "Rn | deep nets | not built | 3 layers | why n")
    assert "| Rn | deep nets | not built: 3 layers | not run here (not built) | no device run | why n |" in text


def test_a_targets_row_with_section_prefixes_on_a_report_without_verdicts(tmp_path):
    """A row naming section prefixes of a store whose report states no verdict says so in bold, its own
    judgement beside (no KeyError)."""
    numbers = script()
    readme = tmp_path / "README.md"
    row = "Rs | y | e3_parity quick 'Test-time axes' | d = 8 | why s | met"
    readme.write_text(f"<!-- numbers: - - targets\n{row}\n-->\n<!-- /numbers -->\n")
    stored = Headline(tmp_path, "e3_parity", "quick", "", (0,), (), {}, verdicts_of(tmp_path), "")
    text = numbers.rewritten(readme, {("e3_parity", "quick"): stored}, lambda block: True)
    assert f"| {numbers.NO_VERDICT}<br>judged by hand: met | no device run yet | why s |" in text


def test_a_final_block_with_stat_mean_gives_the_fraction_of_runs_of_a_yes_no_metric(tmp_path):
    """stat=mean: a 0/1 metric's mean over all runs of a point (three probes of seed 0, one of seed 1) and their
    count."""
    numbers = script()
    rows = ["run_id,seed,model,final_top"] + [f"r{i},{int(i > 2)},gt,{int(i != 1)}" for i in range(4)]
    (tmp_path / "runs.csv").write_text("\n".join(rows) + "\n")
    stored = Headline(tmp_path, "s", "quick", "", (0, 1), ("model",), {}, verdicts_of(tmp_path), "")
    block = numbers.parse_block(tmp_path, "s quick final metrics=top by=model stat=mean")
    assert numbers.final_kind(block, stored).splitlines() == [
        "| model | seeds | runs | top (mean) |",
        "|---|---|---|---|",
        "| gt | 2 | 4 | 0.75 (0–1) |",
    ]


@pytest.mark.slow
def test_the_readme_numbers_of_a_quick_preset_regenerate(tmp_path):
    """e1_phase1_bias quick (about 40 s) run afresh: every README block of it renders as the README has it."""
    readme = (ROOT / "sweeps" / "chen_li24" / "README.md").read_text()
    assert "<!-- numbers: e1_phase1_bias quick " in readme
    command = [sys.executable, "sweeps/readme_numbers.py", "--run", "--check", "--sweeps", "e1_phase1_bias"]
    done = subprocess.run([*command, "--results", str(tmp_path)], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert (tmp_path / "e1_phase1_bias-quick" / "report.md").exists()


def test_a_yes_no_metric_spreads_as_numbers():
    """The mean of a boolean metric over runs and its range read as a fraction, not False–True."""
    assert script().spread_text(pd.Series([True, False, False]), "mean") == "0.333 (0–1)"


def test_a_quoted_heading_with_an_equals_sign_is_an_argument():
    block = script().parse_block(Path("README.md"), 's quick section "Relations / R4.7: case = 1" where=H=1|4')
    assert block.args == ("Relations / R4.7: case = 1",) and block.options == (("where", "H=1|4"),)


def test_the_gallery_counts_each_papers_entries_and_verdicts_from_its_generated_blocks(tmp_path):
    """Counts read the generated blocks only (a verdict quoted in prose is not counted); a paper's entry not run
    here is counted apart."""
    numbers = script()
    gallery = tmp_path / "gallery.md"
    entry = "### {0}\n\n**PASS** in prose.\n\n<!-- numbers: {0} quick gallery -->\n{1}\n<!-- /numbers -->\n\n"
    gallery.write_text(
        '# Gallery\n\n<!-- numbers: - - counts -->\n<!-- /numbers -->\n\n## Paper A (2024), "A title, with a comma"\n\n'
        + entry.format("a1", "- x: **PASS**\n- y: **FAIL** (why)")
        + entry.format("a2", "- z: **not testable here** (one x)")
        + "## Paper B\n\n"
        + entry.format("b1", "*Not run here: the `quick` preset of `b1`.*")
    )
    text = numbers.rewritten(gallery, {}, lambda block: False)
    assert "| paper | entries | not run here | PASS | FAIL | INCONCLUSIVE | not testable here |" in text
    assert (
        "| Paper A (2024) | 2 | 0 | 1 | 1 | 0 | 1 |\n| Paper B | 1 | 1 | 0 | 0 | 0 | 0 |\n"
        "| all | 3 | 1 | 1 | 1 | 0 | 1 |" in text
    )


def test_a_targets_table_needs_only_its_shipped_presets_stores():
    """A row of a paper preset without a store renders "not run here" and keeps the table renderable (and
    checked); a row of a quick preset without a store (neither run nor shipped) does not."""
    numbers = script()
    rows = ("Rq | y | s quick | d = 8 | why", "Rp | y | s paper | d = 800 | why")
    block = numbers.Block(Path("README.md"), "-", "-", "targets", (), (), rows)
    found = {("s", "quick"): object(), ("s", "paper"): None}
    assert numbers.has_numbers(block, found)
    assert not numbers.has_numbers(block, {**found, ("s", "quick"): None})


def test_only_a_shipped_presets_block_without_data_is_missing_data():
    """--check exits 3 for a quick block with neither a store nor shipped results; a paper block without a store
    is compared as its "Not run here" text (with the command naming its preset), not counted as missing."""
    numbers = script()
    quick = numbers.Block(Path("README.md"), "s", "quick", "capacity", (), ())
    paper = numbers.Block(Path("README.md"), "s", "paper", "capacity", (), ())
    none = {("s", "quick"): None, ("s", "paper"): None}
    assert numbers.lacks_shipped_data(quick, none) and not numbers.lacks_shipped_data(paper, none)
    assert not numbers.lacks_shipped_data(quick, {**none, ("s", "quick"): object()})
    assert "--sweeps s --presets paper" in numbers.render(paper, None)


def test_the_shipped_table_reads_each_exports_manifest(tmp_path, monkeypatch):
    numbers = script()
    folder = tmp_path / "fam" / "data" / "s-quick"
    folder.mkdir(parents=True)
    (folder / "runs.parquet").write_bytes(b"x" * 2048)
    files = {"runs.parquet": {"table": "runs", "rows": 7}, "trajectories.parquet": {"table": "trajectories", "rows": 0}}
    (folder / "trajectories.parquet").write_bytes(b"")
    (folder / "manifest.json").write_text(json.dumps({"preset": "quick", "elapsed_s": 41.6, "files": files}))
    monkeypatch.setattr(numbers, "SWEEPS", tmp_path)
    assert numbers.shipped_table().splitlines()[2:] == [
        "| fam | `s` | quick | 42 s | 2 KiB | 7 | 0 |",
        "",
        "1 preset shipped, 2 KiB in all.",
    ]


def test_a_store_of_an_older_spec_is_named_read_from_the_shipped_results_and_never_shipped(tmp_path, capsys):
    """results/numbers/<sweep>-quick written before the spec changed (here: another sweep's store under its name)
    is read past with a warning naming what differs, and --ship refuses to export it."""
    from jaxmem.persistence.shipped import import_results

    numbers = script()
    block = numbers.Block(ROOT / "README.md", "e3_parity", "quick", "verdicts", (), ())
    stale = numbers.store_folder(tmp_path / "results", block)
    import_results(ROOT / "sweeps" / "chen_li24" / "data" / "e1_phase1_bias-quick", stale)
    folder = numbers.numbers_folder(tmp_path / "results", tmp_path / "scratch", block)
    assert folder == tmp_path / "scratch" / "e3_parity-quick"
    warning = capsys.readouterr().err
    assert f"{stale} is a store of an older spec (e1_phase1_bias, preset quick; it differs in" in warning
    assert "--run --sweeps e3_parity --presets quick" in warning
    with pytest.raises(SystemExit, match="not shipping .* a store of an older spec"):
        numbers.ship(tmp_path / "results", block)


def test_every_shipped_preset_was_made_by_the_experiment_code_here(monkeypatch):
    """A shipped preset's meta keeps the fingerprint of the experiment code that made its results; an edit of a
    family (or of a jaxmem.experiments module it imports) without shipping its presets again leaves results that
    this code never made, and reports that say so. Rerun and ship them: `python sweeps/readme_numbers.py --run
    --ship --sweeps S --presets quick` (jaxmem compare tells whether the results moved)."""
    import functools

    from jaxmem.experiments import code_identity

    monkeypatch.setattr(code_identity, "of_experiment", functools.cache(code_identity.of_experiment))  # once a family
    stale = []
    for meta_file in sorted(ROOT.glob("sweeps/*/data/*/meta.parquet")):
        table = pd.read_parquet(meta_file)
        outcome, changed = code_identity.compared(dict(zip(table.iloc[:, 0], table.iloc[:, 1])))
        if outcome != code_identity.UNCHANGED:
            stale.append(f"{meta_file.parent.name}: {outcome} {code_identity.describe_changes(changed)}")
    assert len(list(ROOT.glob("sweeps/*/data/*/meta.parquet"))) >= 85
    assert not stale, stale
