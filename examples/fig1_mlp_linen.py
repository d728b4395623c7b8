"""Fig 1 (right) of Nichani, Lee & Bietti (2024), the MLP associative memory, written as the authors wrote
it (their mlp_sweep.py): a flax linen module F(e) = W₂ᵀ relu(W₁ e + b), logits u_yᵀ F(e_x), run by jaxmem
as a user experiment through `from_flax`. The shipped `assoc_memory` family (model = "mlp") is the same
memory written as raw functions.

    jaxmem run examples/fig1_mlp_linen.toml --preset quick --out results/fig1_mlp_linen
"""

import flax.linen as nn
import jax
import jax.numpy as jnp

from jaxmem.experiments import draws, from_flax
from jaxmem.experiments.interface import Costs, size


class MLP(nn.Module):
    d: int
    width: int  # width of MLP

    @nn.compact
    def __call__(self, x):
        z = nn.Dense(self.width, name="layer1")(x)
        z = nn.relu(z)
        return nn.Dense(self.d, use_bias=False, name="layer2")(z)


FIELDS = {
    "d": size("embedding dimension", maximum=draws.COLS_LIMIT),
    "m": size("hidden width", maximum=draws.COLS_LIMIT),
    "N": size("stored inputs, and as many outputs (f* = identity)", maximum=draws.ROWS_LIMIT),
}


def module(shape):
    return MLP(d=shape["d"], width=shape["m"])


def sample(key, shape, dyn):
    """Embeddings e_x and unembeddings u_y i.i.d. uniform on the unit sphere of R^d (frozen), f*(x) = x."""
    n, d = shape["N"], shape["d"]
    gauss_e, gauss_u = draws.normal_matrices(key, [(n, d), (n, d)])
    E, U = draws.sphere_rows(gauss_e, dyn["N"], dyn["d"]), draws.sphere_rows(gauss_u, dyn["N"], dyn["d"])
    return {"E": E, "U": U, "y": jnp.arange(n)}


def forward(model, batch, dyn):
    """The logits u_yᵀ F(e_x) of every input x (rows) and output y (columns)."""
    return model(batch["E"]) @ batch["U"].T


def cross_entropy(logits, batch, dyn):
    return -jnp.take_along_axis(jax.nn.log_softmax(logits), batch["y"][:, None], axis=1)[:, 0]


def accuracy(logits, batch, dyn):
    return jnp.argmax(logits, axis=1) == batch["y"]


EXPERIMENT = from_flax(
    module,
    sample,
    cross_entropy,
    {"accuracy": accuracy},
    FIELDS,
    name="fig1_mlp_linen",
    doc="MLP associative memory (Nichani et al. Fig 1 right) as a flax linen module",
    forward=forward,
    logits=True,
    costs=Costs(
        params=lambda c: 2 * c["m"] * c["d"],  # as the paper counts them (the bias aside)
        flops_per_step=lambda c: 3.0 * (4 * c["N"] * c["d"] * c["m"] + 2 * c["N"] ** 2 * c["d"]),
    ),
)
