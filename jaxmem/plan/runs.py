"""Runs with stable identities: a run is named by a hash of its content, never by its position in a
list, so results do not depend on chunking, scheduling or resume order. A run's random key is
`fold_in(PRNGKey(seed), problem_index)`, where the problem index hashes (point, searched value): all
learning rates of one probe share the same problem and initialisation, and so do runs that differ
only in the fields the experiment lists in `same_problem_across` (e.g. an optimizer choice).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json

import jax


def digest(*parts) -> str:
    return hashlib.sha1(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()


def point_id(point: dict) -> str:
    return digest(point)[:12]


@dataclasses.dataclass(frozen=True)
class Run:
    run_id: str
    point: str
    seed: int
    lr: float
    value: int | None  # the searched variable's value (None outside searches)
    round: int
    config: dict = dataclasses.field(hash=False, compare=False)  # complete experiment config, value included
    problem_index: int = 0

    @property
    def unit(self) -> str:
        return f"{self.point}/{self.seed}"


def make_run(
    point: dict, seed: int, lr: float, variable: str | None, value: int | None, round_: int, shared: tuple = ()
) -> Run:
    """The run of `point` (searched `variable` = `value`) with this seed and learning rate; fields in
    `shared` (the experiment's `same_problem_across`) do not enter its problem index."""
    pid = point_id(point)
    config = dict(point) if variable is None else {**point, variable: value}
    return Run(
        run_id=digest(pid, seed, value, lr)[:16],
        point=pid,
        seed=seed,
        lr=lr,
        value=value,
        round=round_,
        config=config,
        problem_index=problem_index(point, variable, value, shared),
    )


def problem_index(point: dict, variable: str | None, value: int | None, shared: tuple = ()) -> int:
    """Hash of (point, searched value) without the `shared` fields: equal for runs on the same problem."""
    problem_point = {k: v for k, v in point.items() if k not in shared}
    return int(digest(point_id(problem_point), None if variable in shared else value)[:7], 16)


def run_key(seed, problem_index) -> jax.Array:
    """The run's key: fold_in(PRNGKey(seed), problem index); independent of slot, chunk and device."""
    return jax.random.fold_in(jax.random.PRNGKey(seed), problem_index)
