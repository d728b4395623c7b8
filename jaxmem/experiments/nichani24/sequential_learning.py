"""Sequential learning of facts: the models of Nichani, Lee & Bietti (2024) §5 (spec §2.5, §2.6, §4.6, §6).

Task: the synthetic factual recall of `facts` (§4.1, spec §3.2), with its sampler and random
dictionary: subjects 0..S−1, relations S..S+R−1, noise S+R..S+R+|N|−1
(|N| = S + R unless `noise` is set), EOS = S+R+|N|, answers 0..RD−1, p(s, r) uniform. The default
dictionary is the authors' structured one for Fig 5 (spec §3.2), a*(s, r) = ⌊sD/S⌋ + rD, under which
p*(·|r) is exactly uniform on block r; `dictionary = "random"` draws each a*(s, r) uniformly from block r
with replacement (`facts.fact_dict`).

Models (`model`), all read the last position (EOS) only and put a softmax over the answers only (eq. 14):

- `linear_attention`, eqs. (13)–(15): one-hot embeddings (d = |V|) and the authors' parameters
  (`sequential-learning.ipynb`, spec §2.5 [C]) A ∈ R^{|V|×|V|} and V ∈ R^{|V|×|A|}, logits
  Σ_t (x_Tᵀ A x_t) x_tᵀ V. With one-hot x, W_KQ(z) = A[EOS, z] and W_OV(a, z) = V[z, a], so the logits are
  ℓ_a = Σ_z C(z) W_KQ(z) W_OV(a, z) with C(z) the count of token z in the sequence (App. D.1); that is
  how they are computed. Trained on sequences sampled inside the step.
- `softmax_head`, §2.6: the same A ∈ R^{d×d}, V ∈ R^{d×|A|} with fixed embeddings uniform on the unit
  sphere of R^d, a softmax over the positions of the scores x_Tᵀ A x_t (no 1/√d scaling, as the code),
  logits Σ_t softmax_t · x_tᵀ V. The scores depend on the token only, so the softmax over positions is a
  softmax over tokens of score(z) + ln C(z).
- `population`: the exact population loss in the reduced coordinates θ = {W_OV(a, z), W_KQ(z)} (spec
  §6.1), L = Σ_{s,r} p(s, r) CE(softmax_a(Σ_z C̄_{s,r}(z) W_KQ(z) W_OV(a, z)), a*(s, r)), with C̄ = 1 for s,
  r and EOS and the expected count (T−3)/|N| for every noise token. Its gradient is deterministic, so
  SGD on it is gradient descent on the population loss. For the structured dictionary with uniform p
  and an init constant across answers (both inits below) the noise and EOS rows stay constant across a
  and their logit terms cancel, so this IS the exact population loss (spec §6.3). For a random
  dictionary the noise enters only through its expected count — a mean-field approximation of
  E_noise[CE] (Jensen); the sampled `linear_attention` model is the exact one there.

Inits (`init`, scale α = `init_scale`): "constant", every weight = α (the authors' 1e−5, App. A.3), or
"balanced", Assumption 2: W_OV = α and W_KQ = α√(|A|+1) (for the A, V models: every entry of A is
α√(|A|+1), of V is α). `init` and `dictionary` are traced, so runs with either share one program.

Metrics (spec §4.6, §6.4): loss; accuracy; relation_loss E[−ln Σ_{a∈A_r} p̂(a)] and subject_loss
E[−ln Σ_{a∈A_s} p̂(a)] with the general sets A_r = {a*(s, r)}_s, A_s = {a*(s, r)}_r (spec §10 item 13);
hallucination, the eq. (16) distance Σ_a (p*(a|r) − p̂(a|z))² averaged over sequences (p*(a|r) =
Σ_s p(s|r) 1(a = a*(s, r))); and, for the reduced models (`linear_attention`, `population`), the Lemma 4
invariant drift max_z |W_KQ(z)² − ‖W_OV(·, z)‖² − its init value| and the largest |W_KQ| over subjects
and over noise tokens (the quantities Lemma 5 bounds). Sampled models are evaluated on `test_size`
sequences drawn at init, `population` exactly over every (s, r).

Padding: S, R, D, |N| and d are padded; ids and draws use the true sizes from `dyn` (shape-stable, as
in `facts`), weights outside the true block start at 0 and get zero gradient, padded answers
get logit −inf, so a padded run equals the unpadded one.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import optax

from jaxmem.experiments import draws as jr
from jaxmem.experiments.interface import Costs, Experiment, size, static, traced
from jaxmem.experiments.nichani24.facts import (
    answer_count,
    eos_id,
    fact_dict,
    info_bits,
    sample,
    vocab_size,
    with_noise,
)

MODELS = ("linear_attention", "softmax_head", "population")
REDUCED = ("linear_attention", "population")  # models whose weights are the reduced coordinates of §6.1
INITS = ("constant", "balanced")
DICTIONARIES = ("structured", "random")

FIELDS = {
    "model": static(str, "linear_attention (eqs. 13-15), softmax_head (§2.6) or population (§6.1)", choices=MODELS),
    "S": size("number of subjects", 16),
    "R": size("number of relations", 4),
    "D": size("answers per relation block (|A| = R·D)", 8),
    "noise": size("number of noise tokens |N|; 0 means |N| = S + R (Fig 5: 20)", 0, minimum=0),
    "T": static(int, "sequence length, EOS included (App. A.3: 32)", 32, minimum=3),
    "d": size("embedding dimension of softmax_head (unspecified in the paper; spec §10 item 15)", 41, minimum=None),
    "batch": static(int, "fresh sequences per training step (sampled models)", 1024, minimum=1),
    "test_size": static(int, "fixed test sequences drawn at init (sampled models)", 1024, minimum=1),
    "init": traced(
        str,
        "constant: every weight = init_scale (authors); balanced: Assumption 2, W_KQ = α√(|A|+1), W_OV = α",
        "constant",
        INITS,
    ),
    "init_scale": traced(float, "α, the init scale (App. A.3: 1e-5)", 1e-5),
    "dictionary": traced(
        str,
        "structured: a*(s, r) = ⌊sD/S⌋ + rD (Fig 5); random: uniform in block r with replacement",
        "structured",
        DICTIONARIES,
    ),
}

METRICS = (
    "loss",
    "accuracy",
    "relation_loss",
    "subject_loss",
    "hallucination",
    "invariant_drift",
    "kq_subject_max",
    "kq_noise_max",
)


def check(config) -> list[str]:
    if config["model"] == "softmax_head" and config["d"] < 1:
        return [f"d = {config['d']} < 1: degenerate embedding dimension"]
    return []


def resolve(config) -> dict:
    """|N| = S + R unless set; d only for softmax_head (one-hot embeddings have d = |V|), batch and
    test_size only for the sampled models (population runs of any batch share a program)."""
    sampled = config["model"] != "population"
    return {
        **with_noise(config),
        "d": config["d"] if config["model"] == "softmax_head" else 0,
        "batch": config["batch"] if sampled else 0,
        "test_size": config["test_size"] if sampled else 0,
    }


# ---------------------------------------------------------------------------------------------- task


def structured_dict(shape, dyn) -> jax.Array:
    """(S_pad, R_pad) a*(s, r) = ⌊sD/S⌋ + rD (the authors' Fig 5 dictionary, spec §3.2); 0 outside the task."""
    s, r = jnp.arange(shape["S"])[:, None], jnp.arange(shape["R"])[None, :]
    facts = (s * dyn["D"]) // dyn["S"] + r * dyn["D"]
    return jnp.where(jr.block_mask((shape["S"], shape["R"]), dyn["S"], dyn["R"]), facts, 0).astype(jnp.int32)


def facts_of(key, shape, dyn) -> jax.Array:
    """The dictionary a*(s, r): structured, or random with replacement (`facts.fact_dict`)."""
    structured = dyn["dictionary"] == DICTIONARIES.index("structured")
    return jnp.where(structured, structured_dict(shape, dyn), fact_dict(key, shape, dyn))


def answer_sets(facts, shape, dyn) -> dict:
    """p*(a|r) = Σ_s p(s|r) 1(a = a*(s, r)) (R_pad, A_pad) for uniform p, and the indicators of
    A_r = {a*(s, r)}_s (R_pad, A_pad) and A_s = {a*(s, r)}_r (S_pad, A_pad)."""
    active = jr.block_mask(facts.shape, dyn["S"], dyn["R"])
    hits = jax.nn.one_hot(facts, answer_count(shape)) * active[..., None]  # (S, R, A)
    p_star = hits.sum(0) / dyn["S"]
    return {"p_star": p_star, "in_r": p_star > 0, "in_s": hits.sum(1) > 0}


def token_counts(tokens, size: int) -> jax.Array:
    """C(z_{1:T}, z): (n, size) counts of every token id in each sequence of (n, T) ids."""
    rows = jnp.arange(tokens.shape[0])[:, None]
    return jnp.zeros((tokens.shape[0], size)).at[rows, tokens].add(1.0)


def expected_counts(shape, dyn):
    """Every (s, r) pair (S_pad·R_pad rows): expected counts C̄ (1 for s, S + r and EOS, (T−3)/|N| for each
    noise token), s, r and the weight p(s, r) = 1/(SR) (0 for padded pairs)."""
    S, R, V, T = shape["S"], shape["R"], vocab_size(shape), shape["T"]
    s, r = (a.ravel() for a in jnp.meshgrid(jnp.arange(S), jnp.arange(R), indexing="ij"))
    z = jnp.arange(V)[None, :]
    is_noise = (z >= dyn["S"] + dyn["R"]) & (z < eos_id(dyn))
    counts = jnp.where(is_noise, (T - 3) / dyn["noise"], 0.0)
    counts = counts + (z == s[:, None]) + (z == dyn["S"] + r[:, None]) + (z == eos_id(dyn))
    active = (s < dyn["S"]) & (r < dyn["R"])
    return counts, s, r, active / (dyn["S"] * dyn["R"])


# --------------------------------------------------------------------------------------------- model


def init(key, shape, dyn):
    """Weights α (W_KQ-side α√(|A|+1) under Assumption 2) on the true block, 0 in the padding; the
    dictionary, its answer sets and the evaluation set (test sequences, or every (s, r) pair)."""
    model, V, A = shape["model"], vocab_size(shape), answer_count(shape)
    k_fact, k_test, k_embed = jax.random.split(key, 3)
    answers = answer_count(dyn)
    alpha = dyn["init_scale"]
    kq = alpha * jnp.where(dyn["init"] == INITS.index("balanced"), jnp.sqrt(answers + 1.0), 1.0)
    vocab = vocab_size(dyn)
    problem = {"facts": facts_of(k_fact, shape, dyn)}
    problem.update(answer_sets(problem["facts"], shape, dyn))
    if model == "population":
        params = {
            "W_KQ": jnp.where(jr.active_mask(V, vocab), kq, 0.0),
            "W_OV": jnp.where(jr.block_mask((V, A), vocab, answers), alpha, 0.0),  # W_OV[z, a] = W_OV(a, z)
        }
        counts, s, r, weight = expected_counts(shape, dyn)
    else:
        width = V if model == "linear_attention" else shape["d"]
        dim = vocab if model == "linear_attention" else dyn["d"]
        params = {
            "A": jnp.where(jr.block_mask((width, width), dim, dim), kq, 0.0),
            "V": jnp.where(jr.block_mask((width, A), dim, answers), alpha, 0.0),
        }
        if model == "softmax_head":
            (gauss,) = jr.normal_matrices(k_embed, [(V, width)])
            problem["wte"] = jr.sphere_rows(gauss, vocab, dyn["d"])
        tokens, s, r = sample(k_test, shape["test_size"], shape, dyn)
        counts, weight = token_counts(tokens, V), jnp.full(s.shape, 1.0 / shape["test_size"])
    problem.update(eval_counts=counts, eval_s=s, eval_r=r, eval_weight=weight)
    if model in REDUCED:
        problem["invariant0"] = invariant(*reduced(params, dyn, model))
    return params, problem


def reduced(params, dyn, model):
    """(W_KQ (V_pad,), W_OV (V_pad, A_pad) with rows z) of a reduced model: A[EOS, ·] and V for one-hot
    linear attention (spec §2.5), the parameters themselves for `population`."""
    if model == "population":
        return params["W_KQ"], params["W_OV"]
    return params["A"][eos_id(dyn)], params["V"]


def invariant(kq, ov) -> jax.Array:
    """Lemma 4: W_KQ(z)² − ‖W_OV(·, z)‖², conserved by gradient flow, for every token z."""
    return kq**2 - jnp.sum(ov**2, axis=1)


def logits(params, problem, shape, dyn, counts) -> jax.Array:
    """Answer logits (n, A_pad) from token counts (n, V_pad); padded answers −inf.
    Reduced models: ℓ_a = Σ_z C(z) W_KQ(z) W_OV(a, z) (eq. 13, App. D.1). softmax_head: scores
    x_EOSᵀ A x_z, softmax over positions = softmax over tokens of score + ln C, then Σ_z w_z x_zᵀ V (§2.6)."""
    if shape["model"] in REDUCED:
        kq, ov = reduced(params, dyn, shape["model"])
        z = counts @ (kq[:, None] * ov)
    else:
        wte = problem["wte"]
        scores = wte @ (wte[eos_id(dyn)] @ params["A"])
        weights = jax.nn.softmax(jnp.where(counts > 0, scores[None, :] + jnp.log(counts), -jnp.inf), axis=-1)
        z = weights @ (wte @ params["V"])
    return jnp.where(jr.active_mask(answer_count(shape), answer_count(dyn))[None, :], z, -jnp.inf)


def _nll(log_p, y):
    return -jnp.take_along_axis(log_p, y[:, None], axis=1)[:, 0]


def _weighted_mean(weight, x):
    """Σ weight·x, with rows of weight 0 (padded (s, r) pairs, whose sets are empty) left out."""
    return jnp.sum(jnp.where(weight > 0, weight * x, 0.0))


def _set_loss(log_p, members):
    """−ln Σ_{a ∈ set} p̂(a) for each row."""
    return -jax.nn.logsumexp(jnp.where(members, log_p, -jnp.inf), axis=-1)


def loss(params, problem, shape, dyn, key) -> jax.Array:
    """Eq. (15): cross-entropy over the answers, on a fresh batch sampled from the step's key, or (population)
    exactly, over every (s, r) with the expected counts (the key is then unused)."""
    if shape["model"] == "population":
        counts, s, r, weight = (problem[k] for k in ("eval_counts", "eval_s", "eval_r", "eval_weight"))
    else:
        tokens, s, r = sample(key, shape["batch"], shape, dyn)
        counts, weight = token_counts(tokens, vocab_size(shape)), 1.0 / shape["batch"]
    log_p = jax.nn.log_softmax(logits(params, problem, shape, dyn, counts), axis=-1)
    return _weighted_mean(weight, _nll(log_p, problem["facts"][s, r]))


def evaluate(params, problem, shape, dyn) -> dict:
    """The metrics of the module docstring, as weighted means over the evaluation set."""
    s, r, weight = problem["eval_s"], problem["eval_r"], problem["eval_weight"]
    y = problem["facts"][s, r]
    log_p = jax.nn.log_softmax(logits(params, problem, shape, dyn, problem["eval_counts"]), axis=-1)
    mean = lambda x: _weighted_mean(weight, x)  # noqa: E731
    metrics = {
        "loss": mean(_nll(log_p, y)),
        "accuracy": mean(jnp.argmax(log_p, axis=1) == y),
        "relation_loss": mean(_set_loss(log_p, problem["in_r"][r])),
        "subject_loss": mean(_set_loss(log_p, problem["in_s"][s])),
        "hallucination": mean(jnp.sum((problem["p_star"][r] - jnp.exp(log_p)) ** 2, axis=1)),
    }
    if shape["model"] in REDUCED:
        kq, ov = reduced(params, dyn, shape["model"])
        z = jnp.arange(vocab_size(shape))
        noise = (z >= dyn["S"] + dyn["R"]) & (z < eos_id(dyn))
        metrics.update(
            invariant_drift=jnp.max(jnp.where(z <= eos_id(dyn), jnp.abs(invariant(kq, ov) - problem["invariant0"]), 0)),
            kq_subject_max=jnp.max(jnp.where(z < dyn["S"], jnp.abs(kq), 0.0)),
            kq_noise_max=jnp.max(jnp.where(noise, jnp.abs(kq), 0.0)),
        )
    return metrics


def optimizer(dyn) -> optax.GradientTransformation:
    """Plain SGD, constant rate, no weight decay (the authors' Fig 5 loop, spec §4.6)."""
    return optax.sgd(dyn["lr"])


def num_params(config) -> float:
    """Population: |A|·|V| + |V| reduced coordinates (spec §2.5). linear_attention: the authors' A (|V|×|V|)
    and V (|V|×|A|). softmax_head: A (d×d) and V (d×|A|)."""
    V, A = vocab_size(config), answer_count(config)
    if config["model"] == "population":
        return A * V + V
    d = V if config["model"] == "linear_attention" else config["d"]
    return d * d + d * A


def flops_per_step(config) -> float:
    """Forward + backward (≈ 3× forward) of the logits: one (counts × |V|) @ (|V| × |A|) product per
    sequence (batch) or per (s, r) pair (population); softmax_head adds its d-dimensional readout."""
    V, A = vocab_size(config), answer_count(config)
    rows = config["S"] * config["R"] if config["model"] == "population" else config["batch"]
    readout = 2 * V * config["d"] * (A + config["d"]) if config["model"] == "softmax_head" else 0
    return 3.0 * (rows * 2 * V * A + readout)


EXPERIMENT = Experiment(
    name="sequential_learning",
    doc="Sequential learning of facts: linear attention, a softmax head and the population model (Nichani et al. §5)",
    fields=FIELDS,
    init=init,
    loss=loss,
    evaluate=evaluate,
    metrics=METRICS,
    optimizer=optimizer,
    resolve=resolve,
    check=check,
    # bits: the Thm 8 lower bound of a random dictionary (the structured one carries no information beyond its rule)
    costs=Costs(params=num_params, bits=info_bits, flops_per_step=flops_per_step),
)
