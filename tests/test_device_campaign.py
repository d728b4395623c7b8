"""benchmarks/device_campaign.py: the order, the caps, a capped child, importing a campaign's exports, and (slow)
the --smoke run on this CPU, resumed."""

import importlib.util
import json
import shutil
import sys
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def dc():
    spec = importlib.util.spec_from_file_location("device_campaign", ROOT / "benchmarks" / "device_campaign.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["device_campaign"] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_order_is_priority_then_cheapest_first(dc):
    presets = [dc.Preset("f", name, Path(f"{name}.toml")) for name in ("zeta", "alpha", "fig1_mlp", "fig1_linear")]
    estimates = {"zeta": 5.0, "alpha": 50.0, "fig1_mlp": 300.0, "fig1_linear": 100.0}
    assert [p.sweep for p in dc.ordered(presets, estimates)] == ["fig1_linear", "fig1_mlp", "zeta", "alpha"]


def test_cap_is_a_multiple_of_the_estimate_within_what_is_left(dc):
    assert dc.cap_for(10.0, 500.0) == dc.CAP_FACTOR * 10.0 + dc.CAP_SLACK
    assert dc.cap_for(1000.0, 120.0) == 120.0


def test_every_gpu_preset_is_found_with_its_family(dc):
    found = {p.sweep: p.family for p in dc.gpu_presets()}
    assert found["fig1_linear"] == "nichani24" and found["e1_phase1_bias"] == "chen_li24"
    assert "compatibility_threshold" in found  # inherited from separability_threshold.toml (extends)
    assert set(dc.PRIORITY) <= set(found)


def test_a_child_past_its_cap_is_stopped(dc, tmp_path):
    code, seconds, capped = dc.run_capped([sys.executable, "-c", "import time; time.sleep(60)"], 1.0, tmp_path / "log")
    assert capped and code != 0 and seconds < 30


def campaign_folder(tmp_path: Path, device: str) -> Path:
    """A campaign's output: deora24.tar holding a shipped quick export renamed as a gpu one, and its state."""
    out, export = tmp_path / "out", tmp_path / "export" / "hessian_vs_H-gpu"
    out.mkdir()
    shutil.copytree(ROOT / "sweeps" / "deora24" / "data" / "hessian_vs_H-quick", export)
    with tarfile.open(out / "deora24.tar", "w") as tar:
        tar.add(export, arcname=export.name)
    state = {"presets": {"hessian_vs_H-gpu": {"family": "deora24", "status": "done", "device": device}}}
    (out / "campaign.json").write_text(json.dumps(state))
    return out


def test_import_places_each_export_with_its_device(dc, tmp_path):
    placed = dc.import_campaign(campaign_folder(tmp_path, "NVIDIA H200 x1 (gpu)"), tmp_path / "sweeps")
    assert placed == [tmp_path / "sweeps" / "deora24" / "data" / "hessian_vs_H-gpu"]
    manifest = json.loads((placed[0] / "manifest.json").read_text())
    assert manifest["device"] == "NVIDIA H200 x1 (gpu)" and manifest["campaign_status"] == "done"
    from jaxmem.persistence.shipped import verified_tables

    assert len(verified_tables(placed[0])["runs"]) == 35


def test_import_refuses_a_damaged_export(dc, tmp_path):
    from jaxmem.persistence.shipped import ExportError

    out = campaign_folder(tmp_path, "x")
    with tarfile.open(out / "deora24.tar") as tar:
        tar.extractall(tmp_path / "damaged", filter="data")
    (tmp_path / "damaged" / "hessian_vs_H-gpu" / "runs.parquet").write_bytes(b"not parquet")
    with tarfile.open(out / "deora24.tar", "w") as tar:
        tar.add(tmp_path / "damaged" / "hessian_vs_H-gpu", arcname="hessian_vs_H-gpu")
    with pytest.raises(ExportError, match="runs.parquet"):
        dc.import_campaign(out, tmp_path / "sweeps")
    assert not (tmp_path / "sweeps").exists()


@pytest.mark.slow
def test_smoke_runs_both_presets_then_resumes_with_nothing_left(dc, tmp_path, capsys):
    out = tmp_path / "out"
    assert dc.main(["--smoke", "--out", str(out), "--work", str(tmp_path / "work")]) == 0
    state = json.loads((out / "campaign.json").read_text())
    assert {name: e["status"] for name, e in state["presets"].items()} == {
        "fig1_linear-gpu": "done",
        "hessian_vs_H-gpu": "done",
    }
    assert sorted(p.name for p in out.iterdir()) == ["campaign.json", "campaign.log", "deora24.tar", "nichani24.tar"]
    assert len(list(out.iterdir())) <= 8
    capsys.readouterr()
    assert dc.main(["--smoke", "--out", str(out)]) == 0  # a second call: nothing left, nothing run
    assert "cap" not in capsys.readouterr().out
    assert len(json.loads((out / "campaign.json").read_text())["calls"]) == 2
    placed = dc.import_campaign(out, tmp_path / "sweeps")
    assert {p.name for p in placed} == {"fig1_linear-gpu", "hessian_vs_H-gpu"}
