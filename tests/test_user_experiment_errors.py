"""A user's broken experiment, run by the CLI: exit 2 and one line naming the experiment, its module and
attribute and the function at fault, then only the user's own frames; `--debug` shows every frame; jaxmem's
own bugs keep their traceback. Each module breaks at import or as the engine traces it: nothing compiles."""

from __future__ import annotations

import re
import sys

import jax
import pytest

from jaxmem.cli.main import main
from jaxmem.experiments import registry
from jaxmem.experiments.nichani24 import assoc_memory

WORKING = """\
import jax
import jax.numpy as jnp

from jaxmem.experiments.interface import Costs, Experiment, size


def init(key, shape, dyn):
    w = jax.random.normal(key, (shape["d"],))
    return {"w": w}, {"x": jnp.ones((shape["d"],))}


def loss(params, problem, shape, dyn, key):
    return jnp.sum((params["w"] - problem["x"]) ** 2)


def evaluate(params, problem, shape, dyn):
    return {"loss": jnp.sum(params["w"] ** 2), "test_error": jnp.mean(params["w"] ** 2)}


EXPERIMENT = Experiment(
    name="tiny_user",
    doc="a user's experiment",
    fields={"d": size("dimension")},
    init=init,
    loss=loss,
    evaluate=evaluate,
    metrics=("loss", "test_error"),
    costs=Costs(flops_per_step=lambda config: 4.0 * config["d"]),
)
"""

SPEC = """\
experiment = "{module}:EXPERIMENT"
seeds = [0]
[fixed]
d = 4
[train]
steps = 2
eval_every = 1
learning_rates = [0.01]
metric = "test_error"
"""

TEST_ERROR = '"test_error": jnp.mean(params["w"] ** 2)'
BREAKS = {  # case: (edit of the working module (old, new), what the error's first line says, a user frame's line)
    "raise_in_init": (
        ("    w = jax.random", '    raise RuntimeError("no teacher")\n    w = jax.random'),
        "init() raised RuntimeError: no teacher",
        'raise RuntimeError("no teacher")',
    ),
    "wrong_shapes": (
        ('jnp.sum((params["w"] - problem["x"]) ** 2)', 'jnp.sum(params["w"] @ jnp.ones((shape["d"] + 1,)))'),
        "loss() raised TypeError: dot_general requires contracting dimensions to have the same shape",
        'return jnp.sum(params["w"] @ jnp.ones((shape["d"] + 1,)))',
    ),
    "vector_loss": (
        ('jnp.sum((params["w"] - problem["x"]) ** 2)', '(params["w"] - problem["x"]) ** 2'),
        "loss() returned an array of shape (4,); the loss must be a floating-point scalar",
        "def loss(params, problem, shape, dyn, key):",
    ),
    "missing_metric": (
        (", " + TEST_ERROR, ""),
        "evaluate() returned no 'test_error', a declared metric (it returned 'loss')",
        "def evaluate(params, problem, shape, dyn):",
    ),
    "vector_metric": (
        (TEST_ERROR, '"test_error": params["w"] ** 2'),
        "evaluate() returned 'test_error' as an array of shape (4,); each metric must be a real scalar",
        "def evaluate(params, problem, shape, dyn):",
    ),
    "string_metric": (
        (TEST_ERROR, '"test_error": "low"'),
        "evaluate() returned 'test_error' as the string 'low'; each metric must be a real scalar",
        "def evaluate(params, problem, shape, dyn):",
    ),
    "syntax_error": (
        ("def init(key, shape, dyn):", "def init(key, shape, dyn)"),
        "raised SyntaxError: expected ':'",
        "def init(key, shape, dyn)",
    ),
    "no_evaluate": (
        ("    evaluate=evaluate,\n", ""),
        "raised TypeError: Experiment.__init__() missing 1 required positional argument: 'evaluate'",
        "EXPERIMENT = Experiment(",
    ),
    "raise_at_import": (
        ("\n\ndef init", '\nraise FileNotFoundError("teacher.npz")\n\n\ndef init'),
        "raised FileNotFoundError: teacher.npz",
        'raise FileNotFoundError("teacher.npz")',
    ),
}


@pytest.fixture
def user_module(tmp_path):
    """write(name, source) -> the spec of a sweep over the module `name` written beside it; the modules are
    forgotten afterwards."""
    names = []

    def write(name: str, source: str):
        names.append(name)
        (tmp_path / f"{name}.py").write_text(source)
        spec = tmp_path / f"{name}.toml"
        spec.write_text(SPEC.format(module=name))
        return spec

    yield write
    for name in names:
        sys.modules.pop(name, None)


def run(spec, *flags) -> int:
    return main(["run", str(spec), "--out", str(spec.parent / "out"), "--quiet", "--no-compile-cache", *flags])


def error_block(stderr: str) -> list[str]:
    """The lines of the CLI's error message (after the progress lines)."""
    return stderr[stderr.index("jaxmem: error: ") :].splitlines()


@pytest.mark.parametrize("case", BREAKS)
def test_a_broken_user_experiment_is_told_as_the_users(case, user_module, capsys):
    (old, new), says, frame = BREAKS[case]
    assert old in WORKING
    name = f"user_exp_{case}"
    spec = user_module(name, WORKING.replace(old, new))
    assert run(spec) == 2
    first, *rest = error_block(capsys.readouterr().err)
    assert first.startswith("jaxmem: error: experiment ") and f"{name}:EXPERIMENT" in first and says in first
    files = re.findall(r'File "([^"]+)"', "\n".join(rest))
    assert files and set(files) == {str(spec.parent / f"{name}.py")}  # the user's frames, and only those
    assert frame in [line.strip() for line in rest]


def test_the_working_module_runs(user_module, capsys):
    assert run(user_module("user_exp_working", WORKING)) == 0


@pytest.fixture
def traceback_filtering():
    """`--debug` turns JAX's traceback filtering off for the process: restored afterwards."""
    previous = jax.config.jax_traceback_filtering
    yield
    jax.config.update("jax_traceback_filtering", previous)


def test_debug_shows_every_frame(user_module, capsys, traceback_filtering):
    (old, new), _, _ = BREAKS["raise_in_init"]
    spec = user_module("user_exp_debug", WORKING.replace(old, new))
    assert run(spec, "--debug") == 2
    err = capsys.readouterr().err
    assert "jaxmem: error:" not in err and "RuntimeError: no teacher" in err
    assert "jaxmem/engine/" in err and "jax/_src/" in err  # jaxmem's and JAX's frames


def test_an_error_raised_in_jaxmem_keeps_its_traceback(user_module):
    """The user's init calls jaxmem code that raises: the innermost frame outside the libraries is jaxmem's,
    so it is not the user's error (a bug there must show where)."""
    source = WORKING.replace("    w = jax.random", '    Field(int, "a field", kind="no such kind")\n    w = jax.random')
    spec = user_module("user_exp_jaxmem_raises", source.replace("import Costs,", "import Costs, Field,"))
    with pytest.raises(ValueError, match="field kind must be one of"):
        run(spec)


def test_shipped_experiments_are_not_guarded():
    assert registry.get("assoc_memory") is assoc_memory.EXPERIMENT
    assert registry.get("jaxmem.experiments.nichani24.assoc_memory:EXPERIMENT") is assoc_memory.EXPERIMENT
