"""No shipped verdict selects on its own test set (verdicts issue): in every sweep of sweeps/ and each of
its presets, a success metric measured on held-out data is judged by its final value, and early stopping,
where a sweep has it, reads no held-out metric but a validation set's (val_*, drawn apart from the test
set) or a training metric, so a search is not a selection on the data that judges it
(tests/test_early_stop_metric.py shows the bias)."""

from pathlib import Path

import pytest

from jaxmem.driver.settings import settings_of
from jaxmem.experiments.registry import get as get_experiment
from jaxmem.spec import sweep as specmod

SWEEPS = sorted((Path(__file__).parent.parent / "sweeps").rglob("*.toml"))
HELD_OUT_PREFIXES = ("test_", "id_", "ood_")  # the experiments' names of metrics on held-out sets
HELD_OUT = {("cot_transformer", "loss")}  # the in-distribution loss on fixed evaluation prompts


def held_out(experiment: str, metric: str) -> bool:
    return metric.startswith(HELD_OUT_PREFIXES) or (experiment, metric) in HELD_OUT


def presets(path: Path) -> list[str]:
    """The base spec ("") and every preset of the file (with those of a file it extends)."""
    return ["", *specmod.read_toml(path).get("presets", {})]


@pytest.mark.parametrize("path", SWEEPS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_no_verdict_selects_on_its_own_test_set(path):
    for preset in presets(path):
        spec = specmod.load(path, preset=preset)
        if spec.success is None or not held_out(spec.experiment, spec.success.metric):
            continue
        where = f"{path.stem} {preset or 'base'}: {spec.success.metric}"
        assert spec.success.counts == "final", f"{where} judged at its best evaluation"
        heatmap = spec.report.heatmap
        assert heatmap is None or heatmap.metric != "max_metric", f"{where} drawn at its best evaluation"
        if spec.train.early_stop is None:
            continue
        stop = settings_of(spec).stop_metric
        assert not held_out(spec.experiment, stop), f"{where} stopped early on the held-out {stop}"
        n_val = get_experiment(spec.experiment).fields.get("n_val")
        if stop.startswith("val_") and n_val is not None:  # the validation set exists at every point
            assert all(p.get("n_val", n_val.default) > 0 for p in spec.points), f"{where} stopped on n_val = 0"
