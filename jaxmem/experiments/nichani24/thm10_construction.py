"""The attention-only construction of Nichani, Lee & Bietti (2024), Thm 10 (App. C.1), built, not trained.

Task: the synthetic factual recall of `facts` (§4.1, spec §3.2; its sampler, answer blocks of size D
per relation drawn with replacement, and exact set over every (s, r) pair): subjects
0..S−1, relations S..S+R−1, noise S+R..S+R+|N|−1, EOS = S+R+|N|; answers 0..RD−1. Every token and
answer embedding is i.i.d. uniform on the unit sphere of R^d and fixed (§4.3).

Construction (proof of Thm 10). Subjects are split into N_S = ⌈S/M⌉ groups S^(i) and relations into
N_R = ⌈R/M⌉ groups of size ≤ M (contiguous ids: the embeddings are i.i.d., so any partition is the
same in law), one attention head per group, H = N_S + N_R heads. Head i:

- KQ, eq. (11): W_K^(i)ᵀ W_Q^(i) = β Σ_{z∈S^(i)} φ(z)φ(EOS)ᵀ + (β/2) φ(EOS)φ(EOS)ᵀ with β → ∞. The query is
  x_T = φ(EOS), so the scores are β⟨φ(z_t), v_i⟩ with v_i = Σ_{z∈S^(i)} φ(z) + ½φ(EOS) (Lemma 1), and
  the softmax becomes a hardmax: uniform over the positions of the top score (one token, barring
  repeats of the same token). Lemma 1 (d ≳ M log|V|) makes that the group's token when one is
  present, else EOS; here the argmax is computed, so where Lemma 1 fails the head attends elsewhere.
  Stored rank-1 as Q^(i) = φ(EOS) e_1ᵀ, K^(i) = v_i e_1ᵀ (the scale β is irrelevant to a hardmax).
- OV, eq. (12) / Lemma 2: W_O^(i)ᵀ W_V^(i) = (d/d_h) Σ_{z∈S^(i)} Σ_{a∈A^z} φ(a)φ(z)ᵀ Σ_{k≤d_h} w_k w_kᵀ, with
  w_k i.i.d. uniform on the unit sphere orthogonal to φ(EOS) (fresh for every head), A^s = A_s =
  {a*(s, r)}_r and A^r = A_r = {a*(s, r)}_s (sets: repeated answers count once). Stored as
  V^(i) = [w_1 … w_{d_h}] ∈ R^{d×d_h} and O^(i) = (d/d_h) W^(i)ᵀ B^(i)ᵀ ∈ R^{d_h×d}, B^(i) = Σ_z Σ_{a∈A^z} φ(a)φ(z)ᵀ.

Output F = Σ_i O^(i)ᵀ V^(i)ᵀ (attended token), no MLP; logits ⟨φ(a), F⟩ over the RD answers (authors'
code convention) or, with `decode = "vocabulary"`, over answers and every input token (eq. 7; the
paper's argmax over V). A head whose group is absent attends to EOS and adds exactly 0 (w_k ⊥ φ(EOS)),
so when Lemma 2 holds (|φ(a)ᵀ OV φ(z) − 1(a∈A^z)| ≤ 1/5) the correct answer scores ≥ 8/5 and every
other ≤ 7/5 (the proof prints "≥ 7/5", a typo: spec §10 item 19).

Sizes: give the group size M (then H = ⌈S/M⌉ + ⌈R/M⌉), or a head budget H (then M is the smallest
group size whose heads fit, spare heads stay zero), or both. Parameters are counted 4·H·d·d_h like the
paper (H the budget when given). S, R, D, |N|, d, d_h and H are padded and masked, with the true ids,
sizes and shape-stable draws (`jaxmem.experiments.draws`), so a padded run equals the unpadded one.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxmem.experiments import draws as jr
from jaxmem.experiments.interface import Costs, Experiment, bits, host, size, static, traced
from jaxmem.experiments.nichani24.facts import (
    FIELDS as TASK_FIELDS,
    answer_count,
    eos_id,
    exact_set,
    fact_dict,
    nll,
    sample,
    vocab_size,
    with_noise,
)

FIELDS = {
    **TASK_FIELDS,
    "d": size("embedding dimension", minimum=None),
    "d_h": size("head dimension: number of random directions w_k in eq. (12)", minimum=None),
    "M": traced(int, "group size (tokens per head); 0: the smallest that fits in H heads", 0, minimum=0),
    "H": size("head budget; 0: exactly ⌈S/M⌉ + ⌈R/M⌉ heads (Thm 10)", 0, minimum=0),
    "decode": static(
        str,
        "argmax over the RD answers (authors' code) or over answers and input tokens (eq. 7)",
        "answers",
        ("answers", "vocabulary"),
    ),
    "batch": host(int, "sequences per step the FLOP count assumes (nothing is trained)", 256, minimum=1),
    "test_size": static(int, "fixed test sequences drawn at init", 1024, minimum=1),
}

DERIVED = {
    "subject_heads": traced(int, "⌈S/M⌉ subject heads, numbered before the relation heads"),
    "heads": traced(int, "⌈S/M⌉ + ⌈R/M⌉ heads the construction uses (≤ H)"),
}

METRICS = (
    "loss",
    "accuracy",
    "exact_accuracy",
    "min_correct",
    "max_wrong",
    "attention_accuracy",
    "ov_error",
    "group_size",
    "heads",
)


def heads_for(config, m: int) -> int:
    """⌈S/M⌉ + ⌈R/M⌉: one head per group of at most M subjects or relations."""
    return -(-config["S"] // m) - (-config["R"] // m)


def group_size(config) -> int:
    """M as given, or the smallest group size whose ⌈S/M⌉ + ⌈R/M⌉ heads fit in the budget H."""
    if config["M"]:
        return config["M"]
    m = max(1, -(-(config["S"] + config["R"]) // config["H"]))
    while heads_for(config, m) > config["H"]:
        m += 1
    return m


def resolve(config) -> dict:
    """|N| = S + R unless set; M the group size (`group_size`), H the heads the run holds (the budget
    when given, else exactly the construction's ⌈S/M⌉ + ⌈R/M⌉)."""
    m = group_size(config)
    heads = heads_for(config, m)
    subject_heads = -(-config["S"] // m)
    return {**with_noise(config), "M": m, "H": config["H"] or heads, "subject_heads": subject_heads, "heads": heads}


def check(config) -> list[str]:
    problems = [
        f"{name} = {config[name]} < {low}: degenerate shape"
        for name, low in (("S", 1), ("R", 1), ("D", 1), ("d", 2), ("d_h", 1), ("T", 3))
        if config[name] < low
    ]
    if config["d_h"] > config["d"]:
        problems.append(f"d_h = {config['d_h']} > d = {config['d']}: the construction needs d >= d_h")
    if not config["M"] and config["H"] < 2:
        problems.append(f"give a group size M >= 1 or a head budget H >= 2, got M = 0, H = {config['H']}")
    elif not problems and config["M"] and config["H"] and heads_for(config, config["M"]) > config["H"]:
        needed = heads_for(config, config["M"])
        problems.append(f"M = {config['M']} needs {needed} heads, more than the budget H = {config['H']}")
    return problems


# ------------------------------------------------------------------------------------- construction


def token_head(shape, dyn) -> jax.Array:
    """(V_pad,) the head of each input token's group: subject s → s // M, relation r → N_S + r // M, else −1."""
    z = jnp.arange(vocab_size(shape))
    S, R, M = dyn["S"], dyn["R"], dyn["M"]
    subject_head = z // M
    relation_head = dyn["subject_heads"] + (z - S) // M
    return jnp.where(z < S, subject_head, jnp.where(z < S + R, relation_head, -1))


def membership(shape, dyn) -> jax.Array:
    """(H_pad, V_pad) 0/1: token z belongs to head h's group S^(h) (or R^(h))."""
    return (token_head(shape, dyn)[None, :] == jnp.arange(shape["H"])[:, None]).astype(jnp.float32)


def answer_sets(facts, shape, dyn) -> jax.Array:
    """(V_pad, A_pad) indicator of A^z: A_s = {a*(s, r)}_r for subjects, A_r = {a*(s, r)}_s for relations."""
    S, R = shape["S"], shape["R"]
    active = jr.block_mask((S, R), dyn["S"], dyn["R"]).astype(jnp.float32)
    s, r = jnp.meshgrid(jnp.arange(S), jnp.arange(R), indexing="ij")
    ind = jnp.zeros((vocab_size(shape), answer_count(shape)))
    ind = ind.at[s, facts].max(active)  # subject rows s
    return ind.at[dyn["S"] + r, facts].max(active)  # relation rows S + r (true ids)


def directions(gauss, eos, dyn) -> jax.Array:
    """(H, d, d_h) columns w_k uniform on the unit sphere of R^d orthogonal to φ(EOS) (Lemma 2)."""
    mask = jr.block_mask(gauss.shape[1:], dyn["d"], dyn["d_h"])[None]
    g = jnp.where(mask, gauss, 0.0)
    g = g - eos[None, :, None] * jnp.einsum("d,hdk->hk", eos, g)[:, None, :]
    norms = jnp.linalg.norm(g, axis=1, keepdims=True)
    return g / jnp.where(norms > 0, norms, 1.0)


def construct(wte, unembed, facts, w, shape, dyn) -> dict:
    """Q, K, V, O of every head from eqs. (11)-(12); heads beyond ⌈S/M⌉ + ⌈R/M⌉ stay zero."""
    eos = wte[eos_id(dyn)]
    member = membership(shape, dyn)
    live = jr.active_mask(shape["H"], dyn["heads"])[:, None]
    first = jnp.zeros(shape["d_h"]).at[0].set(1.0)
    v = member @ wte + 0.5 * eos  # Lemma 1's v_i
    answers_of = answer_sets(facts, shape, dyn) @ unembed  # (V, d): Σ_{a∈A^z} φ(a)
    along_w = jnp.einsum("zd,hdk->hzk", wte, w)  # φ(z)ᵀ w_k
    scale = jnp.asarray(dyn["d"], jnp.float32) / jnp.asarray(dyn["d_h"], jnp.float32)
    return {
        "Q": jnp.where(live[..., None], eos[None, :, None] * first, 0.0),
        "K": jnp.where(live[..., None], v[:, :, None] * first, 0.0),
        "V": jnp.where(live[..., None], w, 0.0),
        "O": scale * jnp.einsum("hz,hzk,ze->hke", member, along_w, answers_of),
    }


def init(key, shape, dyn):
    """Embeddings, dictionary and test sets (of `facts`), then the construction as `params`."""
    V, A, d, H, dh = vocab_size(shape), answer_count(shape), shape["d"], shape["H"], shape["d_h"]
    k_draw, k_fact, k_test, k_exact = jax.random.split(key, 4)
    wte, unembed, *w = jr.normal_matrices(k_draw, [(V, d), (A, d)] + [(d, dh)] * H)  # w: one matrix per head
    wte = jr.sphere_rows(wte, vocab_size(dyn), dyn["d"])
    unembed = jr.sphere_rows(unembed, answer_count(dyn), dyn["d"])
    w = directions(jnp.stack(w), wte[eos_id(dyn)], dyn)
    facts = fact_dict(k_fact, shape, dyn)
    test_x, test_s, test_r = sample(k_test, shape["test_size"], shape, dyn)
    ex_x, ex_s, ex_r, ex_active = exact_set(k_exact, shape, dyn, shape["S"])  # every (s, r) pair
    problem = {
        "wte": wte,
        "unembed": unembed,
        "facts": facts,
        "test_x": test_x,
        "test_y": facts[test_s, test_r],
        "exact_x": ex_x,
        "exact_s": ex_s,
        "exact_r": ex_r,
        "exact_y": facts[ex_s, ex_r],
        "exact_active": ex_active,
    }
    return construct(wte, unembed, facts, w, shape, dyn), problem


# ---------------------------------------------------------------------------------------- forward


def hard_attention(params, E) -> jax.Array:
    """(n, H, T) weights: the β → ∞ limit of softmax(β·scores), uniform over the top-scoring positions."""
    q = jnp.einsum("nd,hdk->nhk", E[:, -1], params["Q"])  # query = EOS position only
    kq = jnp.einsum("hdk,nhk->nhd", params["K"], q)  # W_Kᵀ W_Q x_T, so that score_t = x_tᵀ kq
    scores = jnp.einsum("ntd,nhd->nht", E, kq)
    top = scores >= jnp.max(scores, axis=-1, keepdims=True)
    return top / jnp.sum(top, axis=-1, keepdims=True)


def output_space(problem, shape, dyn) -> tuple[jax.Array, jax.Array]:
    """Rows φ(y) of the decoded set and their active mask: the answers, then (vocabulary) the inputs."""
    answers = jr.active_mask(answer_count(shape), answer_count(dyn))
    if shape["decode"] == "answers":
        return problem["unembed"], answers
    inputs = jr.active_mask(vocab_size(shape), vocab_size(dyn))
    return jnp.concatenate([problem["unembed"], problem["wte"]]), jnp.concatenate([answers, inputs])


def forward(params, problem, shape, dyn, tokens) -> tuple[jax.Array, jax.Array]:
    """Logits (n, |out|) of F = Σ_h O_hᵀ V_hᵀ X ᵀ hardmax (padded outputs −inf) and the attention (n, H, T)."""
    E = problem["wte"][tokens]
    attn = hard_attention(params, E)
    heads = jnp.einsum("nhd,hdk->nhk", jnp.einsum("nht,ntd->nhd", attn, E), params["V"])
    out = jnp.einsum("nhk,hke->ne", heads, params["O"])
    rows, active = output_space(problem, shape, dyn)
    return jnp.where(active[None, :], out @ rows.T, -jnp.inf), attn


def attention_hits(attn, tokens, s, r, shape, dyn) -> jax.Array:
    """(n, H) whether each live head attends only to its target: its group's token if present, else EOS."""
    head_of = token_head(shape, dyn)
    h = jnp.arange(shape["H"])[None, :]
    target = jnp.where(head_of[s][:, None] == h, s[:, None], eos_id(dyn))
    target = jnp.where(head_of[dyn["S"] + r][:, None] == h, dyn["S"] + r[:, None], target)  # (n, H)
    on_target = jnp.sum(attn * (tokens[:, None, :] == target[:, :, None]), axis=-1)
    return on_target > 0.999


def ov_error(params, problem, shape, dyn) -> jax.Array:
    """Lemma 2's max |φ(a)ᵀ W_Oᵀ W_V φ(z) − 1(a ∈ A^z)| over subjects and relations z (through their own
    head) and every decoded output a (answers, and input tokens with `decode = "vocabulary"`)."""
    along_w = jnp.einsum("zd,hdk->hzk", problem["wte"], params["V"])
    own = jnp.einsum("hz,hzk,hke->ze", membership(shape, dyn), along_w, params["O"])  # W_{h(z)} φ(z)
    rows, active = output_space(problem, shape, dyn)
    target = answer_sets(problem["facts"], shape, dyn)
    target = jnp.pad(target, ((0, 0), (0, rows.shape[0] - answer_count(shape))))  # input tokens are never answers
    valid = (token_head(shape, dyn) >= 0)[:, None] & active[None, :]
    return jnp.max(jnp.where(valid, jnp.abs(own @ rows.T - target), 0.0))


def evaluate(params, problem, shape, dyn) -> dict:
    """Test loss / accuracy; over every (s, r) pair (one random context each): exact accuracy, the
    smallest correct-answer logit, the largest wrong logit (Thm 10: ≥ 8/5 and ≤ 7/5), the fraction of
    live heads attending to their target (Lemma 1) and Lemma 2's largest OV error (≤ 1/5); and the
    construction's group size M and head count ⌈S/M⌉ + ⌈R/M⌉ (constants of the run, for the tables)."""
    z, _ = forward(params, problem, shape, dyn, problem["test_x"])
    ez, attn = forward(params, problem, shape, dyn, problem["exact_x"])
    y, active = problem["exact_y"], problem["exact_active"]
    correct = jnp.take_along_axis(ez, y[:, None], axis=1)[:, 0]
    wrong = jnp.max(ez.at[jnp.arange(len(y)), y].set(-jnp.inf), axis=1)
    hits = attention_hits(attn, problem["exact_x"], problem["exact_s"], problem["exact_r"], shape, dyn)
    live = active[:, None] & jr.active_mask(shape["H"], dyn["heads"])[None, :]
    pairs = jnp.sum(active)
    return {
        "loss": jnp.mean(nll(z, problem["test_y"])),
        "accuracy": jnp.mean(jnp.argmax(z, axis=1) == problem["test_y"]),
        "exact_accuracy": jnp.sum((jnp.argmax(ez, axis=1) == y) & active) / pairs,
        "min_correct": jnp.min(jnp.where(active, correct, jnp.inf)),
        "max_wrong": jnp.max(jnp.where(active, wrong, -jnp.inf)),
        "attention_accuracy": jnp.sum(hits & live) / jnp.sum(live),
        "ov_error": ov_error(params, problem, shape, dyn),
        "group_size": dyn["M"],
        "heads": dyn["heads"],
    }


def num_params(config) -> float:
    """4·H·d·d_h, the paper's count of the attention parameters (embeddings not counted)."""
    return 4 * config["H"] * config["d"] * config["d_h"]


def info_bits(config) -> float:
    """S·R·log₂ D: the main term of the Thm 8 lower bound (facts stored)."""
    return bits(config["S"] * config["R"], config["D"])


def flops_per_step(config) -> float:
    """Forward + backward (≈ 3× forward) FLOPs of `batch` sequences as `forward` computes them (what a
    training step would cost): the query and W_Kᵀ W_Q x_T, T scores and the attended mix per head, V and
    O, then the logits."""
    d, dh, H, T = config["d"], config["d_h"], config["H"], config["T"]
    outputs = answer_count(config)
    if config["decode"] == "vocabulary":
        outputs += vocab_size(config)
    forward_one = 2 * (4 * H * d * dh + 2 * T * H * d + d * outputs)
    return 3.0 * config["batch"] * forward_one


EXPERIMENT = Experiment(
    name="thm10_construction",
    doc="Thm 10's attention-only construction (eqs. 11-12, hard attention), no training (Nichani et al. App. C)",
    fields=FIELDS,
    init=init,
    evaluate=evaluate,
    metrics=METRICS,
    resolve=resolve,
    derived=DERIVED,
    check=check,
    costs=Costs(params=num_params, bits=info_bits, flops_per_step=flops_per_step),
)
