"""Chapter 3 of the thesis (spec §2): semi-supervised node classification on the synthetic pattern
graph (γ_d, ε_S, ε_0) by the one-layer graph transformer of Eq. (3.1) with the SPD bias of Eq. (3.2),
or by the GCN of Theorem 3.4.6 (`model = "gcn"`: W_K = W_Q = 0, b = 0, a uniform mean over S^n).

One run: one graph of `n_nodes` nodes (a size: padded and masked), drawn in `init` (jittable, see
graph_generators), features x_n = μ_pattern + c0·g, a labelled set L of the first `n_labeled` nodes of
a random order (so the labelled sets of one seed nest along |L|; no array depends on |L|: it is a size
only because the engine searches sizes, and one program serves a whole search), and SGD on the hinge
loss (3.3) over minibatches of `batch` labelled nodes drawn with the step's key (with replacement;
spec B3's epochs become steps, see the README), each query aggregating over a fresh S^{n,t}
(Algorithm 4, line 3) drawn in the step. Test nodes V \\ L aggregate over one fixed draw of the same
law (spec B3). Success (L958): test hinge < 1e-3.
`same_problem_across` lists |L|, the model and the data-model knobs: the runs of one seed share every
draw across them, so GT and GCN see the same graph, labels and init, and trends along γ_d, ε_S are paired.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import optax

from jaxmem.experiments import draws
from jaxmem.experiments.interface import Costs, Experiment, size, static, traced
from jaxmem.experiments.li_thesis import graph_generators, gt_model

MODELS = ("gt", "gcn")
TEST_SETS = ("sampled", "whole")
Z = 3  # spec B4: b ∈ R³ for SPD 0, 1, 2 (only distances ≤ 2 are ever sampled)
FIELDS = {
    "n_nodes": size("graph nodes N (Sec 3.5.1: 1000)", 1000, minimum=4, maximum=draws.COLS_LIMIT),
    "n_labeled": size("|L|: labelled nodes, a nested prefix of one random order (no array has this size)"),
    "degree": traced(int, "D: links per non-discriminative node, minimum degree of a discriminative one (120)", 120),
    "k_sampled": static(int, "nodes sampled per query from N_1 ∪ N_2 per step (L956: 60)", 60, minimum=1),
    "d": static(int, "feature dimension d = m_a = m_b (L956: 20)", 20, minimum=3),
    "M": static(int, "patterns (L952: 10)", 10, minimum=3),
    "m": size("hidden neurons (L956: 400)", 400, maximum=draws.ROWS_LIMIT),
    "batch": static(int, "SGD minibatch B of labelled nodes (spec B3: 32)", 32, minimum=1),
    "model": static(str, "gt, or gcn: W_K = W_Q = 0 and b = 0 (Theorem 3.4.6, spec B9)", "gt", MODELS),
    "test_set": static(
        str, "test-time T^n: a fresh draw of the training law, or all of N_1 ∪ N_2", "sampled", TEST_SETS
    ),
    "core_only": traced(bool, "sample from N_1 only (gcn_core_only, the Theorem 3.4.6 setting)", False),
    "gamma_d": traced(float, "γ_d: fraction of discriminative nodes", 0.4, minimum=0.0),
    "eps_s": traced(float, "ε_S: fraction of a non-discriminative node's links to the other class", 0.05, minimum=0.0),
    "eps_0": traced(float, "ε_0: fraction of flipped labels (spec B8)", 0.0, minimum=0.0),
    "sigma": traced(float, "σ: value init error (Assumption B.2.1; L956: 0.1)", 0.1, minimum=0.0),
    "delta": traced(float, "δ: key/query init error (Assumption B.2.1; L956: 0.2)", 0.2, minimum=0.0),
    "xi": traced(float, "ξ: W_O init std (L956: 0.01)", 0.01, minimum=0.0),
    "c0": traced(float, "feature noise std (L952: 0.01)", 0.01, minimum=0.0),
}


def check(config) -> list[str]:
    problems = []
    if config["n_labeled"] >= config["n_nodes"]:
        problems.append(f"n_labeled = {config['n_labeled']} leaves no test node of n_nodes = {config['n_nodes']}")
    if not 0.0 < config["gamma_d"] < 1.0:
        problems.append(f"gamma_d = {config['gamma_d']} must lie in (0, 1)")
    if config["eps_s"] > 0.5:
        problems.append(f"eps_s = {config['eps_s']} must be ≤ 1/2 (the thesis's range)")
    if config["eps_0"] >= 0.5:
        problems.append(f"eps_0 = {config['eps_0']} must be < 1/2")
    if config["M"] > config["d"]:
        problems.append(f"M = {config['M']} orthonormal patterns need d ≥ M, got d = {config['d']}")
    return problems


def init(key, shape, dyn):
    """The graph, features, the labelled order, the fixed output layer a, the evaluation key, and the
    initial (W_O, W_V, W_K, W_Q, b)."""
    size_n, d = shape["n_nodes"], shape["d"]
    graph = graph_generators.pattern_graph(
        jax.random.fold_in(key, 1), size_n, dyn["n_nodes"], dyn["gamma_d"], dyn["eps_s"], dyn["eps_0"],
        dyn["degree"], shape["M"],
    )  # fmt: skip
    active = graph["pattern"] >= 0
    (g,) = draws.normal_matrices(jax.random.fold_in(key, 2), [(size_n, d)])
    (u,) = draws.uniform_matrices(jax.random.fold_in(key, 3), [(size_n, 1)])
    x = jnp.where(active[:, None], jnp.eye(shape["M"], d)[graph["pattern"]] + dyn["c0"] * g, 0.0)
    by_rank = jnp.argsort(jnp.where(active, u[:, 0], jnp.inf))
    params, a = gt_model.init(jax.random.fold_in(key, 4), shape["m"], d, shape["M"], dyn["m"], Z, dyn)
    problem = {
        "x": x,
        "y": graph["y"],
        "pattern": graph["pattern"],
        "relevant_pattern": jnp.where(graph["y_clean"] > 0, 0, 1),
        "spd": graph["spd"],
        "by_rank": by_rank,
        "label_rank": jnp.argsort(by_rank),
        "a": a,
        "eval_key": jax.random.fold_in(key, 5),
    }
    return params, problem


def predict(params, problem, shape, dyn, queries, uniforms=None):
    """F and the aggregation sets of `queries`: sampled with the uniforms (q, n_nodes), or, without
    them, every candidate."""
    spd = problem["spd"]
    if uniforms is None:
        nodes, valid = gt_model.whole_neighbourhood(queries, spd[queries], dyn["core_only"])
    else:
        nodes, valid = gt_model.sample_neighbours(queries, spd[queries], uniforms, shape["k_sampled"], dyn["core_only"])
    f, att = gt_model.forward(params, problem["a"], problem["x"], spd, queries, nodes, valid, shape["model"] == "gt")
    return f, att, nodes, valid


def loss(params, problem, shape, dyn, key):
    """Hinge loss (3.3) on `batch` labelled nodes drawn by `key`, each over a fresh S^{n,t}."""
    pick = jax.random.randint(key, (shape["batch"],), 0, dyn["n_labeled"])
    queries = problem["by_rank"][pick]
    (u,) = draws.uniform_matrices(jax.random.fold_in(key, 1), [(shape["batch"], shape["n_nodes"])])
    f, *_ = predict(params, problem, shape, dyn, queries, u)
    return jnp.mean(gt_model.hinge(f, problem["y"][queries]))


def masked_mean(values, mask):
    """Mean over `mask`; NaN for an empty mask."""
    return jnp.sum(jnp.where(mask, values, 0.0)) / jnp.sum(mask)


def evaluate(params, problem, shape, dyn) -> dict:
    """Hinge loss on L and on V \\ L, test 0-1 error, the attention on class-relevant nodes (Fig 3.5)
    over labelled, labelled non-discriminative and test nodes, and the PE bias b (Lemma 3.4.7)."""
    size_n = shape["n_nodes"]
    (u,) = (
        draws.uniform_matrices(problem["eval_key"], [(size_n, size_n)]) if shape["test_set"] == "sampled" else (None,)
    )
    f, att, nodes, valid = predict(params, problem, shape, dyn, jnp.arange(size_n), u)
    y, pattern = problem["y"], problem["pattern"]
    mass = gt_model.relevant_mass(att, nodes, valid, pattern, problem["relevant_pattern"])
    hinge = gt_model.hinge(f, y)
    labeled = (problem["label_rank"] < dyn["n_labeled"]) & (pattern >= 0)
    test = ~labeled & (pattern >= 0)
    b = params["b"]
    return {
        "loss": masked_mean(hinge, labeled),
        "test_loss": masked_mean(hinge, test),
        "test_error": masked_mean(y * f <= 0.0, test),
        "attention": masked_mean(mass, labeled),
        "attention_nd": masked_mean(mass, labeled & (pattern >= 2)),
        "attention_test": masked_mean(mass, test),
        "b_self": b[0],
        "b_core": b[1],
        "b_far": b[2],
        "pe_core_top": ((b[1] > b[0]) & (b[1] > b[2])).astype(jnp.float32),
    }


def optimizer(dyn):
    """Plain SGD (Algorithm 4)."""
    return optax.sgd(dyn["lr"])


def flops_per_step(c) -> float:
    """Forward + backward of one minibatch (spec §2.8's cost model: ≈ 0.5 MFLOP per labelled node at
    the paper's sizes) plus the sampling's ranking of one row of N per query."""
    per_query = (c["k_sampled"] + 1) * 3 * 2 * c["d"] ** 2 + 2 * c["m"] * c["d"]
    return c["batch"] * (3.0 * per_query + 4.0 * c["n_nodes"])


EXPERIMENT = Experiment(
    name="gt_node_classification",
    doc="One-layer graph transformer with SPD bias (Eq. 3.1) or GCN on the pattern graph (H. Li thesis ch. 3)",
    fields=FIELDS,
    init=init,
    loss=loss,
    evaluate=evaluate,
    metrics=(
        "loss",
        "test_loss",
        "test_error",
        "attention",
        "attention_nd",
        "attention_test",
        "b_self",
        "b_core",
        "b_far",
        "pe_core_top",
    ),  # fmt: skip
    optimizer=optimizer,
    check=check,
    costs=Costs(params=lambda c: c["m"] * c["d"] + 3 * c["d"] ** 2 + Z, flops_per_step=flops_per_step),
    same_problem_across=("n_labeled", "model", "core_only", "gamma_d", "eps_s", "eps_0", "m", "sigma", "delta"),
)
