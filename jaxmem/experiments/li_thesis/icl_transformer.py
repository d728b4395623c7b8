"""Chapter 6 of the thesis (spec Part B): a one-layer transformer (6.2) trained by SGD on the hinge loss
(Subroutine 2: a fresh batch of B prompts of l_tr contexts each step, tasks from T_tr, training α) and
tested in context on unseen in-domain tasks and on out-of-domain patterns (α', l_ts, K', S_1).

Everything that is only read at test time — l_ts (a size: contexts past it are masked), α', S_1, K',
the pruning rate and order — is read from `dyn` by `evaluate`, whose test prompts are drawn afresh from
a key fixed at init: one trained model is evaluated at any of their values without retraining (the
engine's `[final_eval]` axes), and prompts of one run nest along l_ts. Metrics: the training-
distribution hinge loss (`loss`), 0-1 error and hinge on unseen in-domain tasks (`id_*`, B.7) and out of
domain (`ood_*`), the attention mass on N* (Cor 6.4.3), Prop 6.4.1's norms and projections of W_Q
p_query and W_K p_i on OOD prompts (Fig 6.2a), Prop 6.4.5's neuron alignments (Fig 6.2c,d), the
fraction of small-magnitude neurons (Thm 6.3.7), and with `baselines = true` the classical learners of
Fig 6.4 fitted on each test prompt's contexts (`icl_learners`). OOD metrics are NaN when M1 < 6.
`val_error` is the in-domain error on n_val further unseen-task prompts from a stream of their own
(NaN when n_val = 0): a sweep that stops early stops on it and judges the final `id_error`, so no
verdict selects on its own test prompts.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import optax

from jaxmem.experiments import draws
from jaxmem.experiments.interface import Costs, Experiment, size, static, traced
from jaxmem.experiments.li_thesis import icl_learners, icl_model, icl_task

EVAL_STREAMS = {"train": 0, "id": 1, "ood": 2}
VAL_STREAM = 3  # the validation prompts' stream of the evaluation key: in-domain, unseen tasks, as "id"
FIELDS = {
    "dx": static(int, "d_x, pattern space (B.7: 30)", 30, minimum=4),
    "dy": static(int, "d_y, label embedding space (B.7: 30)", 30, minimum=1),
    "M1": static(int, "relevant patterns M1 (B.7: 6); M2 = d_x − M1", 6, minimum=3),
    "m": static(int, "MLP width (B.11-3: 128)", 128, minimum=2),
    "batch": static(int, "prompts per SGD step B (B.11-3: 32)", 32, minimum=1),
    "n_test": static(int, "test prompts per evaluation set", 512, minimum=1),
    "n_val": static(int, "in-domain validation prompts (early stopping); 0: none, val_error NaN", 0, minimum=0),
    "ood_irrelevant": static(int, "M2': ODI patterns ν'_k = ν_k (B.11-6: 3)", 3, minimum=1),
    "baselines": static(bool, "also fit the classical learners of Fig 6.4 on every test prompt", False),
    "beta": traced(float, "β, pattern norm (B.7: 3)", 3.0, minimum=0.0),
    "noise": traced(float, "K: κ ~ U(−K, K) in domain (B.7: 0.5)", 0.5, minimum=0.0),
    "ood_noise": traced(float, "K': κ' ~ U(−K', K') out of domain (B.7: 5)", 5.0, minimum=0.0),
    "s1": traced(float, "S_1 = a + b of μ'_1 (B.7: a = b = 0.64, S_1 = 1.28)", 1.28),
    "delta": traced(float, "δ, attention and value init (B.11-3: 0.2)", 0.2, minimum=0.0),
    "alpha": traced(float, "training α: share of contexts on the decisive patterns (B.7: 0.8)", 0.8, minimum=0.0),
    "alpha_test": traced(float, "test α' (test time)", 0.8, minimum=0.0),
    "n_train_tasks": traced(int, "#T_tr: the first tasks of icl_task.ordered_pairs (B.7: M1)", 6, minimum=1),
    "l_tr": size("training prompt length (B.7: 20)", 20, maximum=draws.ROWS_LIMIT),
    "l_ts": size("test prompt length (test time: masks contexts past it)", 20, maximum=draws.ROWS_LIMIT),
    "prune_rate": traced(float, "share of output neurons pruned at test (B.5)", 0.0, minimum=0.0),
    "prune_order": traced(
        str, "which neurons go first: smallest ‖r_i‖, largest, random", "small", icl_model.PRUNE_ORDERS
    ),
}


def check(config) -> list[str]:
    problems = []
    m1, dx = config["M1"], config["dx"]
    if dx <= m1:
        problems.append(f"d_x = {dx} must exceed M1 = {m1} (M2 = d_x − M1 irrelevant patterns)")
    if config["ood_irrelevant"] > dx - m1:
        problems.append(f"ood_irrelevant = {config['ood_irrelevant']} exceeds M2 = {dx - m1}")
    if config["n_train_tasks"] >= m1 * (m1 - 1):
        problems.append(f"n_train_tasks = {config['n_train_tasks']} leaves no unseen task of {m1 * (m1 - 1)}")
    for name in ("alpha", "alpha_test", "prune_rate"):
        if config[name] > 1.0:
            problems.append(f"{name} = {config[name]} must be at most 1")
    if abs(config["s1"]) > icl_task.S1_MAX:
        problems.append(f"|s1| = {abs(config['s1'])} exceeds √1.64 = {icl_task.S1_MAX:.4f} (a² + b² = 0.82)")
    return problems


def patterns(shape, dyn) -> dict:
    """The pattern matrices and task lists of the three prompt sets (OOD only when M1 ≥ 6)."""
    out = {
        "relevant": icl_task.relevant_patterns(shape["M1"], shape["dx"], dyn["beta"]),
        "irrelevant": icl_task.irrelevant_patterns(shape["M1"], shape["dx"], dyn["beta"]),
    }
    if shape["M1"] >= icl_task.OOD_MIN_M1:
        out["ood"] = icl_task.ood_patterns(shape["M1"], shape["dx"], dyn["beta"], dyn["s1"])
    return out


def prompt_set(which: str, key, count: int, problem, shape, dyn) -> dict:
    """Prompts of the training distribution ("train", l_tr contexts), of the unseen in-domain tasks
    ("id", l_ts) or out of domain ("ood", l_ts), with their context mask."""
    pats, m1 = patterns(shape, dyn), shape["M1"]
    n_tasks, total = dyn["n_train_tasks"], m1 * (m1 - 1)
    length, active = ("l_tr", dyn["l_tr"]) if which == "train" else ("l_ts", dyn["l_ts"])
    if which == "ood":
        args = (pats["ood"], pats["irrelevant"], shape["ood_irrelevant"], problem["ood_pairs"], (0, 6))
        noise, alpha = dyn["ood_noise"], dyn["alpha_test"]
    else:
        tasks = (0, n_tasks) if which == "train" else (n_tasks, total)
        args = (pats["relevant"], pats["irrelevant"], shape["dx"] - m1, problem["pairs"], tasks)
        noise, alpha = dyn["noise"], dyn["alpha"] if which == "train" else dyn["alpha_test"]
    out = icl_task.prompts(key, count, shape[length], *args, alpha, noise, shape["dy"])
    out["mask"] = jnp.broadcast_to(draws.active_mask(shape[length], active), out["same"].shape)
    out["xdr"] = args[0][out["pattern"]] / dyn["beta"]
    return out


def init(key, shape, dyn):
    """Initial parameters; the problem: a, the task order, the OOD tasks, the test key, pruning uniforms."""
    params, a = icl_model.init(
        jax.random.fold_in(key, 1), shape["m"], shape["dx"] + shape["dy"], shape["dx"], dyn["delta"]
    )
    (u,) = draws.uniform_matrices(jax.random.fold_in(key, 2), [(1, shape["m"])])
    problem = {
        "a": a,
        "pairs": icl_task.ordered_pairs(shape["M1"], jax.random.fold_in(key, 3)),
        "ood_pairs": icl_task.ordered_pairs(icl_task.OOD_PATTERNS, jax.random.fold_in(key, 4)),
        "eval_key": jax.random.fold_in(key, 5),
        "prune_u": u[0],
    }
    return params, problem


def outputs(params, a, data):
    """F and the attention weights of every prompt of a set."""
    return jax.vmap(icl_model.forward, in_axes=(None, None, 0, 0, 0))(
        params, a, data["contexts"], data["query"], data["mask"]
    )


def loss(params, problem, shape, dyn, key):
    """Mean hinge loss on a fresh batch of B training prompts (Subroutine 2)."""
    data = prompt_set("train", key, shape["batch"], problem, shape, dyn)
    f, _ = outputs(params, problem["a"], data)
    return jnp.mean(icl_model.hinge(f, data["z"]))


def set_metrics(name: str, params, a, data) -> dict:
    """0-1 error (a tie counts as an error), hinge loss and attention mass on N* of one prompt set."""
    f, attn = outputs(params, a, data)
    return {
        f"{name}_error": jnp.mean(data["z"] * f <= 0.0),
        f"{name}_hinge": jnp.mean(icl_model.hinge(f, data["z"])),
        f"{name}_attention": jnp.mean(jnp.sum(attn * data["same"], axis=-1)),
    }


def projection_metrics(params, data, dx: int) -> dict:
    """Prop 6.4.1 / Fig 6.2a: mean ‖W_Q p_query‖ and |[XDR(p_query)/β; 0]ᵀ W_Q p_query|, the same for
    W_K p_i over the active contexts (m_a = D, so the projection is a dot product)."""
    q = data["query"] @ params["w_q"].T
    k = data["contexts"] @ params["w_k"].T
    mask = data["mask"]
    k_norm = jnp.linalg.norm(k, axis=-1)
    k_proj = jnp.abs(jnp.sum(k[..., :dx] * data["xdr"][:, 1:], axis=-1))
    return {
        "wq_norm": jnp.mean(jnp.linalg.norm(q, axis=-1)),
        "wq_proj": jnp.mean(jnp.abs(jnp.sum(q[:, :dx] * data["xdr"][:, 0], axis=-1))),
        "wk_norm": jnp.sum(k_norm * mask) / jnp.sum(mask),
        "wk_proj": jnp.sum(k_proj * mask) / jnp.sum(mask),
    }


def cosine(u, v):
    return jnp.sum(u * v, axis=-1) / jnp.maximum(jnp.linalg.norm(u, axis=-1) * jnp.linalg.norm(v, axis=-1), 1e-30)


def neuron_metrics(params, a, relevant, dx: int) -> dict:
    """Prop 6.4.5 / Fig 6.2c,d over the large neurons L (‖r_i‖ ≥ half the median): mean ‖r_{i,dx}‖,
    cos(r_{i,dx}, μ̄), ‖r_{i,dy}‖, cos(r_{i,dy}, sign(a_i) q); and the share of small neurons (Thm 6.3.7)."""
    rows = icl_model.neuron_rows(params)
    norms = jnp.linalg.norm(rows, axis=-1)
    large = norms >= 0.5 * jnp.median(norms)
    r_dx, r_dy = rows[:, :dx], rows[:, dx:]
    q_e = jnp.zeros_like(r_dy).at[:, 0].set(jnp.sign(a))

    def mean_large(v):
        return jnp.sum(v * large) / jnp.maximum(jnp.sum(large), 1)

    return {
        "r_dx_norm": mean_large(jnp.linalg.norm(r_dx, axis=-1)),
        "cos_mu": mean_large(cosine(r_dx, jnp.mean(relevant, axis=0)[None])),
        "r_dy_norm": mean_large(jnp.linalg.norm(r_dy, axis=-1)),
        "cos_q": mean_large(cosine(r_dy, q_e)),
        "small_fraction": 1.0 - jnp.mean(large),
    }


def evaluate(params, problem, shape, dyn) -> dict:
    """All metrics of the (pruned, at test) model on prompts drawn from the fixed test key."""
    key, count, dx = problem["eval_key"], shape["n_test"], shape["dx"]
    norms = jnp.linalg.norm(icl_model.neuron_rows(params), axis=-1)
    keep = icl_model.prune_keep(norms, dyn["prune_rate"], dyn["prune_order"], problem["prune_u"])
    a_test = problem["a"] * keep
    has_ood = shape["M1"] >= icl_task.OOD_MIN_M1
    names = EVAL_STREAMS if has_ood else {n: s for n, s in EVAL_STREAMS.items() if n != "ood"}
    sets = {n: prompt_set(n, jax.random.fold_in(key, s), count, problem, shape, dyn) for n, s in names.items()}
    train = set_metrics("train", params, problem["a"], sets["train"])
    metrics = {"loss": train["train_hinge"], "train_error": train["train_error"]}
    metrics |= set_metrics("id", params, a_test, sets["id"])
    metrics |= neuron_metrics(params, problem["a"], patterns(shape, dyn)["relevant"], dx)
    if shape["n_val"]:
        val = prompt_set("id", jax.random.fold_in(key, VAL_STREAM), shape["n_val"], problem, shape, dyn)
        metrics["val_error"] = set_metrics("val", params, a_test, val)["val_error"]
    if has_ood:
        metrics |= set_metrics("ood", params, a_test, sets["ood"])
        metrics |= projection_metrics(params, sets["ood"], dx)
    if shape["baselines"]:
        for name in ("id", "ood") if has_ood else ("id",):
            metrics |= icl_learners.errors(name, sets[name], dx)
    return {k: metrics.get(k, jnp.array(jnp.nan)) for k in METRICS}


def optimizer(dyn):
    """Plain SGD (E.2)."""
    return optax.sgd(dyn["lr"])


def flops_per_step(c) -> float:
    """Forward + backward (3×) of B prompts: keys, values, scores and the MLP on l_tr + 1 tokens."""
    dim = c["dx"] + c["dy"]
    return 3.0 * c["batch"] * (c["l_tr"] + 1) * 2 * (3 * dim * dim + c["m"] * dim)


OOD_METRICS = ("ood_error", "ood_hinge", "ood_attention", "wq_norm", "wq_proj", "wk_norm", "wk_proj")
METRICS = (
    ("loss", "train_error", "val_error", "id_error", "id_hinge", "id_attention")
    + OOD_METRICS
    + ("r_dx_norm", "cos_mu", "r_dy_norm", "cos_q", "small_fraction")
    + icl_learners.METRICS
)

EXPERIMENT = Experiment(
    name="icl_transformer",
    doc="One-layer transformer learning binary classification in context, ID and OOD (H. Li thesis ch. 6)",
    fields=FIELDS,
    init=init,
    loss=loss,
    evaluate=evaluate,
    metrics=METRICS,
    optimizer=optimizer,
    check=check,
    costs=Costs(
        params=lambda c: 3 * (c["dx"] + c["dy"]) ** 2 + c["m"] * (c["dx"] + c["dy"]), flops_per_step=flops_per_step
    ),
    same_problem_across=(
        "alpha",
        "alpha_test",
        "l_tr",
        "l_ts",
        "s1",
        "noise",
        "ood_noise",
        "prune_rate",
        "prune_order",
        "n_train_tasks",
        "delta",
        "beta",
        "baselines",
        "n_val",
    ),
)
