"""Shipped results (jaxmem.persistence.shipped, sweeps/readme_numbers.py): a store exported and imported again
renders the same blocks; `--check` on a fresh clone reads the export, tolerates float noise but not a real
change, compares the gallery figure, and reports blocks with no shipped data apart (exit 3); a damaged export
is refused, naming the file."""

import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from PIL import Image

from jaxmem.driver.sweep import run_sweep
from jaxmem.persistence.shipped import ExportError, export_results, import_results
from jaxmem.persistence.store import CHECKED, LATER, load_results
from jaxmem.report.from_store import report
from jaxmem.report.headline import headline
from jaxmem.spec.sweep import load
from test_numbers_regenerate import script

ROOT = Path(__file__).resolve().parent.parent
SPEC = ROOT / "tests" / "specs" / "tiny_linear.toml"
MARKERS = (
    "tiny quick verdicts",
    "tiny quick final metrics=accuracy,loss",
    "tiny quick steps metric=accuracy steps=8,32",
)


@pytest.fixture(scope="module")
def stored(tmp_path_factory) -> Path:
    """A finished tiny_linear sweep (4 runs, trajectories recorded)."""
    out = tmp_path_factory.mktemp("tiny") / "out"
    run_sweep(load(SPEC), out, quiet=True)
    return out


@pytest.fixture
def clone(stored, tmp_path, monkeypatch):
    """readme_numbers over a fresh clone: sweeps/fam/tiny.toml, its README of MARKERS, a gallery entry, its
    export in sweeps/fam/data/tiny-quick, no store in the (empty) results folder; both rendered once."""
    numbers = script()
    family = tmp_path / "sweeps" / "fam"
    family.mkdir(parents=True)
    shutil.copy(SPEC, family / "tiny.toml")
    export_results(stored, family / "data" / "tiny-quick")
    (family / "README.md").write_text("".join(f"<!-- numbers: {m} -->\n<!-- /numbers -->\n\n" for m in MARKERS))
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "gallery.md").write_text("<!-- numbers: tiny quick gallery -->\n<!-- /numbers -->\n")
    monkeypatch.setattr(numbers, "ROOT", tmp_path)
    monkeypatch.setattr(numbers, "SWEEPS", tmp_path / "sweeps")
    monkeypatch.setattr(numbers, "GALLERY", tmp_path / "docs" / "gallery.md")
    results = tmp_path / "results"
    results.mkdir()
    assert numbers.main(["--results", str(results)]) == 0
    return numbers, family / "README.md", ["--check", "--results", str(results)]


def test_an_imported_export_holds_the_stores_rows_and_renders_the_same_blocks(stored, tmp_path):
    imported = tmp_path / "imported"
    export_results(stored, tmp_path / "export")
    import_results(tmp_path / "export", imported)
    for table in ("runs", "searches", "final_eval", "compiles", "meta"):
        assert load_results(imported, table).equals(load_results(stored, table)), table
    before, after = (load_results(folder, "trajectories") for folder in (stored, imported))
    assert before[["run_id", "step"]].equals(after[["run_id", "step"]])
    metrics = [pd.DataFrame([json.loads(m) for m in frame["metrics"]]) for frame in (before, after)]
    assert list(metrics[0]) == list(metrics[1]) and "accuracy" in metrics[0]
    np.testing.assert_allclose(metrics[1], metrics[0], rtol=1e-6)  # float32 in the export
    numbers = script()
    headlines = {}
    for folder in (stored, imported):
        report(folder)
        headlines[folder] = headline(folder)
    for marker in MARKERS:
        block = numbers.parse_block(tmp_path, marker)
        assert numbers.render(block, headlines[stored]) == numbers.render(block, headlines[imported]), marker


def test_a_damaged_or_incomplete_export_is_refused_naming_the_file(stored, tmp_path):
    export = tmp_path / "export"
    export_results(stored, export)
    runs = export / "runs.parquet"
    runs.write_bytes(runs.read_bytes()[:-1] + b"\0")
    with pytest.raises(ExportError, match=f"export file {runs} is damaged"):
        import_results(export, tmp_path / "imported")
    (export / "searches.parquet").unlink()
    export_results(stored, export)  # whole again
    (export / "meta.parquet").unlink()
    with pytest.raises(ExportError, match=f"export file {export / 'meta.parquet'} is missing"):
        import_results(export, tmp_path / "imported")
    assert not (tmp_path / "imported").exists()
    assert set(CHECKED) - set(LATER) == {"runs", "searches", "trajectories", "final_eval", "compiles", "meta"}


def test_check_on_a_fresh_clone_reads_the_export_and_tolerates_float_noise_only(clone, capsys):
    numbers, readme, check = clone
    text = readme.read_text()
    assert "Not run here" not in text and (readme.parent.parent.parent / "docs" / "gallery" / "tiny.png").exists()
    assert numbers.main(check) == 0
    compared = "4 blocks compared (0 of them 'not run here': presets that do not ship), 0 differ beyond the tolerance"
    assert f"{compared}; 1 figures compared, 0 differ" in capsys.readouterr().out
    noisy = numbers.NUMBER.sub(lambda m: noise(m.group(0)), text)
    assert noisy != text
    readme.write_text(noisy)
    assert numbers.main(check) == 0
    readme.write_text(text.replace("| 2 |", "| 3 |", 1))  # a count: no tolerance
    assert numbers.main(check) == 1
    out = capsys.readouterr().out
    assert "-| 0.3 | 3 |" in out and "+| 0.3 | 2 |" in out and "1 differ beyond the tolerance" in out


def noise(number: str) -> str:
    """`number` one unit of its last digit higher, where it has 3 or more significant digits (a rerun's float
    noise at a rounding boundary); as it is otherwise."""
    digits, unit = script().last_digit(number)
    if digits < 3 or "e" in number:
        return number
    decimals = len(number.partition(".")[2])
    return f"{float(number.replace('−', '-')) + unit:.{decimals}f}"


def test_the_tolerance_rules():
    agree = script().blocks_agree
    assert agree("std 0.001318, b −1337", "std 0.001317, b −1338")  # the float noise
    assert agree("slope 0.125", "slope 0.126") and agree("1.34e+03", "1.35e+03")
    assert agree("x 12.3456", "x 12.3457") and agree("n 1000", "n 1001")  # 1e-3 relative
    assert agree("gap 7.13e-15", "gap 6.69e-15") and agree("8.14e-08", "1.019e-07")  # round-off
    assert not agree("loss 3.1e-05", "loss 5.2e-05")
    assert not agree("3 of 5 answered", "4 of 5 answered")  # fewer than 3 digits: exact
    assert not agree("slope 0.125", "slope 0.128") and not agree("0.5", "-0.5")
    assert not agree("slope 0.125: **PASS**", "slope 0.125: **FAIL**")
    assert not agree("seeds 0–4", "seeds 0–4, 5")


def test_a_figure_beyond_the_pixel_tolerance_fails_the_check(clone, capsys):
    numbers, readme, check = clone
    figure = readme.parent.parent.parent / "docs" / "gallery" / "tiny.png"
    pixels = np.asarray(Image.open(figure).convert("RGB")).copy()
    pixels[:2, :20] = 255 - pixels[:2, :20]  # a few pixels: within the tolerance
    Image.fromarray(pixels).save(figure)
    assert numbers.main(check) == 0
    pixels[: pixels.shape[0] // 5] = 255 - pixels[: pixels.shape[0] // 5]  # a fifth of the figure
    Image.fromarray(pixels).save(figure)
    assert numbers.main(check) == 1
    out = capsys.readouterr().out
    assert "figure differs: docs/gallery/tiny.png: " in out and "of its pixels differ" in out


def test_blocks_without_shipped_data_are_reported_apart_with_exit_3(clone, capsys):
    numbers, readme, check = clone
    shutil.copy(SPEC, readme.parent / "other.toml")
    readme.write_text(readme.read_text() + "<!-- numbers: other quick verdicts -->\nquoted\n<!-- /numbers -->\n")
    assert numbers.main(check) == 3
    out = capsys.readouterr().out
    assert "4 blocks compared (0 of them 'not run here': presets that do not ship), 0 differ" in out
    assert "no shipped data yet for 1 blocks" in out
    assert "python sweeps/readme_numbers.py --run --ship --presets quick --sweeps other" in out
    assert numbers.main(check[1:]) == 0  # written: the block says so, with its command
    assert "*Not run here: the `quick` preset of `other`" in readme.read_text()
