"""Associative memories (Nichani, Lee, Bietti 2024, §3): how many input→output pairs fit in d² or 2md weights.

Inputs x ∈ [N] with embeddings e_x and outputs y ∈ [M] with unembeddings u_y, all i.i.d. uniform on
the unit sphere of R^d and frozen (§3 Setup). The target map is the authors' f*(x) = ⌊x·M/N⌋, i.e. the
identity when M = N (Fig 1) and contiguous blocks when M is fixed (Fig 6; equivalent to x mod M up to
relabelling). Models, each predicting argmax_y u_yᵀ F(e_x):

- `linear`:  F(e) = W e, W ∈ R^{d×d} (eq. 1; d² parameters).
- `lowrank`: F(e) = U Vᵀ e with V ∈ R^{d×m} fixed Gaussian, only U trained (Thm 1 low-rank; md params).
- `mlp`:     F(e) = Vᵀ σ(W e + b), ReLU, V, W ∈ R^{m×d} (eq. 2; counted as 2md params like the paper,
             the authors' code adds the bias b).

`init = "hebbian"` starts linear / lowrank memories at the Thm 1 construction W = Σ_x u_{f*(x)} e_xᵀ
(times Σ_i v_i v_iᵀ for lowrank); with zero training steps that measures the construction itself.

`loss_block` (derived, 0 unless the planner sets one): the loss and the argmax over the M outputs are
computed that many outputs at a time (`jaxmem.experiments.blocked_softmax`), never holding the N × M
logits; equal to the dense loss to float32 rounding, in both loss forms. `loss_kernel` (derived, 'xla'
unless the planner sets 'pallas'): the loss's blocked passes as fused kernels with the logits on chip.
"""

from __future__ import annotations


import jax
import jax.numpy as jnp
import optax

from jaxmem.experiments import draws as jr
from jaxmem.experiments.blocked_softmax import (
    LOSS_PATH,
    blocked_argmax,
    blocked_cross_entropy,
    logits_bytes,
    with_loss_block,
)
from jaxmem.experiments.interface import Costs, Experiment, bits, size, static

MODELS = ("linear", "lowrank", "mlp")

FIELDS = {
    "model": static(str, "memory architecture", choices=MODELS),
    "d": size("embedding dimension", maximum=jr.COLS_LIMIT),
    "m": size("hidden width (mlp) or rank (lowrank); unused by linear", default=0, minimum=0, maximum=jr.COLS_LIMIT),
    "N": size("number of stored inputs", maximum=jr.ROWS_LIMIT),
    "M": size(
        "number of outputs; 0 means M = N (f* = identity)",
        default=0,
        minimum=0,
        ladder=lambda c: "M" if c["M"] else "N",
        maximum=jr.ROWS_LIMIT,
    ),
    "init": static(
        str, "standard (lecun_normal, as the authors) or hebbian (Thm 1)", "standard", ("standard", "hebbian")
    ),
    "mlp_bias": static(bool, "first-layer bias in the mlp (authors' code)", default=True),
    "loss_form": static(
        str,
        "log_softmax (stable) or log_of_softmax (authors' log(softmax(.)))",
        default="log_softmax",
        choices=("log_softmax", "log_of_softmax"),
    ),
}


def resolve(config) -> dict:
    """M = 0 stands for M = N; the width is 1 where the model has none; the bias exists in the mlp only;
    the loss is dense unless a `loss_block` is set."""
    uses_width = config["model"] in ("lowrank", "mlp")
    return with_loss_block(
        {
            **config,
            "M": config["M"] or config["N"],
            "m": max(config["m"], 1) if uses_width else 1,
            "mlp_bias": config["mlp_bias"] and config["model"] == "mlp",
        }
    )


def check(config) -> list[str]:
    problems = []
    if config["model"] in ("lowrank", "mlp") and config["m"] < 1:
        problems.append(f"model {config['model']} needs m >= 1, got m = {config['m']}")
    if config["init"] == "hebbian" and config["model"] == "mlp":
        problems.append("init = 'hebbian' exists for the linear and lowrank memories only")
    if config["M"] > config["N"]:
        problems.append(f"M = {config['M']} > N = {config['N']}: some outputs would never be a target")
    return problems


def targets(shape, dyn) -> jax.Array:
    """f*(x) = ⌊x·M/N⌋ for the active inputs (authors' code; identity when M = N), 0 on padding."""
    x = jnp.arange(shape["N"])
    return jnp.where(x < dyn["N"], (x * dyn["M"]) // dyn["N"], 0)


def _lecun(unit_normal, fan_in_active, rows, cols):
    """lecun_normal with the TRUE fan-in, zero outside the active block."""
    return jnp.where(jr.block_mask(unit_normal.shape, rows, cols), unit_normal / jnp.sqrt(fan_in_active), 0.0)


def init(key, shape, dyn):
    d, m, n, mo = shape["d"], shape["m"], shape["N"], shape["M"]
    w_shapes = {"linear": [(d, d)], "lowrank": [(d, m), (d, m)], "mlp": [(d, m), (m, d)]}[shape["model"]]
    truncated = [False, False, True, shape["model"] == "mlp"][: 2 + len(w_shapes)]
    gauss = jr.normal_matrices(key, [(n, d), (mo, d)] + w_shapes, truncated=truncated)
    problem = {"E": jr.sphere_rows(gauss[0], dyn["N"], dyn["d"]), "U": jr.sphere_rows(gauss[1], dyn["M"], dyn["d"])}
    hebbian = problem["U"][targets(shape, dyn)].T @ problem["E"]  # Σ_x u_{f(x)} e_xᵀ; padded rows of E are 0
    if shape["model"] == "linear":
        standard = _lecun(gauss[2], dyn["d"], dyn["d"], dyn["d"])
        params = {"W": hebbian if shape["init"] == "hebbian" else standard}
    elif shape["model"] == "lowrank":
        problem["V"] = jnp.where(jr.block_mask((d, m), dyn["d"], dyn["m"]), gauss[3], 0.0)
        standard = _lecun(gauss[2], dyn["m"], dyn["d"], dyn["m"])
        params = {"U": hebbian @ problem["V"] if shape["init"] == "hebbian" else standard}
    else:
        params = {
            "W1": _lecun(gauss[2], dyn["d"], dyn["d"], dyn["m"]),
            "W2": _lecun(gauss[3], dyn["m"], dyn["m"], dyn["d"]),
        }
        if shape["mlp_bias"]:
            params["b"] = jnp.zeros(m)
    return params, problem


def memory_output(params, problem, shape) -> jax.Array:
    """F(e_x) for every (padded) input, one row per x."""
    E = problem["E"]
    if shape["model"] == "linear":
        return E @ params["W"].T
    if shape["model"] == "lowrank":
        return (E @ problem["V"]) @ params["U"].T
    hidden = E @ params["W1"] + params.get("b", 0.0)
    return jax.nn.relu(hidden) @ params["W2"]


def logits(params, problem, shape, dyn) -> jax.Array:
    """u_yᵀ F(e_x) over active outputs; padded outputs are -inf."""
    raw = memory_output(params, problem, shape) @ problem["U"].T
    return jnp.where(jr.active_mask(shape["M"], dyn["M"])[None, :], raw, -jnp.inf)


def _target_nll(z, y, loss_form):
    """−log p̂(y|x) per row; `log_of_softmax` is the authors' −log(softmax(z)[y]), which overflows."""
    if loss_form == "log_of_softmax":
        return -jnp.log(jnp.take_along_axis(jax.nn.softmax(z, axis=-1), y[:, None], axis=1)[:, 0])
    return -jnp.take_along_axis(jax.nn.log_softmax(z, axis=-1), y[:, None], axis=1)[:, 0]


def mean_target_nll(z, y, rows, count, loss_form) -> jax.Array:
    """Mean −log p̂(y|x) over the active `rows`. Inactive rows get zero logits BEFORE the softmax: their
    own (relu(b)·W₂ in the mlp) can underflow it, and log(0) masked only afterwards still sends
    0·∞ = NaN into the gradient (the double-where pattern)."""
    nll = _target_nll(jnp.where(rows[:, None], z, 0.0), y, loss_form)
    return jnp.sum(jnp.where(rows, nll, 0.0)) / count


def loss(params, problem, shape, dyn, key=None) -> jax.Array:
    """Softmax cross-entropy over the M outputs, mean over the N inputs (full batch, §3.2: no
    sampling, so the step key is not used); `loss_block` outputs at a time where one is set."""
    rows, y = jr.active_mask(shape["N"], dyn["N"]), targets(shape, dyn)
    if shape["loss_block"]:
        features, outputs = memory_output(params, problem, shape), jr.active_mask(shape["M"], dyn["M"])
        block, form, kernel = shape["loss_block"], shape["loss_form"], shape["loss_kernel"]
        nll = blocked_cross_entropy(features, problem["U"], y, rows, outputs, block, form, kernel)
        return jnp.sum(nll) / dyn["N"]
    return mean_target_nll(logits(params, problem, shape, dyn), y, rows, dyn["N"], shape["loss_form"])


def predictions(params, problem, shape, dyn) -> jax.Array:
    """argmax_y u_yᵀ F(e_x) for every (padded) input; `loss_block` outputs at a time where one is set."""
    if shape["loss_block"]:
        outputs = jr.active_mask(shape["M"], dyn["M"])
        return blocked_argmax(memory_output(params, problem, shape), problem["U"], outputs, shape["loss_block"])
    return jnp.argmax(logits(params, problem, shape, dyn), axis=1)


def evaluate(params, problem, shape, dyn) -> dict:
    """Loss and accuracy of argmax_y u_yᵀ F(e_x) over all N inputs."""
    hits = (predictions(params, problem, shape, dyn) == targets(shape, dyn)) & jr.active_mask(shape["N"], dyn["N"])
    return {"loss": loss(params, problem, shape, dyn), "accuracy": jnp.sum(hits) / dyn["N"]}


def optimizer(dyn) -> optax.GradientTransformation:
    """Adam with optax defaults and a constant rate (authors: optax.adamw with weight_decay = 0)."""
    return optax.adam(dyn["lr"])


def num_params(config) -> float:
    """Parameters as the paper counts them: d² (linear), md (lowrank), 2md (mlp, bias not counted)."""
    d, m = config["d"], config["m"]
    return {"linear": d * d, "lowrank": m * d, "mlp": 2 * m * d}[config["model"]]


def info_bits(config) -> float:
    """Bits in the stored map: N log₂ M (lower bound of Thm 7 for zero loss)."""
    return bits(config["N"], config["M"])


def flops_per_step(config) -> float:
    """Forward + backward (≈ 3× forward) FLOPs of one full-batch step."""
    d, m, n, mo = config["d"], config["m"], config["N"], config["M"]
    body = {"linear": 2 * n * d * d, "lowrank": 4 * n * d * m, "mlp": 4 * n * d * m}[config["model"]]
    return 3.0 * (body + 2 * n * mo * d)


def temp_bytes(config) -> float:
    """The N × M logits of a step (N × loss_block blocked); the N × d and N × m activations are left out."""
    return logits_bytes(config["N"], config["M"], config["loss_block"])


EXPERIMENT = Experiment(
    name="assoc_memory",
    doc="Linear / low-rank / MLP associative memories with random sphere embeddings (Nichani et al. §3)",
    fields=FIELDS,
    init=init,
    loss=loss,
    evaluate=evaluate,
    optimizer=optimizer,
    resolve=resolve,
    derived=LOSS_PATH,
    check=check,
    costs=Costs(params=num_params, bits=info_bits, flops_per_step=flops_per_step, temp_bytes=temp_bytes),
)
