"""Implicit bias of next-token prediction in a linear decoder (Thrampoulidis 2024; spec 004).

m distinct contexts with fixed embeddings h̄_j ∈ R^d, a vocabulary of V tokens, next-token
distributions p̂_j with sparse supports S_j (|S_j| = `support`), and a trained linear decoder
W ∈ R^{V×d} with logits ℓ_j = W h̄_j. The loss is the NTP cross-entropy (Eq. 2)
CE(W) = −Σ_j π̂_j Σ_{z∈S_j} p̂_{j,z} log S_z(W h̄_j), whose infimum is the entropy ℋ (never attained).

Instance generator (spec §2.1 [rec], the choices that reproduce the paper's ℋ ≈ 1.445 nats):
- h̄_j ~ N(0, I_d) i.i.d. entries (spec §7 A1);
- S_j = a uniformly random `support`-subset of [V], independent across j (duplicates allowed, A4): the
  `support` tokens with the smallest of V i.i.d. uniforms;
- p̂_j | S_j ~ Dirichlet(1, …, 1) on S_j (normalised exponentials), zero off-support (A2);
- π̂_j = 1/m: the population ("direct") mode, the spec's default (A3). The sampled n = 5000 mode is not
  built, so there is no `n` field (n only enters the theory through π̂_j ≥ 1/n).
- init (spec §3.1, A5): `lecun` W_0 ~ N(0, 1/d) (fan-in d), or `zero` (the control).
All draws are shape-stable (jaxmem.experiments.draws): entry (j, i) of each matrix depends only on the key and
(j, i), so m, d and V are all padded like the other experiments (true sizes in `dyn`): padded contexts
get π̂ = 0, padded embedding dims are zero in H̄ and W_0, padded tokens get logits −1e30 (never −inf,
spec §2.3) and are neither in- nor out-of-support.

Optimisers (spec §3.1), a traced choice (dyn["optimizer"] = 0, 1, 2; all three share one bucket and one
program: the Adam moments are carried and updated for every run, the update is selected by
jnp.select — a few V×d arrays, negligible), each at step size `lr × eta`, where `eta` defaults to
the paper's step for that optimiser (GD 0.5, NGD 0.01, Adam 0.01) so that one sweep's
`learning_rates = [1.0]` reproduces Figs 4–5 while grid-ing over the optimiser. The direction is
scaled by −lr·eta:
- `gd`: the gradient itself; `ngd`: ∇/‖∇‖_F (A6: gradient-norm normalisation, the Frobenius norm
  over the whole parameter tree, `normalize_by_global_norm()`);
- `adam`: optax.scale_by_adam with β = (0.9, 0.99), ε = 1e-8, standard bias correction (A7).

The 2-D toy (`instance = "toy2d"`, spec §2.2, Figs 1–2): the paper's caption cannot be realised
exactly (spec A10), so the spec's deterministic instance is used: three unit contexts at 90°, 210°,
330°, supports {2,3,4}, {1,2,5}, {1,4,5} (1-based) with fixed probabilities; the seed draws W_0 only.

References (`geometry.py`, computed at initialisation in float32): W* (Eq. 4 in F), P_F, the NTP-SVM
direction W^mm (Def. 3) and the predicates `compatible` / `separable` (Defs. 1–2). They are the
experiment's precondition: an instance failing either is rejected (never trained) and named by the
driver. The float64 authority (clarabel QP, HiGHS LP) is `reference.py`, the experiment's host reference.

Metrics (spec §3.2): loss (CE), loss_gap = KL_in + out (D3, never CE − ℋ in float32: A15), gap_in
(depends only on P_F W), gap_out (out-of-support mass), w_norm = ‖W‖_F, w_perp_norm = ‖P_⊥W‖_F,
dist_F = ‖P_F W − W*‖_F and rel_dist_F, cos_mm = cos(W, W^mm) (Thm 2), cos_mm_corr = cos(W − W*, W^mm),
cos_perp = cos(P_⊥W, W^mm), margin_perp = min_{j, v∉S_j} ⟨X_{j,v}, P_⊥W⟩/‖P_⊥W‖ (→ 1/‖W^mm‖),
logodds_err = max |⟨X_{j,z'}, W⟩ − log(p̂_{j,z_j}/p̂_{j,z'})|, accuracy = fraction of contexts whose
every in-support logit exceeds every out-of-support logit, and the constants entropy, wmm_norm,
wstar_norm, compatible, separable. With `[train] steps = 0` only the predicates matter: the
separability-threshold sweeps search the smallest d at which they hold (the draws are shape-stable
and d, m are in `same_problem_across`, so the instances of one seed are nested along d).
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import optax

from jaxmem.experiments import draws as jr
from jaxmem.experiments.interface import Costs, Experiment, HostRun, Reference, bits, size, static, traced
from jaxmem.experiments.thrampoulidis24 import geometry as geo
from jaxmem.experiments.thrampoulidis24 import reference as ref
from jaxmem.experiments.thrampoulidis24.figures import instance_figure
from jaxmem.experiments.optimizers import select_by_index

OPTIMIZERS = ("gd", "ngd", "adam")
PAPER_ETA = {"gd": 0.5, "ngd": 0.01, "adam": 0.01}  # spec §3.1 (App. A.2)
NEG = -1e30  # logit of a padded token (spec §2.3: never -inf)
SAME_PROBLEM_ACROSS = ("optimizer", "eta", "init", "svm_iters", "d", "m")  # nested draws along d and m
TOY2D = {"m": 3, "d": 2, "V": 5, "support": 3}  # spec §2.2
TOY2D_H = np.array([[0.0, 1.0], [-math.sqrt(3) / 2, -0.5], [math.sqrt(3) / 2, -0.5]])  # h_A, h_B, h_C
TOY2D_P = np.array([[0.0, 0.5, 0.3, 0.2, 0.0], [0.7, 0.2, 0.0, 0.0, 0.1], [0.6, 0.0, 0.0, 0.3, 0.1]])

FIELDS = {
    "m": size("number of distinct contexts", maximum=jr.ROWS_LIMIT),
    "d": size("embedding dimension", maximum=jr.COLS_LIMIT),
    "V": size("vocabulary size", minimum=2, maximum=jr.COLS_LIMIT),
    "support": traced(int, "next-token support size |S_j| of every context", minimum=1),
    "optimizer": traced(str, "gd | ngd (gradient-norm normalised GD) | adam", "gd", OPTIMIZERS),
    "eta": traced(float, "step size (times lr); 0 = the paper's: gd 0.5, ngd/adam 0.01", 0.0, minimum=0.0),
    "init": static(str, "lecun (N(0, 1/d)) or zero", "lecun", ("lecun", "zero")),
    "instance": static(str, "gaussian (spec §2.1) or toy2d (spec §2.2)", "gaussian", ("gaussian", "toy2d")),
    "svm_iters": static(int, "FISTA iterations of the NTP-SVM dual (W^mm, separability)", 2000, minimum=1),
}


def check(config) -> list[str]:
    problems = []
    if config["support"] > config["V"]:
        problems.append(f"support = {config['support']} > V = {config['V']}")
    if config["support"] == config["V"]:
        problems.append("support = V: no out-of-support token (the paper's standing assumption S_j < V fails)")
    if config.get("instance") == "toy2d" and any(config[k] != v for k, v in TOY2D.items()):
        problems.append(f"instance = toy2d needs {', '.join(f'{k} = {v}' for k, v in TOY2D.items())}")
    return problems


def resolve(config) -> dict:
    """eta = 0 stands for the paper's step size of the run's optimiser."""
    return {**config, "eta": float(config["eta"]) or PAPER_ETA[config["optimizer"]]}


def padded(array: np.ndarray, shape) -> jax.Array:
    return jnp.zeros(shape, jnp.float32).at[: array.shape[0], : array.shape[1]].set(array)


def gaussian_data(key, shape, dyn) -> dict:
    """Spec §2.1: N(0, I_d) embeddings, uniform random supports, Dirichlet(1) probabilities."""
    m, d, V = shape["m"], shape["d"], shape["V"]
    (gauss_h,) = jr.normal_matrices(key, [(m, d)])
    u_support, u_prob = jr.uniform_matrices(jax.random.fold_in(key, 1), [(m, V), (m, V)])
    rows, tokens = jr.active_mask(m, dyn["m"]), jr.active_mask(V, dyn["V"])
    H = jnp.where(jr.block_mask((m, d), dyn["m"], dyn["d"]), gauss_h, 0.0)
    u = jnp.where(tokens[None, :], u_support, 2.0)  # padded tokens rank last
    rank = jnp.sum(u[:, None, :] < u[:, :, None], axis=2)  # rank[j, v] = #{v' : u[j, v'] < u[j, v]}
    mask = (rank < dyn["support"]) & tokens[None, :] & rows[:, None]
    expo = jnp.where(mask, -jnp.log(u_prob), 0.0)  # Dirichlet(1) = normalised Exp(1)
    return {"H": H, "P": expo / jnp.maximum(jnp.sum(expo, axis=1, keepdims=True), 1e-30), "mask": mask}


def toy2d_data(shape) -> dict:
    """Spec §2.2: the deterministic 2-D instance, padded."""
    P = padded(TOY2D_P, (shape["m"], shape["V"]))
    return {"H": padded(TOY2D_H, (shape["m"], shape["d"])), "P": P, "mask": P > 0}


def instance(key, shape, dyn) -> dict:
    """The data: H (m, d), P (m, V) zeros off-support, mask (m, V), pi (m,), tokens (V,), plus W_0."""
    m, d, V = shape["m"], shape["d"], shape["V"]
    data = toy2d_data(shape) if shape["instance"] == "toy2d" else gaussian_data(key, shape, dyn)
    rows = jr.active_mask(m, dyn["m"])
    (gauss_w,) = jr.normal_matrices(jax.random.fold_in(key, 2), [(V, d)])
    W0 = jnp.where(jr.block_mask((V, d), dyn["V"], dyn["d"]), gauss_w / jnp.sqrt(dyn["d"]), 0.0)
    pi = jnp.where(rows, 1.0 / dyn["m"], 0.0)
    return {**data, "pi": pi, "tokens": jr.active_mask(V, dyn["V"]), "W0": W0}


def entropy(problem) -> jax.Array:
    """ℋ = −Σ_j π̂_j Σ_z p̂_{j,z} log p̂_{j,z}: the infimum of CE."""
    return -jnp.sum(problem["pi"][:, None] * jax.scipy.special.xlogy(problem["P"], problem["P"]))


def project_F(W, problem) -> jax.Array:
    return geo.project_F(W, problem["F_basis"])


def init(key, shape, dyn):
    problem = instance(key, shape, dyn)
    W0 = problem.pop("W0")
    problem["entropy"] = entropy(problem)
    problem.update(geo.references(problem, shape["svm_iters"]))
    return {"W": W0 if shape["init"] == "lecun" else jnp.zeros_like(W0)}, problem


def logits(params, problem) -> jax.Array:
    """ℓ_j = W h̄_j, one row per context; padded tokens at −1e30."""
    return jnp.where(problem["tokens"][None, :], problem["H"] @ params["W"].T, NEG)


def loss(params, problem, shape, dyn, key=None) -> jax.Array:
    """The NTP cross-entropy (Eq. 2), full batch and deterministic (the step key is unused)."""
    logp = jax.nn.log_softmax(logits(params, problem), axis=1)
    return -jnp.sum(problem["pi"][:, None] * jnp.where(problem["mask"], problem["P"] * logp, 0.0))


def gap_parts(params, problem):
    """CE − ℋ = KL_in + out (spec D3), each ≥ 0 and computed without cancellation."""
    L, mask, P = logits(params, problem), problem["mask"], problem["P"]
    out_mask = problem["tokens"][None, :] & ~mask
    lse_in = jax.nn.logsumexp(jnp.where(mask, L, NEG), axis=1)
    lse_out = jax.nn.logsumexp(jnp.where(out_mask, L, NEG), axis=1)
    kl = jnp.sum(jnp.where(mask, jax.scipy.special.xlogy(P, P) - P * (L - lse_in[:, None]), 0.0), axis=1)
    out = jnp.where(jnp.any(out_mask, axis=1), jax.nn.softplus(lse_out - lse_in), 0.0)
    return jnp.sum(problem["pi"] * kl), jnp.sum(problem["pi"] * out)


def cosine(a, b) -> jax.Array:
    return jnp.sum(a * b) / jnp.maximum(jnp.linalg.norm(a) * jnp.linalg.norm(b), 1e-30)


def evaluate(params, problem, shape, dyn) -> dict:
    W, W_mm, W_star = params["W"], problem["W_mm"], problem["W_star"]
    g = geo.grid(problem)
    gap_in, gap_out = gap_parts(params, problem)
    WF = project_F(W, problem)
    W_perp = W - WF
    dist = jnp.linalg.norm(WF - W_star)
    X_perp = geo.apply_X(W_perp, problem["H"], g["onehot"])
    X_W = geo.apply_X(W, problem["H"], g["onehot"])
    L, mask = logits(params, problem), problem["mask"]
    min_in = jnp.min(jnp.where(mask, L, jnp.inf), axis=1)
    max_out = jnp.max(jnp.where(problem["tokens"][None, :] & ~mask, L, -jnp.inf), axis=1)
    separated = (min_in > max_out) & jr.active_mask(shape["m"], dyn["m"])
    return {
        "loss": loss(params, problem, shape, dyn),
        "loss_gap": gap_in + gap_out,
        "gap_in": gap_in,
        "gap_out": gap_out,
        "entropy": problem["entropy"],
        "w_norm": jnp.linalg.norm(W),
        "w_perp_norm": jnp.linalg.norm(W_perp),
        "dist_F": dist,
        "rel_dist_F": dist / jnp.maximum(jnp.linalg.norm(W_star), 1e-30),
        "cos_mm": cosine(W, W_mm),
        "cos_mm_corr": cosine(W - W_star, W_mm),
        "cos_perp": cosine(W_perp, W_mm),
        "margin_perp": jnp.min(jnp.where(g["B"], X_perp, jnp.inf)) / jnp.maximum(jnp.linalg.norm(W_perp), 1e-30),
        "logodds_err": jnp.max(jnp.where(g["F"], jnp.abs(X_W - g["b"]), 0.0)),
        "accuracy": jnp.sum(separated) / dyn["m"],
        "wmm_norm": jnp.linalg.norm(W_mm),
        "wstar_norm": jnp.linalg.norm(W_star),
        "wmm_margin": problem["wmm_margin"],
        "compatible": problem["compatible"],
        "separable": problem["separable"],
    }


def host_figure(path, run: HostRun):
    """Figs 1–3: the instance's probabilities and, for d = 2, the rows of W^mm and W* (figures.py)."""
    inst = host_instance(run)
    mm = attempt(ref.w_mm, inst, [])
    return instance_figure(path, inst.H, inst.P, mm.W if mm is not None else None, ref.w_star(inst)[0])


def attempt(solve, inst, notes: list[str]):
    """solve(inst), or None with the solver's complaint noted (a near-degenerate instance without a verdict)."""
    try:
        return solve(inst)
    except RuntimeError as err:
        notes.append(str(err))
        return None


def host_instance(run: HostRun) -> ref.Instance:
    """The run's instance rebuilt on the host from its key, as a float64 reference.Instance."""
    data = instance(run.key, run.shape, {k: jnp.asarray(v) for k, v in run.dyn.items()})
    return ref.Instance.from_arrays(
        *(np.asarray(data[k]) for k in ("H", "P", "mask", "pi")), np.asarray(data["tokens"])
    )


def host_check(run: HostRun) -> dict:
    """The instance re-solved in float64 (reference.py): W* by lstsq, separability by the HiGHS LP (where HiGHS
    reaches no verdict the instance is unverified: `separable` is NaN and `separable_by` says so; the clarabel
    QP's own verdict is `separable_qp`), W^mm by the clarabel QP with its worst KKT residual (spec §5.4 (a)–(f))
    and twin-row gap (g); `problems` names bad input."""
    inst = host_instance(run)
    W_star, residual = ref.w_star(inst)
    notes = ref.diagnose(inst)
    mm = attempt(ref.w_mm, inst, notes)
    lp = attempt(lambda i: ref.separable_lp(i)[0], inst, notes)
    worst = twins = math.nan
    if mm is not None and mm.separable:
        k = ref.kkt_checks(inst, mm.W, mm.lam, W_star)
        worst = max(k["eq_residual"], abs(k["min_margin"] - 1), -min(k["dual_min"], 0.0), k["comp_slack"])
        worst, twins = max(worst, k["stationarity"], k["duality_gap"], k["orthogonality"]), k["symmetry"]
    return {
        "compatible": float(residual < ref.COMPAT_TOL),
        "separable": float(lp) if lp is not None else math.nan,
        "separable_by": "HiGHS LP" if lp is not None else "unverified (HiGHS: no verdict)",
        "separable_qp": float(mm.separable) if mm is not None else math.nan,
        "wstar_norm": float(np.linalg.norm(W_star)),
        "wmm_norm": float(np.linalg.norm(mm.W)) if mm is not None and mm.separable else math.nan,
        "log_odds_residual": float(residual),
        "kkt_worst": worst,
        "twin_rows_gap": twins,  # max ‖w_a − w_b‖ of W^mm over tokens with one support pattern (D9: 0)
        "problems": "; ".join(notes) or "-",
    }


def normalize_by_global_norm(eps: float = 1e-30) -> optax.GradientTransformation:
    """Divide the update by its global (Frobenius) norm: chained with sgd(η), W ← W − η ∇/‖∇‖ (NGD)."""

    def update(updates, state, params=None):
        norm = optax.tree.norm(updates)
        return jax.tree.map(lambda g: g / jnp.maximum(norm, eps), updates), state

    return optax.GradientTransformation(lambda params: optax.EmptyState(), update)


def optimizer(dyn) -> optax.GradientTransformation:
    """GD (sgd), NGD (∇/‖∇‖_F then sgd) or Adam (β 0.9/0.99, ε 1e-8) by dyn["optimizer"], at step lr·eta."""
    directions = (
        optax.identity(),
        normalize_by_global_norm(),
        optax.scale_by_adam(b1=0.9, b2=0.99, eps=1e-8),
    )
    return optax.chain(select_by_index(dyn["optimizer"], directions), optax.scale(-dyn["lr"] * dyn["eta"]))


def num_params(config) -> float:
    return config["V"] * config["d"]


def info_bits(config) -> float:
    """Bits in the supports: m log₂ C(V, support) (a rough content count for reports)."""
    return bits(config["m"], math.comb(config["V"], config["support"]))


def flops_per_step(config) -> float:
    m, d, V = config["m"], config["d"], config["V"]
    return 3.0 * 2 * m * d * V


METRICS = (
    "loss",
    "loss_gap",
    "gap_in",
    "gap_out",
    "entropy",
    "w_norm",
    "w_perp_norm",
    "dist_F",
    "rel_dist_F",
    "cos_mm",
    "cos_mm_corr",
    "cos_perp",
    "margin_perp",
    "logodds_err",
    "accuracy",
    "wmm_norm",
    "wstar_norm",
    "wmm_margin",
    "compatible",
    "separable",
)


EXPERIMENT = Experiment(
    name="ntp_linear",
    doc="Next-token prediction with a linear decoder: gap to entropy, norm growth, P_F(W) → W* (Thrampoulidis 24)",
    fields=FIELDS,
    init=init,
    loss=loss,
    evaluate=evaluate,
    metrics=METRICS,
    optimizer=optimizer,
    resolve=resolve,
    check=check,
    costs=Costs(params=num_params, bits=info_bits, flops_per_step=flops_per_step),
    reference=Reference(check=host_check, figure=host_figure),
    same_problem_across=SAME_PROBLEM_ACROSS,
    precondition=("compatible", "separable"),
)
