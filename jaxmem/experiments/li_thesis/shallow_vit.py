"""Chapter 2 of the thesis (spec §1): the shallow ViT of Eq. (2.1) learning the pattern data model
from n samples by minibatch SGD on the hinge loss (Algorithm 3, A.6), or the "3-layer CNN" of Prop. 1
(`model = "cnn"`: the same network with W_K, W_Q frozen at their initialisation).

One run: a training set of n samples (padded to the bucket's n and masked; the sets of one seed nest
along n), a held-out test set of n_test samples, and SGD with minibatches of `batch` samples drawn
uniformly (with replacement) from the first n using the step's key: the engine hands the loss a key,
not the step, so the spec's shuffled epochs (A15) are replaced by independent draws. Success
(Sec 2.4.1): test hinge loss < 1e-3. Every trial of the thesis is a seed here: data, init and
minibatches all come from the run's key. `same_problem_across` lists n, m, model and the data-model
knobs (they transform the same draws): the runs of one seed share their draws across them, so the ViT
and the CNN see the same data and init, and trends along α*, σ or r are paired comparisons.
float32 (the engine's precision; the spec says Ch2 is fine in float32).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import optax

from jaxmem.experiments import draws
from jaxmem.experiments.interface import Costs, Experiment, size, static, traced
from jaxmem.experiments.li_thesis import patterns, sparsify, vit

MODELS = ("vit", "cnn")
FIELDS = {
    "d": static(int, "token dimension d = m_a = m_b (Sec 2.4.1: 10)", 10, minimum=3),
    "M": static(int, "patterns: μ_1, μ_2 discriminative, μ_3..μ_M not (Sec 2.4.1: 5)", 5, minimum=3),
    "L": static(int, "tokens per sample |S^n| before sparsification", minimum=2),
    "m": size("hidden neurons (Sec 2.4.1: 1000)", 1000, maximum=draws.ROWS_LIMIT),
    "n": size("training samples (a nested prefix of one training set)", maximum=draws.COLS_LIMIT),
    "n_test": static(int, "held-out samples (spec A4: 1000)", 1000, minimum=1),
    "batch": static(int, "SGD minibatch B (spec A4: 16)", 16, minimum=1),
    "model": static(str, "vit, or cnn: W_K and W_Q frozen at init (Prop. 1)", "vit", MODELS),
    "alpha": traced(float, "α*: fraction of label-relevant tokens", minimum=0.0),
    "alpha_conf": traced(float, "α#: fraction of confusion tokens", minimum=0.0),
    "composition": traced(str, "per-sample composition (spec A5)", "iid", patterns.COMPOSITIONS),
    "sigma": traced(float, "σ: value-embedding init error (Assumption 2.3.1)", 0.1, minimum=0.0),
    "delta": traced(float, "δ: key/query init error (Assumption 2.3.1)", 0.2, minimum=0.0),
    "xi": traced(float, "ξ: W_O init std (Sec 2.4.1: 0.01)", 0.01, minimum=0.0),
    "c0": traced(float, "token noise std (Sec 2.4.1: 0.01)", 0.01, minimum=0.0),
    "c_big": traced(float, "noise std of the highly noisy tokens (E2.6)", 0.15, minimum=0.0),
    "noisy_frac": traced(float, "fraction of highly noisy tokens (E2.6)", 0.0, minimum=0.0),
    "removed": traced(int, "tokens removed per sample (E2.6)", 0, minimum=0),
    "removal": traced(str, "which tokens go (E2.6)", "random", sparsify.STRATEGIES),
}


def check(config) -> list[str]:
    problems = []
    if config["alpha"] + config["alpha_conf"] > 1.0:
        problems.append(f"α* + α# = {config['alpha'] + config['alpha_conf']} > 1")
    if config["alpha"] <= config["alpha_conf"]:
        problems.append(
            f"α* = {config['alpha']} must exceed α# = {config['alpha_conf']} (the label is a majority vote)"
        )
    if config["removed"] >= config["L"]:
        problems.append(f"removed = {config['removed']} leaves no token of L = {config['L']}")
    if config["M"] > config["d"]:
        problems.append(f"M = {config['M']} orthonormal patterns need d ≥ M, got d = {config['d']}")
    return problems


def data(key, count: int, shape, dyn) -> dict:
    """`count` samples of the pattern model with their kept-token mask."""
    out = patterns.sample(key, count, shape["L"], shape["d"], shape["M"], dyn)
    return {**out, "keep": sparsify.keep_mask(out, dyn["removed"], dyn["removal"])}


def init(key, shape, dyn):
    """Training set, test set, the fixed output layer a and the initial (W_O, W_V, W_K, W_Q)."""
    train = data(jax.random.fold_in(key, 1), shape["n"], shape, dyn)
    test = data(jax.random.fold_in(key, 2), shape["n_test"], shape, dyn)
    params, a = vit.init(jax.random.fold_in(key, 3), shape["m"], shape["d"], shape["M"], dyn["m"], dyn)
    problem = {"train": {k: train[k] for k in ("x", "y", "role", "keep")}, "test": test, "a": a}
    if shape["model"] == "cnn":
        problem["frozen"] = {"w_k": params["w_k"], "w_q": params["w_q"]}
    return params, problem


def effective(params, problem, shape):
    """The parameters the forward pass uses: the CNN's W_K, W_Q are the frozen init (no gradient)."""
    return {**params, **problem["frozen"]} if shape["model"] == "cnn" else params


def loss(params, problem, shape, dyn, key):
    """Mean hinge loss (2.2) on a minibatch of `batch` samples drawn from the first n by `key`."""
    pick = jax.random.randint(key, (shape["batch"],), 0, dyn["n"])
    batch = jax.tree.map(lambda v: v[pick], problem["train"])
    f, _ = vit.forward(effective(params, problem, shape), problem["a"], batch["x"], batch["keep"])
    return jnp.mean(vit.hinge(f, batch["y"]))


def evaluate(params, problem, shape, dyn) -> dict:
    """Train and test hinge loss, test 0-1 error, the smallest training margin and the attention mass
    on label-relevant tokens (2.15) over training and test samples."""
    p = effective(params, problem, shape)
    metrics = {}
    for name, part in (("train", problem["train"]), ("test", problem["test"])):
        f, att = vit.forward(p, problem["a"], part["x"], part["keep"])
        mass = vit.relevant_mass(att, part["role"] == patterns.RELEVANT, part["keep"])
        metrics[name] = (vit.hinge(f, part["y"]), part["y"] * f, mass)
    active = draws.active_mask(shape["n"], dyn["n"])
    train_loss, train_margin, train_mass = metrics["train"]
    test_loss, test_margin, test_mass = metrics["test"]
    return {
        "loss": jnp.sum(jnp.where(active, train_loss, 0.0)) / dyn["n"],
        "test_loss": jnp.mean(test_loss),
        "test_error": jnp.mean(test_margin <= 0.0),
        "min_margin": jnp.min(jnp.where(active, train_margin, jnp.inf)),
        "attention": jnp.sum(jnp.where(active, train_mass, 0.0)) / dyn["n"],
        "attention_test": jnp.mean(test_mass),
    }


def optimizer(dyn):
    """Plain SGD (A.6): no momentum, no weight decay."""
    return optax.sgd(dyn["lr"])


def flops_per_step(c) -> float:
    """Forward + backward of one minibatch (spec §1.8's cost model)."""
    return 3.0 * c["batch"] * (2 * c["m"] * c["d"] * c["L"] + 4 * c["L"] ** 2 * c["d"] + 6 * c["L"] * c["d"] ** 2)


EXPERIMENT = Experiment(
    name="shallow_vit",
    doc="Shallow ViT (Eq. 2.1) or frozen-attention CNN on the pattern data model (H. Li thesis ch. 2)",
    fields=FIELDS,
    init=init,
    loss=loss,
    evaluate=evaluate,
    metrics=("loss", "test_loss", "test_error", "min_margin", "attention", "attention_test"),
    optimizer=optimizer,
    check=check,
    costs=Costs(params=lambda c: c["m"] * c["d"] + 3 * c["d"] ** 2, flops_per_step=flops_per_step),
    same_problem_across=("n", "m", "model", "alpha", "alpha_conf", "sigma", "delta", "removed", "removal"),
)
