"""Chapter 5 of the thesis (spec Appendix A): a three-layer GCN (Eq. 5.4) trained with graph topology
sampling on a two-group graph, regression labels of Eq. (5.20), relative MSE on held-out nodes.

One run: a configuration-model graph (spec A.7 [REC], jittable: a random permutation of stubs) of
`n_nodes` nodes, the first `n1` of degree d1, the others of degree d2; features X and the target
network's W*, C* with entries N(0, 1); labels y = (sin(ÂXW*) ⊙ tanh(ÂXW*)) C* with Â = A P̂ (P̂_ii = p̂_l
of the node's group: E5.1 sets p̂ = p* so that Â = A*, E5.2 varies p̂ as the three datasets); the
labelled set Ω = the first `n_omega` nodes of a random order (nested along |Ω|); the practical
algorithm of spec A.5.2: plain SGD (η = 1e-3), minibatches of 5 labelled nodes, inverted dropout on
both hidden ReLU outputs, one sampled A^s per step used in all three layers, T = 4|Ω| steps (a
per-run budget: the sweeps' `steps = "4 * n_omega"`). Prediction with A* (spec A.9-4).

Dense (N × N) adjacency: a step costs ≈ 3(N² m + N m²) FLOPs, accelerator-sized at the paper's N = 2000,
m = 500 (the `--dry-run` shows it); the quick presets use N = 400 and m ≤ 64 (README).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import optax

from jaxmem.experiments import draws
from jaxmem.experiments.interface import Costs, Experiment, size, static, traced
from jaxmem.experiments.li_thesis import gcn_model, graph_generators

FIELDS = {
    "n_nodes": size("graph nodes N (Sec 5.4: 2000)", 2000, minimum=4, maximum=draws.COLS_LIMIT),
    "n1": traced(int, "nodes of group 1 (Sec 5.4: 100 unbalanced, 1000 balanced)", 100, minimum=1),
    "d1": traced(int, "stubs per group-1 node (degree ≈ d1)", 10, minimum=0),
    "d2": traced(int, "stubs per group-2 node (degree ≈ d2)", 1, minimum=0),
    "n_omega": traced(int, "|Ω|: labelled nodes (a nested prefix of one random order)", minimum=1),
    "m": size("hidden neurons m1 = m2 (Sec 5.4.1: 500)", 500, maximum=draws.COLS_LIMIT),
    "d": static(int, "feature dimension (Sec 5.4: 10)", 10, minimum=1),
    "p": static(int, "target width of W* (Sec 5.4: 10)", 10, minimum=1),
    "K": static(int, "outputs (Sec 5.4: 2)", 2, minimum=1),
    "batch": static(int, "SGD minibatch (Sec 5.4: 5)", 5, minimum=1),
    "sampler": traced(str, "topology sampler (gcn_model.SAMPLERS)", "groupwise", gcn_model.SAMPLERS),
    "frac": traced(float, "S_l / N_l (Sec 5.4: 0.9); FastGCN: draws / N", 0.9, minimum=0.0),
    "p1": traced(float, "p*_1 of group 1 (Sec 5.4.1: 0.7)", 0.7, minimum=0.0),
    "p2": traced(float, "p*_2 of group 2 (Sec 5.4.1: 0.3)", 0.3, minimum=0.0),
    "p_hat1": traced(float, "p̂_1 of the labels' Â = A P̂ (E5.1: = p*_1)", 0.7, minimum=0.0),
    "p_hat2": traced(float, "p̂_2 of the labels' Â = A P̂ (E5.1: = p*_2)", 0.3, minimum=0.0),
    "dropout": traced(float, "dropout rate on both hidden layers (Sec 5.4: 0.4)", 0.4, minimum=0.0),
    "c_scale": traced(float, "scale of the fixed C ~ N(0, 1) (spec A.9-10)", 1.0, minimum=0.0),
}
DERIVED = {"stubs": size("stubs of the configuration model: n1 d1 + (N − n1) d2", minimum=2)}


def resolve(config) -> dict:
    return {**config, "stubs": max(2, config["n1"] * config["d1"] + (config["n_nodes"] - config["n1"]) * config["d2"])}


def check(config) -> list[str]:
    problems = []
    if config["n1"] >= config["n_nodes"]:
        problems.append(f"n1 = {config['n1']} leaves no group-2 node of n_nodes = {config['n_nodes']}")
    if config["n_omega"] >= config["n_nodes"]:
        problems.append(f"n_omega = {config['n_omega']} leaves no test node of n_nodes = {config['n_nodes']}")
    if not 0.0 < config["frac"] <= 1.0:
        problems.append(f"frac = {config['frac']} must lie in (0, 1]")
    if config["dropout"] >= 1.0:
        problems.append(f"dropout = {config['dropout']} must be < 1")
    return problems


def init(key, shape, dyn):
    """The graph and its A, A*; X, W*, C* and the labels; the labelled order; the fixed B_1, B_2, C and
    the initial W, V (spec A.2: W ~ N(0, 1/m), V ~ N(0, 1/m), b_l ~ N(0, I/m), C ~ N(0, 1))."""
    size_n, m, d = shape["n_nodes"], shape["m"], shape["d"]
    active = draws.active_mask(size_n, dyn["n_nodes"])
    group1 = draws.active_mask(size_n, dyn["n1"])
    links = graph_generators.configuration_model(
        jax.random.fold_in(key, 1), size_n, shape["stubs"], dyn["n_nodes"], dyn["n1"], dyn["d1"], dyn["d2"]
    )
    adjacency = graph_generators.normalized_adjacency(links, dyn["n_nodes"])
    x, w_star, c_star, g_w, g_v, g_b, g_c = draws.normal_matrices(
        jax.random.fold_in(key, 2),
        [(size_n, d), (d, shape["p"]), (shape["p"], shape["K"]), (d, m), (m, m), (2, m), (m, shape["K"])],
    )
    x = jnp.where(active[:, None], x, 0.0)
    p_hat = jnp.where(active, gcn_model.group_scale(group1, dyn["p_hat1"], dyn["p_hat2"]), 0.0)
    y = jnp.where(active[:, None], gcn_model.targets(adjacency * p_hat[None, :], x, w_star, c_star), 0.0)
    (u,) = draws.uniform_matrices(jax.random.fold_in(key, 3), [(size_n, 1)])
    by_rank = jnp.argsort(jnp.where(active, u[:, 0], jnp.inf))
    width = draws.active_mask(m, dyn["m"])
    std = 1.0 / jnp.sqrt(dyn["m"])
    params = {
        "w": jnp.where(width[None, :], std * g_w, 0.0),
        "v": jnp.where(width[:, None] & width[None, :], std * g_v, 0.0),
    }
    fixed = {
        "b1": jnp.where(width, std * g_b[0], 0.0),
        "b2": jnp.where(width, std * g_b[1], 0.0),
        "c": jnp.where(width[:, None], dyn["c_scale"] * g_c, 0.0),
    }
    problem = {
        "adjacency": adjacency,
        "a_star": gcn_model.effective_adjacency(adjacency, active, group1, dyn["sampler"], dyn["p1"], dyn["p2"]),
        "active": active,
        "group1": group1,
        "x": x,
        "y": y,
        "by_rank": by_rank,
        "label_rank": jnp.argsort(by_rank),
        "fixed": fixed,
    }
    return params, problem


def dropout_masks(key, shape, rate):
    """Inverted-dropout keep masks (two (N, m) arrays scaled by 1/(1 − rate))."""
    u = draws.uniform_matrices(key, [(shape["n_nodes"], shape["m"])] * 2)
    return [jnp.where(v >= rate, 1.0 / (1.0 - rate), 0.0) for v in u]


def loss(params, problem, shape, dyn, key):
    """Squared error (Sec 5.4: ℓ2 regression) on `batch` labelled nodes drawn by `key`, through one
    sampled A^s and dropout."""
    pick = jax.random.randint(key, (shape["batch"],), 0, dyn["n_omega"])
    rows = problem["by_rank"][pick]
    sampled = gcn_model.sampled_adjacency(
        jax.random.fold_in(key, 1), problem["adjacency"], problem["active"], problem["group1"],
        dyn["sampler"], dyn["frac"], dyn["p1"], dyn["p2"],
    )  # fmt: skip
    masks = dropout_masks(jax.random.fold_in(key, 2), shape, dyn["dropout"])
    f = gcn_model.forward(params, problem["fixed"], sampled, problem["x"], rows, masks)
    return jnp.mean(jnp.sum((f - problem["y"][rows]) ** 2, axis=-1))


def evaluate(params, problem, shape, dyn) -> dict:
    """Training MSE on Ω, relative MSE and MSE on the held-out nodes (spec A.7 [REC]), predicting with
    A*; ‖A‖∞ and ‖A*‖∞ of the run's graph (the theory's variable, spec A.7)."""
    size_n = shape["n_nodes"]
    f = gcn_model.forward(params, problem["fixed"], problem["a_star"], problem["x"], jnp.arange(size_n))
    y, active = problem["y"], problem["active"]
    error = jnp.sum((f - y) ** 2, axis=-1)
    labelled = (problem["label_rank"] < dyn["n_omega"]) & active
    test = active & ~labelled
    return {
        "loss": jnp.sum(jnp.where(labelled, error, 0.0)) / jnp.sum(labelled),
        "test_error": jnp.sum(jnp.where(test, error, 0.0)) / jnp.sum(jnp.where(test, jnp.sum(y**2, axis=-1), 0.0)),
        "test_mse": jnp.sum(jnp.where(test, error, 0.0)) / jnp.sum(test),
        "a_inf": jnp.max(jnp.sum(jnp.abs(problem["adjacency"]), axis=1)),
        "a_star_inf": jnp.max(jnp.sum(jnp.abs(problem["a_star"]), axis=1)),
    }


def optimizer(dyn):
    """Plain SGD (spec A.5.2)."""
    return optax.sgd(dyn["lr"])


def flops_per_step(c) -> float:
    """Forward + backward of the dense three-layer GCN: two N × N products per layer width (N² d + N² m)
    plus N m² for V, ×3; the sampler's and dropout's O(N m) are small beside them."""
    n, m = c["n_nodes"], c["m"]
    return 3.0 * 2.0 * (n * n * (c["d"] + m) + n * c["d"] * m + n * m * m)


EXPERIMENT = Experiment(
    name="gcn_sampling",
    doc="Three-layer GCN (Eq. 5.4) with graph topology sampling on a two-group graph (H. Li thesis ch. 5)",
    fields=FIELDS,
    derived=DERIVED,
    init=init,
    loss=loss,
    evaluate=evaluate,
    metrics=("loss", "test_error", "test_mse", "a_inf", "a_star_inf"),
    optimizer=optimizer,
    resolve=resolve,
    check=check,
    costs=Costs(params=lambda c: c["d"] * c["m"] + c["m"] ** 2, flops_per_step=flops_per_step),
    same_problem_across=("n_omega", "m", "sampler", "frac", "p1", "p2", "p_hat1", "p_hat2", "dropout", "c_scale"),
)
