"""The optimisers of App. G (spec 002 §3.2, A4–A5), a traced choice: all three in one program.

Step size η = lr · eta · H^lr_power. The defaults (`eta`, `lr_power` < 0) are App. G's per optimiser
(spec A3–A5), resolved by `paper_steps`: GD η = √H (Figs 3-left, 4; Fig. 2 sets lr_power = 0),
heavy ball η = 0.1√H (Fig. 5-left), Adam η = 0.06 (Figs 3-right, 5-right). Directions:
`gd` the gradient; `momentum` PyTorch heavy ball v ← βv + g (θ ← θ − ηv); `adam` with bias correction,
β = (0.9, 0.999) and ε = adam_eps (PyTorch defaults). `K` > 0 freezes the parameters after K steps
(K = n per run inside one program of a fixed step budget, RT-10–12). `attention_step` multiplies W's
updates: 0 keeps W at θ̃₀, which from θ̃₀ = 0 is the mean-pooling linear model, the H → ∞ limit of
constant-η GD (RT-18; §1.9: W's effective step is η/H).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import optax

from jaxmem.experiments.optimizers import select_by_index

OPTIMIZERS = ("gd", "momentum", "adam")
PAPER_ETA = {"gd": 1.0, "momentum": 0.1, "adam": 0.06}
PAPER_POWER = {"gd": 0.5, "momentum": 0.5, "adam": 0.0}


def paper_steps(config) -> dict:
    """eta = 0 and lr_power < 0 stand for App. G's values for the run's optimiser."""
    name = config["optimizer"]
    eta = float(config["eta"]) or PAPER_ETA[name]
    power = float(config["lr_power"]) if config["lr_power"] >= 0 else PAPER_POWER[name]
    return {**config, "eta": eta, "lr_power": power}


def stop_after(steps) -> optax.GradientTransformation:
    """Zero every update from step `steps` on (`steps` traced; 0 = never)."""

    def update(updates, count, params=None):
        live = (steps <= 0) | (count < steps)
        return jax.tree.map(lambda u: jnp.where(live, u, jnp.zeros_like(u)), updates), count + 1

    return optax.GradientTransformation(lambda params: jnp.zeros((), jnp.int32), update)


def scale_attention(factor) -> optax.GradientTransformation:
    """Multiply the key–query (W) updates by `factor` (traced; 0 keeps W at θ̃₀)."""

    def update(updates, state, params=None):
        return {**updates, "W": updates["W"] * factor}, state

    return optax.GradientTransformation(lambda params: optax.EmptyState(), update)


def optimizer(dyn) -> optax.GradientTransformation:
    """GD, heavy-ball momentum or Adam by dyn["optimizer"], at η = lr · eta · H^lr_power (W's step times
    attention_step), frozen after K steps."""
    directions = (
        optax.identity(),
        optax.trace(decay=dyn["momentum"]),
        optax.scale_by_adam(b1=0.9, b2=0.999, eps=dyn["adam_eps"]),
    )
    step = dyn["lr"] * dyn["eta"] * dyn["H"] ** dyn["lr_power"]
    return optax.chain(
        select_by_index(dyn["optimizer"], directions),
        optax.scale(-step),
        scale_attention(dyn["attention_step"]),
        stop_after(dyn["K"]),
    )
