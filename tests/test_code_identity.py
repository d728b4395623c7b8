"""The experiment's code in a sweep's identity: a fingerprint of the module defining the experiment and
the local modules it imports, recorded with the results; a run into a folder whose experiment code
changed is refused (exit 4), `status` and the report say so, and `--restart` starts over."""

import json
import uuid

import pytest

from jaxmem.cli.main import main
from jaxmem.driver import folder
from jaxmem.driver import sweep as driver
from jaxmem.experiments import code_identity
from jaxmem.experiments.registry import searching
from jaxmem.persistence.store import Store, StoreError
from jaxmem.spec.sweep import parse

EXPERIMENT = """
import jax.numpy as jnp
import numpy as np

from jaxmem.experiments.interface import Experiment, size
import {helper} as helper

SCALE = 1.0  # a comment


def init(key, shape, dyn):
    return {{"w": jnp.zeros(shape["d"])}}, {{}}


def loss(params, problem, shape, dyn, key):
    return SCALE * helper.FACTOR * jnp.sum(params["w"] ** 2)


def evaluate(params, problem, shape, dyn):
    return {{"loss": loss(params, problem, shape, dyn, None), "accuracy": jnp.float32(np.float32(1.0))}}


EXPERIMENT = Experiment(
    name="coded", doc="", fields={{"d": size("width")}}, init=init, loss=loss, evaluate=evaluate,
    metrics=("loss", "accuracy"),
)
"""


@pytest.fixture
def user_code(tmp_path):
    """A user's experiment module (uniquely named: the test process imports it) and a local helper it imports."""
    name, helper = f"coded_{uuid.uuid4().hex[:8]}", f"helper_{uuid.uuid4().hex[:8]}"
    code = tmp_path / "code"
    code.mkdir()
    (code / f"{name}.py").write_text(EXPERIMENT.format(helper=helper))
    (code / f"{helper}.py").write_text("FACTOR = 2.0\n")
    return code, name, helper


def spec_of(code, name):
    raw = {"experiment": f"{name}:EXPERIMENT", "fixed": {"d": 2}, "train": {"steps": 2, "eval_every": 1}}
    with searching(code):
        return parse(raw, "coded_sweep")


def with_a_result(out, spec):
    """A claimed folder holding one finished run (as if the sweep had run)."""
    out.mkdir(exist_ok=True)
    store = Store(out)
    try:
        folder.claim(store, spec)
        row = {"run_id": "r0", "point": "p0", "seed": 0, "lr": 0.1, "config": "{}", "bucket": "b"}
        store.add_runs([{**row, "diverged": 0, "success": 1}])
    finally:
        store.close()


def edit(path, old, new):
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))


def test_the_fingerprint_holds_the_module_and_its_local_imports_only(user_code):
    code, name, helper = user_code
    found = code_identity.fingerprint(name, str(code))
    assert set(found) == {name, helper}  # numpy, jax and jaxmem are not the experiment's code
    edit(code / f"{name}.py", "# a comment", "# another comment, same code")
    assert code_identity.fingerprint(name, str(code)) == found
    edit(code / f"{helper}.py", "2.0", "3.0")
    assert code_identity.changed_modules(found, code_identity.fingerprint(name, str(code))) == [helper]


def test_relative_imports_of_a_package_are_followed(tmp_path):
    package = tmp_path / f"pkg_{uuid.uuid4().hex[:8]}"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "exp.py").write_text("from . import shared\nfrom .sub.deep import VALUE\n")
    (package / "shared.py").write_text("X = 1\n")
    (package / "sub" / "__init__.py").write_text("")
    (package / "sub" / "deep.py").write_text("VALUE = 2\n")
    found = code_identity.fingerprint(f"{package.name}.exp", str(tmp_path))
    assert {f"{package.name}.{m}" for m in ("exp", "shared", "sub.deep")} <= set(found)


def test_a_shipped_family_is_fingerprinted_with_its_modules_and_jaxmem_version():
    found = code_identity.of_experiment("jaxmem.experiments.nichani24.assoc_memory")
    assert found["jaxmem"] == __import__("jaxmem").__version__
    assert "jaxmem.experiments.nichani24.assoc_memory" in found and "jaxmem.experiments.draws" in found
    assert not any(name.startswith(("jaxmem.engine", "jaxmem.driver")) for name in found)


def test_a_shipped_family_is_found_where_jaxmem_lives_whatever_the_python_path(monkeypatch):
    """An editable install puts jaxmem on no search path: run from another folder, the family is still found."""
    here = code_identity.of_experiment("jaxmem.experiments.nichani24.assoc_memory")
    monkeypatch.setattr("sys.path", [p for p in __import__("sys").path if "site-packages" in p])
    assert code_identity.of_experiment("jaxmem.experiments.nichani24.assoc_memory") == here
    assert "jaxmem.experiments.draws" in here


def test_a_run_into_a_folder_whose_experiment_code_changed_exits_4(tmp_path, user_code, capsys, monkeypatch):
    code, name, helper = user_code
    monkeypatch.chdir(code)
    spec, out = spec_of(code, name), tmp_path / "out"
    with_a_result(out, spec)
    (code / "sweep.toml").write_text(
        f'experiment = "{name}:EXPERIMENT"\n[fixed]\nd = 2\n[train]\nsteps = 2\neval_every = 1\n'
    )
    edit(code / f"{helper}.py", "2.0", "200.0")
    monkeypatch.setattr(driver, "BucketRunner", lambda *a, **k: pytest.fail("the run started work"))
    assert main(["run", str(code / "sweep.toml"), "--out", str(out), "--quiet"]) == 4
    err = capsys.readouterr().err
    assert f"module {helper} changed since" in err and "--restart" in err and "new --out" in err
    assert main(["status", str(out)]) == 0
    assert f"experiment code CHANGED since the results were made: module {helper}" in capsys.readouterr().out
    store = Store(out)
    try:
        assert set(store.finished_runs()) == {"r0"}  # the refused run kept the results as they were
        recorded, now = json.loads(store.meta()[code_identity.RECORD]), code_identity.fingerprint(name, str(code))
        assert recorded[helper] != now[helper]  # the record still names the code that made the results
    finally:
        store.close()


def test_unchanged_code_resumes_and_restart_discards(tmp_path, user_code):
    code, name, _ = user_code
    spec, out = spec_of(code, name), tmp_path / "out"
    with_a_result(out, spec)
    store = Store(out)
    try:
        folder.claim(store, spec_of(code, name))  # the same code: accepted
    finally:
        store.close()
    (out / "checkpoints").mkdir()
    discarded = folder.discard_results(out)
    assert {p.name for p in discarded} >= {"results.sqlite", "checkpoints"} and not (out / "results.sqlite").exists()


def test_a_folder_stored_before_the_code_was_recorded_resumes_and_says_so(tmp_path, user_code, capsys, monkeypatch):
    code, name, helper = user_code
    spec, out = spec_of(code, name), tmp_path / "out"
    with monkeypatch.context() as old_jaxmem:
        old_jaxmem.setattr(folder, "CODE", "a_key_of_no_meaning")
        with_a_result(out, spec)
    edit(code / f"{helper}.py", "2.0", "3.0")
    store = Store(out)
    try:
        folder.claim(store, spec_of(code, name))  # taken as unchanged
        assert code_identity.RECORD not in store.meta()  # and still not recorded: nobody knows its code
    finally:
        store.close()
    assert main(["status", str(out)]) == 0
    assert "experiment code: not recorded" in capsys.readouterr().out


def test_claim_refuses_changed_code_without_touching_the_store(tmp_path, user_code):
    code, name, _ = user_code
    spec, out = spec_of(code, name), tmp_path / "out"
    with_a_result(out, spec)
    before = Store(out).meta()
    edit(code / f"{name}.py", "SCALE = 1.0", "SCALE = 100.0")
    store = Store(out)
    try:
        with pytest.raises(StoreError, match=f"module {name} changed since"):
            folder.claim(store, spec_of(code, name))
        assert store.meta() == before
    finally:
        store.close()
