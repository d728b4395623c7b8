"""Optimiser helpers shared by the families: a per-run choice of optimiser inside one vmapped program."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import optax


def select_by_index(index, choices: tuple[optax.GradientTransformation, ...]) -> optax.GradientTransformation:
    """Run every transformation in `choices` (each keeps its state) and return the update of
    choices[index], `index` traced: a per-run optimiser choice inside one vmapped program."""

    def init_fn(params):
        return tuple(t.init(params) for t in choices)

    def update_fn(updates, state, params=None):
        outs = [t.update(updates, s, params) for t, s in zip(choices, state)]
        pick = lambda *u: jnp.select([index == k for k in range(len(u))], list(u))  # noqa: E731
        picked = jax.tree.map(pick, *[o[0] for o in outs])
        return picked, tuple(o[1] for o in outs)

    return optax.GradientTransformation(init_fn, update_fn)
