"""Synthetic factual recall with a one-layer transformer (Nichani, Lee, Bietti 2024, §4; spec §2.4, §3.2).

Task (authors' `task.py::FactRecall`, 0-based token ids): subjects 0..S−1, relations S..S+R−1, noise
S+R..S+R+|N|−1 (|N| = S+R unless `noise` is set), EOS = S+R+|N|. A sequence of length T has the subject
at loc ~ U{0..T−2}, the relation at another uniform slot of 0..T−2 (rloc ~ U{0..T−3}, shifted past loc),
i.i.d. uniform noise elsewhere and EOS at T−1. The target is fact_dict[s, r], drawn for each (s, r) with
replacement from the block {D·r, …, D·r + D − 1} of the RD answers (`distinct_answers`: a per-relation
random permutation instead, so the S subjects get distinct answers; needs S ≤ D). p(s, r) is uniform.
Every step samples a fresh batch from its own key inside the compiled step (spec §10 item 21).
With `scaling` set, one number `size` (which a threshold search can climb) sets S, R and D like the
authors' `binary_sweep`: linear S = R = size, square S = size and R = ⌊√size⌋, distinct S = R = D = size.

Model (authors' `model.py::TF_one_layer`, spec §2.4 "code version"): frozen embeddings wte (vocab × d)
and a separate frozen answer unembedding (RD × d), both N(0, 1/d) (`embeddings = "sphere"`: uniform on
the unit sphere instead, the paper's §4.3). H heads with Q, K, V ∈ R^{d×d_h} (std 1/√d_h) whose query is
the last token only, scores scaled by 1/√d_h, softmax over all T positions; O ∈ R^{H d_h × d} (std
1/√d); x = Σ_h O_hᵀ attn_h; then y = layer2(relu(layer1(x))) + x with layer1 = Dense(m) + bias (lecun
normal, zero bias), layer2 = Dense(d, no bias); logits y @ unembedᵀ over the RD answers only. Parameters
counted 4Hdd_h + 2md like the paper (the bias is not counted).

Padding: S, R, D, |N|, d, H, d_h and m are padded; token ids, answer ids and every random draw use the
TRUE sizes from `dyn` with shape-stable draws (`jaxmem.random`), padded heads / hidden units / dimensions
start at 0 and get zero gradient, padded answers get logit −inf, so a padded run equals the unpadded one.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import optax

from jaxmem.experiments import draws as jr
from jaxmem.experiments.interface import Field, bits, experiment_from

SCALINGS = {  # size -> (S, R, D or None = the D field); the authors' `binary_sweep` scalings (spec §3.2)
    "linear": lambda size, D: (size, size, D),  # S = R = size: Fig 4, Fig 7
    "square": lambda size, D: (size, math.isqrt(size), D),  # S = size, R = ⌊√size⌋: Fig 9 (S = R²)
    "distinct": lambda size, D: (size, size, size),  # S = R = D = size: Fig 8
}

FIELDS = {
    "S": Field(int, "number of subjects (0: set by `scaling` from `size`)", default=0, minimum=0),
    "R": Field(int, "number of relations (0: set by `scaling` from `size`)", default=0, minimum=0),
    "D": Field(int, "answers per relation block (|A| = R·D)", default=8, minimum=None),
    "scaling": Field(
        str,
        "none: S, R, D as given; linear: S = R = size; square: S = size, R = ⌊√size⌋; distinct: S = R = D = size",
        default="none",
        choices=("none", *SCALINGS),
    ),
    "size": Field(int, "the one number a `scaling` grows the task by (searchable)", default=0, minimum=0),
    "noise": Field(int, "number of noise tokens |N|; 0 means |N| = S + R (paper §4.4)", default=0, minimum=0),
    "T": Field(int, "sequence length, EOS included (App. A.3: 32)", default=32, minimum=None),
    "d": Field(int, "embedding dimension", minimum=None),
    "H": Field(int, "number of attention heads", minimum=None),
    "d_h": Field(int, "head dimension", minimum=None),
    "m": Field(int, "MLP hidden width", minimum=None),
    "batch": Field(int, "fresh sequences per training step", default=1024, minimum=1),
    "test_size": Field(int, "fixed test sequences drawn at init", default=1024, minimum=1),
    "exact_max": Field(
        int,
        "largest S·R for which exact_accuracy covers every (s, r) pair; above it, only the first "
        "⌊exact_max / R_padded⌋ subjects (all relations) are evaluated",
        default=8192,
        minimum=1,
    ),
    "distinct_answers": Field(bool, "per-relation permutation instead of with replacement", default=False),
    "embeddings": Field(
        str,
        "gaussian N(0, I/d) (authors' code) or sphere (paper)",
        default="gaussian",
        choices=("gaussian", "sphere"),
    ),
}


def task_sizes(config) -> dict:
    """The config with S, R, D set from `size` by its `scaling` (unchanged for scaling = "none")."""
    if config["scaling"] == "none":
        return config
    S, R, D = SCALINGS[config["scaling"]](config["size"], config["D"])
    return {**config, "S": S, "R": R, "D": D}


def noise_count(config) -> int:
    return config["noise"] or config["S"] + config["R"]


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
    config = task_sizes(config)
    if config["scaling"] == "none" and not (config["S"] and config["R"]):
        problems.append(f"S and R are required (or scaling with size), got S = {config['S']}, R = {config['R']}")
    for name, low in (("D", 1), ("d", 1), ("H", 1), ("d_h", 1), ("m", 1), ("T", 3)):
        if config[name] < low:
            problems.append(f"{name} = {config[name]} < {low}: degenerate shape")
    if config["distinct_answers"] and config["S"] > config["D"]:
        problems.append(f"distinct_answers needs S <= D, got S = {config['S']} > D = {config['D']}")
    return problems


def shape(config, pad) -> dict:
    """Static padded sizes. Sizes a scaling derives from `size` climb size's padding ladder."""
    config, by_size = task_sizes(config), config["scaling"] != "none"
    s, r = pad(config["S"], "size" if by_size else "S"), pad(config["R"], "size" if by_size else "R")
    dd = pad(config["D"], "size" if config["scaling"] == "distinct" else "D")
    n = pad(noise_count(config), "noise")
    exact_s = s if s * r <= config["exact_max"] else max(1, config["exact_max"] // r)
    return {
        "S": s,
        "R": r,
        "D": dd,
        "noise": n,
        "V": s + r + n + 1,  # padded input vocabulary (ids use the true layout, so it must hold S+R+|N|+1)
        "A": r * dd,  # padded answer space
        "d": pad(config["d"], "d"),
        "H": pad(config["H"], "H"),
        "d_h": pad(config["d_h"], "d_h"),
        "m": pad(config["m"], "m"),
        "T": config["T"],
        "batch": config["batch"],
        "test_size": config["test_size"],
        "exact_S": exact_s,
        "distinct_answers": config["distinct_answers"],
        "embeddings": config["embeddings"],
    }


def dynamic(config) -> dict:
    config = task_sizes(config)
    return {
        "S": config["S"],
        "R": config["R"],
        "D": config["D"],
        "noise": noise_count(config),
        "d": config["d"],
        "H": config["H"],
        "d_h": config["d_h"],
        "m": config["m"],
    }


# ---------------------------------------------------------------------------------------------- task


def fact_dict(key, shape, dyn) -> jax.Array:
    """(S_pad, R_pad) answer ids; entry (s, r) depends only on (key, s, r) and the true sizes."""
    S, R, D = shape["S"], shape["R"], shape["D"]
    r = jnp.arange(R)[None, :]
    if shape["distinct_answers"]:
        (u,) = jr.uniform_matrices(key, [(D, R)])
        u = jnp.where(jr.active_mask(D, dyn["D"])[:, None], u, 2.0)  # padded slots sort last
        perm = jnp.argsort(u, axis=0)  # column r: a random permutation of 0..D_true−1 first
        within = perm[jnp.minimum(jnp.arange(S), D - 1)]  # (S, R); rows s < S_true <= D_true are used
    else:
        (u,) = jr.uniform_matrices(key, [(S, R)])
        within = _uniform_ints(u, dyn["D"])
    active = jr.block_mask((S, R), dyn["S"], dyn["R"])
    return jnp.where(active, dyn["D"] * r + within, 0).astype(jnp.int32)


def _assemble(subject, relation, loc, rloc, noise, shape, dyn):
    """Token ids (n, T) from per-sequence subject, relation, loc, rloc (before the shift) and noise (n, T)."""
    T = shape["T"]
    rloc = rloc + (rloc >= loc)
    x = noise + dyn["S"] + dyn["R"]
    pos = jnp.arange(T)[None, :]
    x = jnp.where(pos == loc[:, None], subject[:, None], x)
    x = jnp.where(pos == rloc[:, None], dyn["S"] + relation[:, None], x)
    x = jnp.where(pos == T - 1, dyn["S"] + dyn["R"] + dyn["noise"], x)
    return x.astype(jnp.int32)


def _uniform_ints(u, n):
    """⌊u·n⌋ for u ∈ (0, 1), kept below a traced bound n."""
    return jnp.minimum(jnp.floor(u * n).astype(jnp.int32), n - 1)


def sample(key, n: int, shape, dyn):
    """n fresh sequences: (tokens (n, T), subject (n,), relation (n,)), from one uniform draw of shape
    (n, T + 4) that never depends on padding: subject, relation, loc, rloc, then T noise ids."""
    T = shape["T"]
    u = jax.random.uniform(key, (n, T + 4), minval=1e-7, maxval=1.0 - 1e-7)
    subject, relation = _uniform_ints(u[:, 0], dyn["S"]), _uniform_ints(u[:, 1], dyn["R"])
    loc, rloc = _uniform_ints(u[:, 2], T - 1), _uniform_ints(u[:, 3], T - 2)
    noise = _uniform_ints(u[:, 4:], dyn["noise"])
    return _assemble(subject, relation, loc, rloc, noise, shape, dyn), subject, relation


def exact_set(key, shape, dyn):
    """One random context for every (s, r) with s < exact_S: tokens (exact_S·R_pad, T), s, r, active mask.
    The draws for (s, r) are row s, columns r·(T+2) … r·(T+2)+T+1 of one matrix: shape-stable in (s, r)."""
    S, R, T = shape["exact_S"], shape["R"], shape["T"]
    (u,) = jr.uniform_matrices(key, [(S, R * (T + 2))])
    u = u.reshape(S * R, T + 2)
    subject, relation = (a.ravel() for a in jnp.meshgrid(jnp.arange(S), jnp.arange(R), indexing="ij"))
    loc, rloc = _uniform_ints(u[:, 0], T - 1), _uniform_ints(u[:, 1], T - 2)
    noise = _uniform_ints(u[:, 2:], dyn["noise"])
    tokens = _assemble(subject, relation, loc, rloc, noise, shape, dyn)
    active = (subject < dyn["S"]) & (relation < dyn["R"])
    return tokens, subject, relation, active


# --------------------------------------------------------------------------------------------- model


def _masked(gauss, std, mask):
    return jnp.where(mask, gauss * std, 0.0)


def init(key, shape, dyn):
    S, R, V, A, d, H, dh, m = (shape[k] for k in ("S", "R", "V", "A", "d", "H", "d_h", "m"))
    k_draw, k_fact, k_test, k_exact = jax.random.split(key, 4)
    f32 = lambda x: jnp.asarray(x, jnp.float32)  # noqa: E731
    # One shape-stable draw for every matrix: wte, unembed, the per-head stacks Q, K, V, O, then W1, W2.
    draws = jr.normal_matrices(
        k_draw,
        [(V, d), (A, d), (H, d, dh), (H, d, dh), (H, d, dh), (H, dh, d), (d, m), (m, d)],
        truncated=[False] * 6 + [True, True],
    )
    wte, unembed, q, k, v, o, w1, w2 = draws
    vocab = dyn["S"] + dyn["R"] + dyn["noise"] + 1
    answers = dyn["R"] * dyn["D"]
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
    facts = fact_dict(k_fact, shape, dyn)
    test_x, test_s, test_r = sample(k_test, shape["test_size"], shape, dyn)
    ex_x, ex_s, ex_r, ex_active = exact_set(k_exact, shape, dyn)
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


def forward(params, problem, shape, dyn, tokens) -> jax.Array:
    """Answer logits (n, A_pad) of the one-layer transformer for token ids (n, T); padded answers −inf."""
    E = problem["wte"][tokens]  # (n, T, d)
    last = E[:, -1]  # query = EOS position only
    q = jnp.einsum("nd,hde->nhe", last, params["Q"])
    qk = jnp.einsum("nhe,hde->nhd", q, params["K"])  # K_h Q_hᵀ x_T, so that score_i = x_iᵀ qk
    scores = jnp.einsum("ntd,nhd->nht", E, qk) / jnp.sqrt(jnp.asarray(dyn["d_h"], jnp.float32))
    attn = jax.nn.softmax(scores, axis=-1)
    ctx = jnp.einsum("nht,ntd->nhd", attn, E)
    heads = jnp.einsum("nhd,hde->nhe", ctx, params["V"])  # out_h = V_hᵀ Σ_i a_i x_i
    x = jnp.einsum("nhe,hed->nd", heads, params["O"])
    y = jax.nn.relu(x @ params["W1"] + params["b1"]) @ params["W2"] + x
    z = y @ problem["unembed"].T
    active = jr.active_mask(shape["A"], dyn["R"] * dyn["D"])
    return jnp.where(active[None, :], z, -jnp.inf)


def _nll(z, y):
    return -jnp.take_along_axis(jax.nn.log_softmax(z, axis=-1), y[:, None], axis=1)[:, 0]


def loss(params, problem, shape, dyn, key) -> jax.Array:
    """Cross-entropy over the RD answers on a fresh batch sampled from the step's key."""
    tokens, s, r = sample(key, shape["batch"], shape, dyn)
    return jnp.mean(_nll(forward(params, problem, shape, dyn, tokens), problem["facts"][s, r]))


def evaluate(params, problem, shape, dyn) -> dict:
    """Loss / accuracy on the fixed test set, exact_accuracy over every (s, r) with one context each."""
    z = forward(params, problem, shape, dyn, problem["test_x"])
    ez = forward(params, problem, shape, dyn, problem["exact_x"])
    active = problem["exact_active"]
    exact_hits = (jnp.argmax(ez, axis=1) == problem["exact_y"]) & active
    return {
        "loss": jnp.mean(_nll(z, problem["test_y"])),
        "accuracy": jnp.mean(jnp.argmax(z, axis=1) == problem["test_y"]),
        "exact_accuracy": jnp.sum(exact_hits) / jnp.maximum(jnp.sum(active), 1),
    }


def optimizer(dyn) -> optax.GradientTransformation:
    """Adam, optax defaults, constant rate (authors: optax.adamw with weight_decay = 0; embeddings frozen)."""
    return optax.adam(dyn["lr"])


def num_params(config) -> float:
    """4·H·d·d_h (attention) + 2·m·d (MLP), as the paper counts them (bias and embeddings not counted)."""
    return 4 * config["H"] * config["d"] * config["d_h"] + 2 * config["m"] * config["d"]


def info_bits(config) -> float:
    """The Thm 8 lower bound (eq. 18) on the bits any model needs to store the facts at zero loss,
    S·R·log₂ D + R·D·log₂(|V|/D), with the unspecified constant c taken as 0 and the paper's vocabulary
    |V| = S + R + |A| + |N| + 1 (answers included, spec §3.2)."""
    config = task_sizes(config)
    S, R, D = config["S"], config["R"], config["D"]
    vocab = S + R + R * D + noise_count(config) + 1
    return bits(S * R, D) + bits(R * D, vocab / D)


def flops_per_step(config) -> float:
    """Forward + backward (≈ 3× forward) FLOPs of one training batch (embedding gathers ignored)."""
    config = task_sizes(config)
    d, H, dh, m, T = config["d"], config["H"], config["d_h"], config["m"], config["T"]
    answers = config["R"] * config["D"]
    forward_one = 2 * (3 * H * d * dh + 2 * T * H * d + H * dh * d + 2 * d * m + d * answers)
    return 3.0 * config["batch"] * forward_one


EXPERIMENT = experiment_from(
    globals(),
    name="factual_recall",
    doc="Synthetic factual recall with a one-layer transformer, attention + MLP (Nichani et al. §4)",
    fields=FIELDS,
    metrics=("loss", "accuracy", "exact_accuracy"),
)
