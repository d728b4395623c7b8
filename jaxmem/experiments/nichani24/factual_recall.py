"""Synthetic factual recall with a one-layer transformer (Nichani, Lee, Bietti 2024, §4; spec §2.4, §3.2).

Task: the synthetic factual recall of `facts` (authors' `task.py::FactRecall`); answers are drawn with
replacement from each relation's block (`distinct_answers`: a per-relation random permutation instead,
so the S subjects get distinct answers; needs S ≤ D). Every step samples a fresh batch from its own key
inside the compiled step (spec §10 item 21).
With `scaling` set, one number `size` (which a threshold search can climb) sets S, R and D like the
authors' `binary_sweep`: linear S = R = size, square S = size and R = ⌊√size⌋, distinct S = R = D = size.

Model (authors' `model.py::TF_one_layer`, spec §2.4 "code version"): frozen embeddings wte (vocab × d)
and a separate frozen answer unembedding (RD × d), both N(0, 1/d) (`embeddings = "sphere"`: uniform on
the unit sphere instead, the paper's §4.3). H heads with Q, K, V ∈ R^{d×d_h} (std 1/√d_h) whose query is
the last token only, scores scaled by 1/√d_h, softmax over all T positions; O ∈ R^{H d_h × d} (std
1/√d); x = Σ_h O_hᵀ attn_h; then y = layer2(relu(layer1(x))) + x with layer1 = Dense(m) + bias (lecun
normal, zero bias), layer2 = Dense(d, no bias); logits y @ unembedᵀ over the RD answers only. Parameters
counted 4Hdd_h + 2md like the paper (the bias is not counted). Trained by Adam, optax defaults, constant
rate (the default optimizer; authors: optax.adamw with weight_decay = 0), embeddings frozen.

Padding: S, R, D, |N|, d, H, d_h and m are padded; token ids, answer ids and every random draw use the
TRUE sizes from `dyn` with shape-stable draws (`jaxmem.experiments.draws`), padded heads / hidden units / dimensions
start at 0 and get zero gradient, padded answers get logit −inf, so a padded run equals the unpadded one.

`loss_block` (derived, 0 unless the planner sets one): the cross-entropy and the argmax over the R·D answers
are computed that many answers at a time (`jaxmem.experiments.blocked_softmax`), never holding the
sequences × answers logits; equal to the dense ones to float32 rounding. `loss_kernel` (derived, 'xla' unless
the planner sets 'pallas'): the loss's blocked passes as fused kernels with the logits on chip.
"""

from __future__ import annotations

import dataclasses
import math

import jax
import jax.numpy as jnp

from jaxmem.experiments import draws as jr
from jaxmem.experiments.blocked_softmax import (
    LOSS_PATH,
    blocked_argmax,
    blocked_cross_entropy,
    logits_bytes,
    with_loss_block,
)
from jaxmem.experiments.interface import Costs, Experiment, host, size, static
from jaxmem.experiments.nichani24.facts import (
    FIELDS as TASK_FIELDS,
    answer_count,
    exact_set,
    fact_dict,
    info_bits,
    nll,
    sample,
    vocab_size,
    with_noise,
)

SCALINGS = {  # size -> (S, R, D or None = the D field); the authors' `binary_sweep` scalings (spec §3.2)
    "linear": lambda size, D: (size, size, D),  # S = R = size: Fig 4, Fig 7
    "square": lambda size, D: (size, math.isqrt(size), D),  # S = size, R = ⌊√size⌋: Fig 9 (S = R²)
    "distinct": lambda size, D: (size, size, size),  # S = R = D = size: Fig 8
}


def _ladder(name, scalings):
    """A task size climbs `size`'s padding ladder under the `scalings` that derive it from `size`."""
    return lambda config: "size" if config["scaling"] in scalings else name


FIELDS = {
    **TASK_FIELDS,
    "S": size("number of subjects (0: set by `scaling` from `size`)", 0, minimum=0, ladder=_ladder("S", SCALINGS)),
    "R": size("number of relations (0: set by `scaling` from `size`)", 0, minimum=0, ladder=_ladder("R", SCALINGS)),
    "D": dataclasses.replace(TASK_FIELDS["D"], ladder=_ladder("D", ("distinct",))),
    "scaling": host(
        str,
        "none: S, R, D as given; linear: S = R = size; square: S = size, R = ⌊√size⌋; distinct: S = R = D = size",
        "none",
        ("none", *SCALINGS),
    ),
    "size": host(int, "the one number a `scaling` grows the task by (searchable)", 0, minimum=0),
    "d": size("embedding dimension", minimum=None),
    "H": size("number of attention heads", minimum=None),
    "d_h": size("head dimension", minimum=None),
    "m": size("MLP hidden width", minimum=None),
    "batch": static(int, "fresh sequences per training step", 1024, minimum=1),
    "test_size": static(int, "fixed test sequences drawn at init", 1024, minimum=1),
    "exact_max": static(
        int,
        "largest S·R for which exact_accuracy covers every (s, r) pair; above it, only the first "
        "⌊exact_max / R_padded⌋ subjects (all relations) are evaluated",
        8192,
        minimum=1,
    ),
    "distinct_answers": static(bool, "per-relation permutation instead of with replacement", False),
    "embeddings": static(
        str, "gaussian N(0, I/d) (authors' code) or sphere (paper)", "gaussian", ("gaussian", "sphere")
    ),
}


def resolve(config) -> dict:
    """S, R, D set from `size` by the `scaling` (as given for scaling = "none"); |N| = S + R unless set;
    the loss is dense unless a `loss_block` is set."""
    if config["scaling"] != "none":
        S, R, D = SCALINGS[config["scaling"]](config["size"], config["D"])
        config = {**config, "S": S, "R": R, "D": D}
    return with_loss_block(with_noise(config))


def check(config) -> list[str]:
    problems = []
    if config["scaling"] == "none" and config["size"]:
        problems.append(f"size = {config['size']} is only used with a scaling; set scaling or S and R")
    if config["scaling"] != "none":
        if config["S"] or config["R"]:
            problems.append(f"scaling = {config['scaling']!r} sets S and R from size; do not give S or R too")
        if config["size"] < 1:
            problems.append(f"scaling = {config['scaling']!r} needs size >= 1, got size = {config['size']}")
            return problems
    config = resolve(config)
    if config["scaling"] == "none" and not (config["S"] and config["R"]):
        problems.append(f"S and R are required (or scaling with size), got S = {config['S']}, R = {config['R']}")
    for name, low in (("D", 1), ("d", 1), ("H", 1), ("d_h", 1), ("m", 1), ("T", 3)):
        if config[name] < low:
            problems.append(f"{name} = {config[name]} < {low}: degenerate shape")
    if config["distinct_answers"] and config["S"] > config["D"]:
        problems.append(f"distinct_answers needs S <= D, got S = {config['S']} > D = {config['D']}")
    return problems


def exact_subjects(shape) -> int:
    """Subjects of the exact set: all S_pad when S_pad·R_pad ≤ exact_max, else the first ⌊exact_max / R_pad⌋."""
    S, R = shape["S"], shape["R"]
    return S if S * R <= shape["exact_max"] else max(1, shape["exact_max"] // R)


# --------------------------------------------------------------------------------------------- model


def _masked(gauss, std, mask):
    return jnp.where(mask, gauss * std, 0.0)


def init(key, shape, dyn):
    V, A, d, H, dh, m = vocab_size(shape), answer_count(shape), shape["d"], shape["H"], shape["d_h"], shape["m"]
    k_draw, k_fact, k_test, k_exact = jax.random.split(key, 4)
    f32 = lambda x: jnp.asarray(x, jnp.float32)  # noqa: E731
    # One shape-stable draw for every matrix: wte, unembed, the per-head stacks Q, K, V, O, then W1, W2.
    draws = jr.normal_matrices(
        k_draw,
        [(V, d), (A, d), (H, d, dh), (H, d, dh), (H, d, dh), (H, dh, d), (d, m), (m, d)],
        truncated=[False] * 6 + [True, True],
    )
    wte, unembed, q, k, v, o, w1, w2 = draws
    vocab, answers = vocab_size(dyn), answer_count(dyn)
    if shape["embeddings"] == "sphere":
        wte, unembed = jr.sphere_rows(wte, vocab, dyn["d"]), jr.sphere_rows(unembed, answers, dyn["d"])
    else:
        scale = 1.0 / jnp.sqrt(f32(dyn["d"]))
        wte = _masked(wte, scale, jr.block_mask((V, d), vocab, dyn["d"]))
        unembed = _masked(unembed, scale, jr.block_mask((A, d), answers, dyn["d"]))

    head_mask = jr.active_mask(H, dyn["H"])[:, None, None]
    qkv_mask = head_mask & jr.block_mask((d, dh), dyn["d"], dyn["d_h"])[None]
    o_mask = head_mask & jr.block_mask((dh, d), dyn["d_h"], dyn["d"])[None]
    qkv_std = 1.0 / jnp.sqrt(f32(dyn["d_h"]))
    params = {
        "Q": _masked(q, qkv_std, qkv_mask),
        "K": _masked(k, qkv_std, qkv_mask),
        "V": _masked(v, qkv_std, qkv_mask),
        "O": _masked(o, 1.0 / jnp.sqrt(f32(dyn["d"])), o_mask),
        "W1": _masked(w1, 1.0 / jnp.sqrt(f32(dyn["d"])), jr.block_mask((d, m), dyn["d"], dyn["m"])),
        "b1": jnp.zeros(m),
        "W2": _masked(w2, 1.0 / jnp.sqrt(f32(dyn["m"])), jr.block_mask((m, d), dyn["m"], dyn["d"])),
    }
    facts = fact_dict(k_fact, shape, dyn, shape["distinct_answers"])
    test_x, test_s, test_r = sample(k_test, shape["test_size"], shape, dyn)
    ex_x, ex_s, ex_r, ex_active = exact_set(k_exact, shape, dyn, exact_subjects(shape))
    problem = {
        "wte": wte,
        "unembed": unembed,
        "facts": facts,
        "test_x": test_x,
        "test_y": facts[test_s, test_r],
        "exact_x": ex_x,
        "exact_y": facts[ex_s, ex_r],
        "exact_active": ex_active,
    }
    return params, problem


def answer_features(params, problem, shape, dyn, tokens) -> jax.Array:
    """The output y (n, d) of the one-layer transformer for token ids (n, T): the answer logits are y @ unembedᵀ."""
    E = problem["wte"][tokens]  # (n, T, d)
    last = E[:, -1]  # query = EOS position only
    q = jnp.einsum("nd,hde->nhe", last, params["Q"])
    qk = jnp.einsum("nhe,hde->nhd", q, params["K"])  # K_h Q_hᵀ x_T, so that score_i = x_iᵀ qk
    scores = jnp.einsum("ntd,nhd->nht", E, qk) / jnp.sqrt(jnp.asarray(dyn["d_h"], jnp.float32))
    attn = jax.nn.softmax(scores, axis=-1)
    ctx = jnp.einsum("nht,ntd->nhd", attn, E)
    heads = jnp.einsum("nhd,hde->nhe", ctx, params["V"])  # out_h = V_hᵀ Σ_i a_i x_i
    x = jnp.einsum("nhe,hed->nd", heads, params["O"])
    return jax.nn.relu(x @ params["W1"] + params["b1"]) @ params["W2"] + x


def _answers(shape, dyn) -> jax.Array:
    return jr.active_mask(answer_count(shape), answer_count(dyn))


def _logits(y, problem, shape, dyn) -> jax.Array:
    """Answer logits y @ unembedᵀ (n, A_pad); padded answers −inf."""
    return jnp.where(_answers(shape, dyn)[None, :], y @ problem["unembed"].T, -jnp.inf)


def forward(params, problem, shape, dyn, tokens) -> jax.Array:
    """Answer logits (n, A_pad) of the one-layer transformer for token ids (n, T); padded answers −inf."""
    return _logits(answer_features(params, problem, shape, dyn, tokens), problem, shape, dyn)


def _answer_nll(y, answers, problem, shape, dyn) -> jax.Array:
    """−log p̂(answer) per sequence from its output y; `loss_block` answers at a time where one is set."""
    if shape["loss_block"]:
        every = jnp.ones(y.shape[0], bool)
        block, kernel = shape["loss_block"], shape["loss_kernel"]
        return blocked_cross_entropy(y, problem["unembed"], answers, every, _answers(shape, dyn), block, kernel=kernel)
    return nll(_logits(y, problem, shape, dyn), answers)


def _predicted(y, problem, shape, dyn) -> jax.Array:
    """The argmax answer per sequence from its output y; `loss_block` answers at a time where one is set."""
    if shape["loss_block"]:
        return blocked_argmax(y, problem["unembed"], _answers(shape, dyn), shape["loss_block"])
    return jnp.argmax(_logits(y, problem, shape, dyn), axis=1)


def loss(params, problem, shape, dyn, key) -> jax.Array:
    """Cross-entropy over the RD answers on a fresh batch sampled from the step's key."""
    tokens, s, r = sample(key, shape["batch"], shape, dyn)
    y = answer_features(params, problem, shape, dyn, tokens)
    return jnp.mean(_answer_nll(y, problem["facts"][s, r], problem, shape, dyn))


def evaluate(params, problem, shape, dyn) -> dict:
    """Loss / accuracy on the fixed test set, exact_accuracy over every (s, r) with one context each."""
    y = answer_features(params, problem, shape, dyn, problem["test_x"])
    exact_y = answer_features(params, problem, shape, dyn, problem["exact_x"])
    active = problem["exact_active"]
    exact_hits = (_predicted(exact_y, problem, shape, dyn) == problem["exact_y"]) & active
    return {
        "loss": jnp.mean(_answer_nll(y, problem["test_y"], problem, shape, dyn)),
        "accuracy": jnp.mean(_predicted(y, problem, shape, dyn) == problem["test_y"]),
        "exact_accuracy": jnp.sum(exact_hits) / jnp.maximum(jnp.sum(active), 1),
    }


def num_params(config) -> float:
    """4·H·d·d_h (attention) + 2·m·d (MLP), as the paper counts them (bias and embeddings not counted)."""
    return 4 * config["H"] * config["d"] * config["d_h"] + 2 * config["m"] * config["d"]


def flops_per_step(config) -> float:
    """Forward + backward (≈ 3× forward) FLOPs of one training batch (embedding gathers ignored)."""
    d, H, dh, m, T = config["d"], config["H"], config["d_h"], config["m"], config["T"]
    forward_one = 2 * (3 * H * d * dh + 2 * T * H * d + H * dh * d + 2 * d * m + d * answer_count(config))
    return 3.0 * config["batch"] * forward_one


def temp_bytes(config) -> float:
    """The logits over the RD answers of the largest set a program step scores (training batch, test
    set or exact set), `loss_block` answers wide where one is set."""
    rows = max(config["batch"], config["test_size"], exact_subjects(config) * config["R"])
    return logits_bytes(rows, answer_count(config), config["loss_block"])


EXPERIMENT = Experiment(
    name="factual_recall",
    doc="Synthetic factual recall with a one-layer transformer, attention + MLP (Nichani et al. §4)",
    fields=FIELDS,
    init=init,
    loss=loss,
    evaluate=evaluate,
    metrics=("loss", "accuracy", "exact_accuracy"),
    resolve=resolve,
    derived=LOSS_PATH,
    check=check,
    costs=Costs(params=num_params, bits=info_bits, flops_per_step=flops_per_step, temp_bytes=temp_bytes),
)
