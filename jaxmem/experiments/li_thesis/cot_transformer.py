"""Chapter 7 of the thesis (spec Part C): the attention-only transformer (7.2) trained by SGD on ½‖z − F‖²
(Subroutine 3: a fresh batch each step, B/K prompts per query step k, training tasks = fresh random
cycles over the M TRR patterns, α of each prompt's examples on the query's pattern, C.9-10), tested by
chain-of-thought (K greedy steps, (7.4)–(7.7)) and by ICL (only (x_i, y_{i,K}) shown, (7.8)–(7.9)) on
M' TSR patterns with noisy, erroneous examples (τ, ρ, α', noise; cot_tasks).

What is read only at test time — l_ts (a size: examples past it are masked), α', τ, ρ, the noise and
the distractor mode — is read from `dyn` by `evaluate`, whose test prompts are drawn afresh from a key
fixed at init (the engine's `[final_eval]` axes; prompts nest along l_ts). The thesis requires
l_ts ≤ l_tr (C.5): a sweep keeps every listed l_ts ≤ its l_tr. Metrics: the training loss and error
(in distribution), CoT and ICL error, the same split by Condition 7.3.2 of each test task (R7.6), the
CoT attention over the four column categories {same, other} input TSR × {same, other} step (Fig 7.6),
the smallest per-step mean attention on S_k* (Prop. 3), and the test tasks' realised τ, τ_o, ρ, ρ_o
(`tau_real`, `tau_o`, `rho_real`, `rho_o`: means over the test tasks) and share meeting Condition 7.3.2.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import optax

from jaxmem.experiments import draws
from jaxmem.experiments.interface import Costs, Experiment, size, static, traced
from jaxmem.experiments.li_thesis import cot_model, cot_tasks

FIELDS = {
    "dx": static(int, "d_X (Sec 7.5: 30)", 30, minimum=2),
    "M": static(int, "TRR patterns for training (Sec 7.5: 20)", 20, minimum=3),
    "M_test": static(int, "M': TSR patterns for testing (Sec 7.5: 10)", 10, minimum=3),
    "K": static(int, "reasoning steps (Sec 7.5: 3)", 3, minimum=1),
    "batch": static(int, "prompts per SGD step, B/K per query step (C.9-9: 30)", 30, minimum=1),
    "n_test": static(int, "test prompts per evaluation", 256, minimum=1),
    "l_tr": size("training examples per prompt (C.9-9: 32 ≥ max l_ts)", 32, maximum=draws.ROWS_LIMIT),
    "l_ts": size("test examples per prompt (test time; ≤ l_tr)", 16, maximum=draws.ROWS_LIMIT),
    "alpha": traced(float, "training α: share of examples on the query's TRR pattern (Sec 7.5: 0.4)", 0.4, minimum=0.0),
    "alpha_test": traced(float, "α' (test time; Sec 7.5: 0.8)", 0.8, minimum=0.0),
    "tau": traced(float, "τ^f: the correct chain's probability (test time; Sec 7.5: 0.5)", 0.5, minimum=0.0),
    "rho": traced(float, "ρ^f: primacy of the correct transition (test time; Sec 7.5: 0.8)", 0.8, minimum=0.0),
    "noise": traced(float, "‖δ‖ of the test tokens' noise (Sec 7.5: 0.2)", 0.2, minimum=0.0),
    "distractors": traced(
        str, "wrong-target order: random per row, or a common sink (C.9-4/5)", "random", cot_tasks.DISTRACTORS
    ),
    "xi": traced(float, "ξ: W init std (C.8: 0.01)", 0.01, minimum=0.0),
}
CATEGORIES = ("att_same_same", "att_other_same", "att_same_other", "att_other_other")  # TSR × step


def check(config) -> list[str]:
    problems = []
    if config["M"] > config["dx"] or 2 * config["M_test"] > config["M"]:
        problems.append(
            f"need M ≤ d_X and 2M' ≤ M (μ'_j = (μ_2j + μ_2j+1)/√2), got M = {config['M']}, "
            f"M' = {config['M_test']}, d_X = {config['dx']}"
        )
    if config["l_ts"] > config["l_tr"]:
        problems.append(f"l_ts = {config['l_ts']} exceeds l_tr = {config['l_tr']} (the thesis requires l_ts ≤ l_tr)")
    for name in ("alpha", "alpha_test", "tau", "rho"):
        if config[name] > 1.0:
            problems.append(f"{name} = {config[name]} must be at most 1")
    if config["alpha"] >= 1.0:
        problems.append("α = 1 lets the model learn the positional encodings only (footnote 30): use α < 1")
    return problems


def dim(shape) -> int:
    return 2 * shape["dx"] + shape["K"]


def training_prompts(key, count: int, shape, dyn) -> dict:
    """`count` in-distribution prompts (7.1): query step k = n mod K + 1, a fresh random cycle each."""
    m, k_steps, dx, length = shape["M"], shape["K"], shape["dx"], shape["l_tr"]
    u_perm, u = draws.uniform_matrices(key, [(count, 1, m), (count, length + 1, 1)])
    perm = jnp.argsort(u_perm[:, 0], axis=-1)
    start = jnp.minimum(jnp.floor(u[:, 0, 0] * m), m - 1).astype(jnp.int32)
    inputs = cot_tasks.other_or_same(u[:, 1:, 0], start[:, None], dyn["alpha"], m)
    chains = jax.vmap(lambda p, s: cot_tasks.exact_chain(p, s, k_steps))(
        perm, jnp.concatenate([start[:, None], inputs], 1)
    )
    tokens = jnp.eye(m, dx)[chains]  # (count, l + 1, K + 1, d_X): the query's chain first
    k = jnp.arange(count) % k_steps + 1
    contexts = cot_tasks.step_columns(tokens[:, 1:], k_steps).reshape(count, length * k_steps, -1)
    mask = jnp.repeat(draws.active_mask(length, dyn["l_tr"]), k_steps)
    prefix = cot_tasks.step_columns(tokens[:, 0], k_steps)[:, : k_steps - 1]
    prefix_mask = jnp.arange(k_steps - 1)[None] < (k - 1)[:, None]
    current = jnp.take_along_axis(tokens[:, 0], (k - 1)[:, None, None], axis=1)[:, 0]
    return {
        "keys": jnp.concatenate([contexts, prefix], axis=1),
        "mask": jnp.concatenate([jnp.broadcast_to(mask, (count, mask.shape[0])), prefix_mask], axis=1),
        "query": jax.vmap(lambda t, s: cot_tasks.query_column(t, s, k_steps))(current, k),
        "label": jnp.take_along_axis(tokens[:, 0], k[:, None, None], axis=1)[:, 0],
        "label_index": jnp.take_along_axis(chains[:, 0], k[:, None], axis=1)[:, 0],
    }


def test_prompts(key, shape, dyn) -> dict:
    """n_test testing prompts (C.4): a fresh cycle over the M' TSR patterns, its A_k (τ, ρ, distractor
    mode), noise-free query chain, α' of the examples starting on the query's pattern, erroneous chains
    from A_k, tokens μ'_j + δ."""
    n, count, k_steps, dx, length = shape["M_test"], shape["n_test"], shape["K"], shape["dx"], shape["l_ts"]
    u_perm, u_order, u, u_sink = draws.uniform_matrices(
        key, [(count, 1, n), (count, k_steps * n, n), (count, length + 1, k_steps + 1), (count, 1, 1)]
    )
    (g,) = draws.normal_matrices(jax.random.fold_in(key, 1), [(count, (length + 1) * (k_steps + 1), dx)])
    perm = jnp.argsort(u_perm[:, 0], axis=-1)
    sink = jnp.where(dyn["distractors"] == 1, jnp.floor(u_sink[:, 0, 0] * n), -1.0)
    a = jax.vmap(lambda p, o, s: cot_tasks.transition_matrices(p, o, dyn["tau"], dyn["rho"], s, k_steps))(
        perm, u_order.reshape(count, k_steps, n, n), sink
    )
    start = jnp.minimum(jnp.floor(u[:, 0, 0] * n), n - 1).astype(jnp.int32)
    query_chain = jax.vmap(lambda p, s: cot_tasks.exact_chain(p, s, k_steps))(perm, start)
    inputs = cot_tasks.other_or_same(u[:, 1:, 0], start[:, None], dyn["alpha_test"], n)
    chains = jax.vmap(jax.vmap(cot_tasks.sample_chain, in_axes=(None, 0, 0)))(a, inputs, u[:, 1:, 1:])
    patterns = cot_tasks.tsr_patterns(n, dx)
    noise = cot_tasks.orthogonal_noise(g.reshape(count, length + 1, k_steps + 1, dx)[:, 1:], patterns, dyn["noise"])
    tokens = patterns[chains] + noise
    mask = jnp.repeat(draws.active_mask(length, dyn["l_ts"]), k_steps)
    icl_first = jnp.concatenate([tokens[:, :, 0], tokens[:, :, -1]], axis=-1)
    icl = jnp.zeros((count, length, k_steps, 2 * dx)).at[:, :, 0].set(icl_first)
    pe = jnp.broadcast_to(jnp.eye(k_steps), (count, length, k_steps, k_steps))
    stats = jax.vmap(lambda x, p: cot_tasks.task_statistics(x, cot_tasks.step_targets(p, k_steps)))(a, perm)
    return {
        "cot": cot_tasks.step_columns(tokens, k_steps).reshape(count, length * k_steps, -1),
        "icl": jnp.concatenate([icl, pe], axis=-1).reshape(count, length * k_steps, -1),
        "mask": mask,
        "chains": chains,
        "query_chain": query_chain,
        "stats": stats,
    }


def init(key, shape, dyn):
    return cot_model.init(jax.random.fold_in(key, 1), dim(shape), dyn["xi"]), {"eval_key": jax.random.fold_in(key, 2)}


def outputs(params, data, dx: int):
    return jax.vmap(cot_model.forward, in_axes=(None, 0, 0, 0, None))(
        params, data["keys"], data["mask"], data["query"], dx
    )


def loss(params, problem, shape, dyn, key):
    """½‖z − F‖² (7.3) on a fresh batch."""
    data = training_prompts(key, shape["batch"], shape, dyn)
    f, _ = outputs(params, data, shape["dx"])
    return jnp.mean(0.5 * jnp.sum((data["label"] - f) ** 2, axis=-1))


def categories(attn, data, answers, k_steps: int):
    """Attention mass of every CoT step on the four column categories: (n_test, K, 4)."""
    count, length = data["chains"].shape[:2]
    current = jnp.concatenate([data["query_chain"][:, :1], answers[:, :-1]], axis=1)  # v_{k−1}: (count, K)
    col_input = data["chains"][:, :, :-1].reshape(count, length * k_steps)
    col_step = jnp.tile(jnp.arange(1, k_steps + 1), length)
    pre_input, pre_step = current[:, : k_steps - 1], jnp.arange(1, k_steps)
    inputs = jnp.concatenate([col_input, pre_input], axis=1)[:, None, :]  # (count, 1, n)
    steps = jnp.concatenate([col_step, pre_step])[None, None, :]
    same_tsr = inputs == current[:, :, None]
    same_step = steps == jnp.arange(1, k_steps + 1)[None, :, None]
    masks = (same_tsr & same_step, ~same_tsr & same_step, same_tsr & ~same_step, ~same_tsr & ~same_step)
    return jnp.stack([jnp.sum(attn * m, axis=-1) for m in masks], axis=-1)


def conditional_mean(values, flags):
    """The mean of values over the prompts whose flag is set (NaN when none is)."""
    return jnp.where(jnp.any(flags), jnp.sum(values * flags) / jnp.maximum(jnp.sum(flags), 1), jnp.nan)


def evaluate(params, problem, shape, dyn) -> dict:
    dx, k_steps = shape["dx"], shape["K"]
    key = problem["eval_key"]
    train = training_prompts(jax.random.fold_in(key, 0), shape["n_test"], shape, dyn)
    f, _ = outputs(params, train, dx)
    train_answer = jax.vmap(cot_model.decode, in_axes=(0, None))(f, jnp.eye(shape["M"], dx))
    test = test_prompts(jax.random.fold_in(key, 1), shape, dyn)
    patterns = cot_tasks.tsr_patterns(shape["M_test"], dx)
    answers, attn = jax.vmap(cot_model.chain_of_thought, in_axes=(None, 0, None, 0, None, None, None))(
        params, test["cot"], test["mask"], test["query_chain"][:, 0], patterns, k_steps, dx
    )
    icl_query = cot_tasks.query_column(patterns[test["query_chain"][:, 0]], 1, k_steps)
    f_icl, _ = jax.vmap(cot_model.forward, in_axes=(None, 0, None, 0, None))(
        params, test["icl"], test["mask"], icl_query, dx
    )
    icl_wrong = jax.vmap(cot_model.decode, in_axes=(0, None))(f_icl, patterns) != test["query_chain"][:, -1]
    cot_wrong = jnp.mean(answers != test["query_chain"][:, 1:], axis=-1)
    mass = categories(attn, test, answers, k_steps)  # (count, K, 4)
    holds = test["stats"]["condition"]
    return {
        "loss": jnp.mean(0.5 * jnp.sum((train["label"] - f) ** 2, axis=-1)),
        "train_error": jnp.mean(train_answer != train["label_index"]),
        "cot_error": jnp.mean(cot_wrong),
        "icl_error": jnp.mean(icl_wrong),
        "cot_error_cond": conditional_mean(cot_wrong, holds),
        "icl_error_cond": conditional_mean(icl_wrong, holds),
        "cot_error_nocond": conditional_mean(cot_wrong, ~holds),
        "icl_error_nocond": conditional_mean(icl_wrong, ~holds),
        **{name: jnp.mean(mass[..., i]) for i, name in enumerate(CATEGORIES)},
        "att_star_min_step": jnp.min(jnp.mean(mass[..., 0], axis=0)),
        **{f"{name}_real": jnp.mean(test["stats"][name]) for name in ("tau", "rho")},
        **{name: jnp.mean(test["stats"][name]) for name in ("tau_o", "rho_o")},
        "condition_share": jnp.mean(holds),
    }


def optimizer(dyn):
    """Plain SGD (F.1)."""
    return optax.sgd(dyn["lr"])


def flops_per_step(c) -> float:
    """Forward + backward (3×) of B prompts: W p_query, then one dot product per column."""
    d = 2 * c["dx"] + c["K"]
    return 3.0 * c["batch"] * 2 * (d * d + (c["l_tr"] + 1) * c["K"] * 2 * d)


METRICS = (
    ("loss", "train_error", "cot_error", "icl_error", "cot_error_cond", "icl_error_cond", "cot_error_nocond")
    + ("icl_error_nocond",)
    + CATEGORIES
    + ("att_star_min_step", "tau_real", "tau_o", "rho_real", "rho_o", "condition_share")
)

EXPERIMENT = Experiment(
    name="cot_transformer",
    doc="One-layer attention-only transformer: CoT and ICL on K-step pattern transitions (H. Li thesis ch. 7)",
    fields=FIELDS,
    init=init,
    loss=loss,
    evaluate=evaluate,
    metrics=METRICS,
    optimizer=optimizer,
    check=check,
    costs=Costs(params=lambda c: (2 * c["dx"] + c["K"]) ** 2, flops_per_step=flops_per_step),
    same_problem_across=("alpha", "alpha_test", "l_tr", "l_ts", "tau", "rho", "noise", "distractors", "xi"),
)
