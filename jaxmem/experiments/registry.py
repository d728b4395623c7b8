"""Experiments by name: the shipped families, and any experiment a user names as `module:ATTRIBUTE`.

A spec's `experiment = "assoc_memory"` names a shipped family; `experiment = "my_pkg.my_module:EXPERIMENT"`
imports `my_pkg.my_module` (from the Python path, the current folder, or the folder of the spec that
names it) and takes its `EXPERIMENT`, guarded (jaxmem.experiments.user_errors: its errors are told as the
user's). Python code may also `register` an Experiment object and name it.
"""

from __future__ import annotations

import contextlib
import importlib
import sys
from pathlib import Path

from jaxmem.experiments.interface import Experiment
from jaxmem.experiments.user_errors import UserCode, guarded, package_root

SHIPPED = {  # name -> where its Experiment lives (imported on first use)
    "assoc_memory": "jaxmem.experiments.nichani24.assoc_memory:EXPERIMENT",
    "factual_recall": "jaxmem.experiments.nichani24.factual_recall:EXPERIMENT",
    "sequential_learning": "jaxmem.experiments.nichani24.sequential_learning:EXPERIMENT",
    "thm10_construction": "jaxmem.experiments.nichani24.thm10_construction:EXPERIMENT",
    "ntp_linear": "jaxmem.experiments.thrampoulidis24.ntp_linear:EXPERIMENT",
    "mha_teacher": "jaxmem.experiments.chen_li24.mha_teacher:EXPERIMENT",
    "mha_parity": "jaxmem.experiments.chen_li24.mha_parity:EXPERIMENT",
    "mha_phase1": "jaxmem.experiments.chen_li24.mha_phase1:EXPERIMENT",
    "shallow_vit": "jaxmem.experiments.li_thesis.shallow_vit:EXPERIMENT",
    "gmm_imbalance": "jaxmem.experiments.li_thesis.gmm_imbalance:EXPERIMENT",
    "mha_heads": "jaxmem.experiments.deora24.mha_heads:EXPERIMENT",
    "gt_node_classification": "jaxmem.experiments.li_thesis.gt_node_classification:EXPERIMENT",
    "gcn_sampling": "jaxmem.experiments.li_thesis.gcn_sampling:EXPERIMENT",
    "icl_transformer": "jaxmem.experiments.li_thesis.icl_transformer:EXPERIMENT",
    "cot_transformer": "jaxmem.experiments.li_thesis.cot_transformer:EXPERIMENT",
}


_REGISTERED: dict[str, Experiment] = {}  # experiments handed over by Python code in this process


class UnknownExperiment(LookupError):
    """A name that is neither a shipped experiment nor an importable `module:ATTRIBUTE` Experiment."""

    def __str__(self) -> str:
        return str(self.args[0])


def is_reference(name: str) -> bool:
    """Whether `name` points at a user's experiment (`module:ATTRIBUTE`) rather than a shipped one."""
    return ":" in name


def get(name: str) -> Experiment:
    """The experiment called `name` (shipped) or found at `module:ATTRIBUTE`."""
    if not isinstance(name, str):
        raise UnknownExperiment(f"an experiment name is a string, got {name!r}")
    if name in _REGISTERED:
        return _REGISTERED[name]
    if name in SHIPPED:
        return load_reference(SHIPPED[name])
    if is_reference(name):
        return load_reference(name)
    raise UnknownExperiment(
        f"unknown experiment {name!r}; shipped: {', '.join(sorted(SHIPPED))} (or name your own as 'module:ATTRIBUTE')"
    )


def load_reference(reference: str) -> Experiment:
    """Import `module:ATTRIBUTE` and check that it is an Experiment. The current folder is searched
    first, as `python -m` would, so a module beside the spec's working folder is found."""
    module_name, _, attribute = reference.partition(":")
    if not module_name or not attribute:
        raise UnknownExperiment(f"experiment {reference!r}: expected 'module:ATTRIBUTE'")
    with searching(Path.cwd()):
        module = imported(module_name, reference)
    found = getattr(module, attribute, None)
    if not isinstance(found, Experiment):
        what = "no such attribute" if found is None else f"a {type(found).__name__}, not a jaxmem Experiment"
        raise UnknownExperiment(f"experiment {reference!r}: {module_name}.{attribute} is {what}")
    if module_name.partition(".")[0] == "jaxmem":  # jaxmem's own code: its errors are jaxmem's bugs
        return found
    return guarded(found, UserCode(reference, package_root(module_name)))


def imported(module_name: str, reference: str):
    """The module of a `module:ATTRIBUTE` reference. One that does not parse or raises as it is imported is
    an ExperimentError naming its file and line (a module that cannot be found: UnknownExperiment)."""
    try:
        return importlib.import_module(module_name)
    except ImportError as err:
        raise UnknownExperiment(f"experiment {reference!r}: cannot import {module_name!r} ({err})") from None
    except Exception as err:
        code = UserCode(reference)
        if not code.raised(err):
            raise
        raise code.failure(f"experiment {reference}: importing {module_name}", err) from err


def register(exp: Experiment) -> str:
    """Make `exp` known by its name in this process (for specs given as data with an Experiment object)."""
    if not isinstance(exp, Experiment):
        raise UnknownExperiment(f"expected a jaxmem Experiment, got a {type(exp).__name__}")
    if exp.name in SHIPPED or is_reference(exp.name):
        raise UnknownExperiment(f"experiment name {exp.name!r} is taken by a shipped experiment or has a ':'")
    _REGISTERED[exp.name] = exp
    return exp.name


@contextlib.contextmanager
def searching(folder: str | Path):
    """Within this block, `module:ATTRIBUTE` references are also looked up in `folder` (a spec's own);
    an empty `folder` ("") adds none."""
    if not str(folder):
        yield
        return
    folder = str(Path(folder).resolve())
    added = folder not in sys.path
    if added:
        sys.path.insert(0, folder)
    try:
        yield
    finally:
        if added and folder in sys.path:
            sys.path.remove(folder)


def module_folder(name: str) -> str:
    """The folder from which a `module:ATTRIBUTE` experiment's module imports (so that a later process,
    e.g. `jaxmem report`, finds it again); "" for shipped or registered experiments."""
    module = sys.modules.get(name.partition(":")[0]) if is_reference(name) else None
    file = getattr(module, "__file__", None)
    if not file:
        return ""
    depth = module.__name__.count(".") + (Path(file).name == "__init__.py")
    return str(Path(file).resolve().parents[depth])


def defining_module(name: str) -> str | None:
    """The module that defines experiment `name`: a shipped family's, or a `module:ATTRIBUTE`'s own; None for
    one registered by Python code."""
    reference = SHIPPED.get(name, name) if name not in _REGISTERED else ""
    return reference.partition(":")[0] if is_reference(reference) else None


def find(name: str, folder: str = "") -> Experiment | None:
    """The experiment called `name`, also looked up in `folder`; None when it cannot be found (a user's
    module that is no longer importable)."""
    try:
        with searching(folder):
            return get(name)
    except UnknownExperiment:
        return None


def shipped() -> dict[str, Experiment]:
    """Every shipped experiment, by name."""
    return {name: get(name) for name in SHIPPED}
