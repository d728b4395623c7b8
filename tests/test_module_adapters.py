"""Module-built experiments (jaxmem.experiments.from_flax for linen and nnx, from_equinox): a padded run equals
the unpadded one in every slot of a program over seeds and learning rates, a sweep killed with SIGKILL resumes
to the uninterrupted sweep's rows, and a module that cannot be padded exactly runs that size static, said so."""

from __future__ import annotations

import importlib
import math
import re
import sys

import flax.linen as nn
import jax
import numpy as np
import pytest
from flax import nnx

from helpers import ROOT, assert_padded_matches, run_program
from jaxmem.engine.program import Settings
from jaxmem.experiments import from_flax
from jaxmem.experiments.adapters.build import UnpaddableWarning
from jaxmem.experiments.adapters.layout import Axis, infer_axes
from jaxmem.experiments.adapters.stable_keys import HASHED, THREEFRY, stable_key
from jaxmem.experiments.user_errors import ExperimentError

EXAMPLES = ROOT / "examples"
EXACT = lambda n, *_: n  # noqa: E731
BIG = lambda n, *_: 2 * n + 3  # noqa: E731 - every size padded, by an awkward amount
STEPS = 40
SEEDS, RATES = [0, 1, 0, 1], [1e-2, 1e-2, 3e-2, 3e-2]  # one program: two seeds x two learning rates


def example(name: str):
    """An example module of examples/, imported by its own name (as a spec next to it would find it)."""
    if str(EXAMPLES) not in sys.path:
        sys.path.insert(0, str(EXAMPLES))
    return importlib.import_module(name)


class NnxMemory(nnx.Module):
    """The Fig 1 MLP memory as an nnx module."""

    def __init__(self, d: int, width: int, rngs: nnx.Rngs):
        self.layer1 = nnx.Linear(d, width, rngs=rngs)
        self.layer2 = nnx.Linear(width, d, use_bias=False, rngs=rngs)

    def __call__(self, x):
        return self.layer2(nnx.relu(self.layer1(x)))


def memory_from(module_fn, **options):
    """The Fig 1 memory of examples/fig1_mlp_linen.py with another module."""
    linen = example("fig1_mlp_linen")
    kwargs = {"forward": linen.forward, "logits": True, **options}
    return from_flax(module_fn, linen.sample, linen.cross_entropy, {"accuracy": linen.accuracy}, linen.FIELDS, **kwargs)


@pytest.fixture(scope="session")
def module_experiments():
    """The three adapters' experiments, each with a config to run and the metric it is judged by."""
    memory = {"d": 5, "m": 7, "N": 9}
    return {
        "linen": (example("fig1_mlp_linen").EXPERIMENT, memory, "accuracy"),
        "nnx": (
            memory_from(lambda shape, rngs: NnxMemory(shape["d"], shape["m"], rngs), name="nnx_memory"),
            memory,
            "accuracy",
        ),
        "equinox": (
            example("relu_teacher_equinox").EXPERIMENT,
            {"d": 3, "m": 6, "k": 2, "n": 7, "n_test": 16},
            "test_error",
        ),
    }


def slot(state, index: int):
    """The program state from slot `index` on (that slot first)."""
    return jax.tree.map(lambda a: a[index:], state)


@pytest.mark.parametrize(
    "framework",
    # nnx (8 s) and equinox (14 s): slow; every example module's construction runs the padding check at its
    # probe config (test_every_size_of_the_example_modules_passes_the_padding_check)
    ["linen", pytest.param("nnx", marks=pytest.mark.slow), pytest.param("equinox", marks=pytest.mark.slow)],
)
def test_a_padded_module_run_equals_the_unpadded_one_over_seeds_and_learning_rates(module_experiments, framework):
    exp, config, metric = module_experiments[framework]
    higher = metric == "accuracy"
    settings = Settings(STEPS, 8, metric, 0.5, math.inf if higher else -math.inf, higher_is_better=higher)
    small = run_program([config] * 4, EXACT, 4, STEPS, RATES, seeds=SEEDS, exp=exp, settings=settings)
    big = run_program([config] * 4, BIG, 4, STEPS, RATES, seeds=SEEDS, exp=exp, settings=settings)
    assert all(big.params[n].shape[1:] != small.params[n].shape[1:] for n in small.params), "nothing was padded"
    for index in range(4):
        assert_padded_matches(slot(small, index), slot(big, index), ("loss", metric), STEPS)
    first = next(iter(small.params.values()))
    assert not np.allclose(first[0], first[1]), "two seeds trained the same parameters"
    assert not np.allclose(first[0], first[2]), "two learning rates trained the same parameters"


def test_every_size_of_the_example_modules_passes_the_padding_check(module_experiments):
    """Each experiment's construction ran the padded = unpadded check (init, loss, gradient, metrics) at its
    probe config: every size stays padded."""
    for framework, (exp, _, _) in module_experiments.items():
        assert [n for n, f in exp.fields.items() if f.kind != "size"] in ([], ["n_test"]), framework


class NormedMemory(nn.Module):
    """A LayerNorm over the hidden units: its mean and variance run over every hidden unit, padded or not."""

    d: int
    width: int

    @nn.compact
    def __call__(self, x):
        return nn.Dense(self.d, use_bias=False)(nn.relu(nn.LayerNorm()(nn.Dense(self.width)(x))))


class GlorotMemory(nn.Module):
    """glorot (fan_avg) initial weights: their scale is (d + m)^(-1/2), no power of d or m."""

    d: int
    width: int

    @nn.compact
    def __call__(self, x):
        hidden = nn.Dense(self.width, kernel_init=nn.initializers.xavier_normal())(x)
        return nn.Dense(self.d, use_bias=False)(nn.relu(hidden))


@pytest.mark.parametrize(
    "module, static, reason",
    [
        (NormedMemory, {"m"}, r"m cannot be padded exactly \(loss differs from the unpadded run's"),
        (GlorotMemory, {"d", "m"}, r"d cannot be padded exactly \(the initial values of Dense_0.kernel change with d"),
    ],
)
def test_a_module_that_cannot_be_padded_exactly_runs_that_size_static(module, static, reason):
    with pytest.warns(UnpaddableWarning) as caught:
        exp = memory_from(lambda shape: module(shape["d"], shape["m"]), name="unpaddable")
    messages = [str(warning.message) for warning in caught]
    assert len(messages) == len(static) and any(re.search(reason, message) for message in messages), messages
    assert {n for n, f in exp.fields.items() if f.kind == "static"} == static
    assert {n for n, f in exp.fields.items() if f.kind == "size"} == {"d", "m", "N"} - static


@pytest.mark.slow  # 6 s; the numeric check's other case (a LayerNorm) runs in the default suite
def test_class_logits_are_padded_only_when_declared():
    """Without logits=True a padded class would score 0 and take softmax mass: N is not padded."""
    with pytest.warns(UnpaddableWarning, match=r"N cannot be padded exactly \(loss differs"):
        exp = memory_from(lambda shape: example("fig1_mlp_linen").MLP(shape["d"], shape["m"]), name="x", logits=False)
    assert exp.fields["N"].kind == "static" and exp.fields["m"].kind == "size"


def test_an_nnx_module_with_state_besides_parameters_is_refused():
    def module(shape, rngs):
        return nnx.Sequential(nnx.Linear(shape["d"], shape["m"], rngs=rngs), nnx.BatchNorm(shape["m"], rngs=rngs))

    with pytest.raises(ExperimentError, match=r"holds state other than nnx.Param \(.*mean"):
        memory_from(module, name="batchnorm")


def test_stable_keys_draw_the_same_numbers_at_every_shape():
    draws = {
        "uniform": lambda k, s: jax.random.uniform(k, s, minval=-2.0, maxval=2.0),
        "truncated_normal": lambda k, s: jax.random.truncated_normal(k, -2.0, 2.0, s),
        "randint": lambda k, s: jax.random.randint(k, s, 0, 1000),
    }
    ranks = [((5,), (9,)), ((2, 3, 4), (3, 5, 6)), ((2, 2, 3, 3), (3, 4, 5, 4))]
    cases = [(name, (3, 4), (7, 6)) for name in draws] + [("uniform", small, big) for small, big in ranks]

    @jax.jit
    def drawn(key):
        return {(name, small): (draws[name](key, small), draws[name](key, big)) for name, small, big in cases}

    for impl in (THREEFRY, HASHED):
        for (name, small), (at_small, at_big) in drawn(stable_key(jax.random.PRNGKey(3), impl)).items():
            block = tuple(slice(0, n) for n in small)
            np.testing.assert_array_equal(at_big[block], at_small, err_msg=f"{name} {small}")
    ordinary = jax.random.PRNGKey(3)  # the trap the stable key avoids
    assert not np.array_equal(jax.random.normal(ordinary, (7, 6))[:3, :4], jax.random.normal(ordinary, (3, 4)))


def test_axes_follow_the_sizes_they_grow_with():
    def dims(s):
        return {
            "kernel": (s["d"], 4 * s["m"] + 1),
            "heads": (s["h"] * s["k"],),
            "square": (s["n"] ** 2,),
            "fixed": (5, s["d"]),
        }

    axes, problems = infer_axes(dims, {"d": 3, "m": 2, "h": 2, "k": 3, "n": 2})
    assert axes["kernel"] == (Axis("d", 1, 0), Axis("m", 4, 1))
    assert axes["fixed"] == (None, Axis("d", 1, 0))
    assert set(problems) == {"h", "k", "n"}
    assert "axis 0 of heads grows with h and k at once" in problems["h"]
    assert "axis 0 of square is not n times a whole number plus a constant" in problems["n"]


def test_the_guide_shows_the_linen_example_first():
    section = (ROOT / "docs" / "guide" / "own-experiment.md").read_text()
    module = (EXAMPLES / "fig1_mlp_linen.py").read_text()
    linen = section.index(f"```python\n{module.rstrip()}\n```")
    assert linen < section.index('name="relu_teacher"'), "the flax route comes before the raw functions"
