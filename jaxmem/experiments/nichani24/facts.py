"""The synthetic factual-recall task (Nichani, Lee, Bietti 2024, §4.1; spec §3.2) shared by
`factual_recall`, `sequential_learning` and `thm10_construction`.

Authors' `task.py::FactRecall`, 0-based token ids: subjects 0..S−1, relations S..S+R−1, noise
S+R..S+R+|N|−1 (|N| = S+R unless `noise` is set), EOS = S+R+|N|. A sequence of length T has the subject
at loc ~ U{0..T−2}, the relation at another uniform slot of 0..T−2 (rloc ~ U{0..T−3}, shifted past loc),
i.i.d. uniform noise elsewhere and EOS at T−1. The target is fact_dict[s, r], drawn for each (s, r) with
replacement from the block {D·r, …, D·r + D − 1} of the RD answers (`distinct`: a per-relation random
permutation instead, so the S subjects get distinct answers; needs S ≤ D). p(s, r) is uniform.

Token ids, answer ids and every draw use the TRUE sizes from `dyn` with shape-stable draws
(`jaxmem.experiments.draws`), so a padded problem equals the unpadded one on its active block.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxmem.experiments import draws as jr
from jaxmem.experiments.interface import bits, size, static

FIELDS = {
    "S": size("number of subjects", minimum=None),
    "R": size("number of relations", minimum=None),
    "D": size("answers per relation block (|A| = R·D)", 8, minimum=None),
    "noise": size("number of noise tokens |N|; 0 means |N| = S + R (paper §4.4)", 0, minimum=0),
    "T": static(int, "sequence length, EOS included (App. A.3: 32)", 32),
}


def with_noise(config) -> dict:
    """The config with |N| = S + R where `noise` is 0 (paper §4.4)."""
    return {**config, "noise": config["noise"] or config["S"] + config["R"]}


def eos_id(sizes):
    """EOS = S + R + |N| (of a shape, traced values or a resolved config)."""
    return sizes["S"] + sizes["R"] + sizes["noise"]


def vocab_size(sizes):
    """|V| = S + R + |N| + 1, the input vocabulary (answers are outputs only)."""
    return eos_id(sizes) + 1


def answer_count(sizes):
    """|A| = R·D."""
    return sizes["R"] * sizes["D"]


def info_bits(config) -> float:
    """The Thm 8 lower bound (eq. 18) on the bits any model needs to store the facts at zero loss,
    S·R·log₂ D + R·D·log₂(|V|/D), with the unspecified constant c taken as 0 and the paper's vocabulary
    |V| = S + R + |A| + |N| + 1 (answers included, spec §3.2)."""
    S, R, D = config["S"], config["R"], config["D"]
    vocab = S + R + R * D + config["noise"] + 1
    return bits(S * R, D) + bits(R * D, vocab / D)


def _uniform_ints(u, n):
    """⌊u·n⌋ for u ∈ (0, 1), kept below a traced bound n."""
    return jnp.minimum(jnp.floor(u * n).astype(jnp.int32), n - 1)


def fact_dict(key, shape, dyn, distinct: bool = False) -> jax.Array:
    """(S_pad, R_pad) answer ids; entry (s, r) depends only on (key, s, r) and the true sizes."""
    S, R, D = shape["S"], shape["R"], shape["D"]
    r = jnp.arange(R)[None, :]
    if distinct:
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
    x = jnp.where(pos == T - 1, eos_id(dyn), x)
    return x.astype(jnp.int32)


def sample(key, n: int, shape, dyn):
    """n fresh sequences: (tokens (n, T), subject (n,), relation (n,)), from one uniform draw of shape
    (n, T + 4) that never depends on padding: subject, relation, loc, rloc, then T noise ids."""
    T = shape["T"]
    u = jax.random.uniform(key, (n, T + 4), minval=1e-7, maxval=1.0 - 1e-7)
    subject, relation = _uniform_ints(u[:, 0], dyn["S"]), _uniform_ints(u[:, 1], dyn["R"])
    loc, rloc = _uniform_ints(u[:, 2], T - 1), _uniform_ints(u[:, 3], T - 2)
    noise = _uniform_ints(u[:, 4:], dyn["noise"])
    return _assemble(subject, relation, loc, rloc, noise, shape, dyn), subject, relation


def exact_set(key, shape, dyn, subjects: int):
    """One random context for every (s, r) with s < `subjects`: tokens (subjects·R_pad, T), s, r, active
    mask. The draws for (s, r) are row s, columns r·(T+2) … r·(T+2)+T+1 of one matrix: shape-stable in (s, r)."""
    R, T = shape["R"], shape["T"]
    (u,) = jr.uniform_matrices(key, [(subjects, R * (T + 2))])
    u = u.reshape(subjects * R, T + 2)
    subject, relation = (a.ravel() for a in jnp.meshgrid(jnp.arange(subjects), jnp.arange(R), indexing="ij"))
    loc, rloc = _uniform_ints(u[:, 0], T - 1), _uniform_ints(u[:, 1], T - 2)
    noise = _uniform_ints(u[:, 2:], dyn["noise"])
    tokens = _assemble(subject, relation, loc, rloc, noise, shape, dyn)
    active = (subject < dyn["S"]) & (relation < dyn["R"])
    return tokens, subject, relation, active


def nll(z, y):
    """−log softmax(z)[y] per row."""
    return -jnp.take_along_axis(jax.nn.log_softmax(z, axis=-1), y[:, None], axis=1)[:, 0]
