"""Planning: grid points and seeds → runs with stable identities → buckets of one static shape.

Identities are hashes of the run's content, never of its position in a list, so results do not
depend on chunking, scheduling or resume order. A run's random key is
`fold_in(PRNGKey(seed), problem_index)`, where the problem index hashes (point, searched value): all
learning rates of one probe share the same problem and initialisation, and so do runs that differ
only in the fields the experiment lists in `same_problem_across` (e.g. an optimizer choice).
"""

from __future__ import annotations

import bisect
import dataclasses
import hashlib
import json
import math
from functools import lru_cache

from jaxmem.experiments.interface import Experiment


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


@lru_cache(maxsize=None)
def ladder(ratio: float, limit: int = 2**31) -> tuple[int, ...]:
    """Padded sizes ⌈2^(i/k)⌉ with k = round(log 2 / log ratio), multiples of 8 from 64 on: at most
    about `ratio`× waste per axis, and every power of two is on the ladder (no waste for them)."""
    k = max(1, round(math.log(2) / math.log(ratio)))
    values, i, v = set(), 0, 1
    while v < limit:
        v = math.ceil(2 ** (i / k) - 1e-9)
        values.add(-(-v // 8) * 8 if v >= 64 else v)
        i += 1
    return tuple(sorted(values))


def padder(ratio: float, fine_ratio: float | None = None, fine_fields: tuple[str, ...] = ()):
    """The function `pad(n, field)` an experiment uses to round a size up to its bucket's padded size:
    the `ratio` ladder, or the finer `fine_ratio` ladder for `fine_fields` (the searched variable)."""

    def pad(n: int, field: str | None = None) -> int:
        r = fine_ratio if field in fine_fields and fine_ratio else ratio
        if r <= 1.0:
            return n
        steps = ladder(r)
        return steps[bisect.bisect_left(steps, n)]

    return pad


@dataclasses.dataclass(frozen=True)
class Bucket:
    experiment: str
    shape: tuple  # sorted (name, padded size or static option) pairs

    @property
    def id(self) -> str:
        return digest(self.experiment, self.shape)[:12]

    @property
    def shape_dict(self) -> dict:
        return dict(self.shape)

    def label(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in self.shape)


def bucket_of(exp: Experiment, config: dict, pad) -> Bucket:
    """The bucket of a (complete) config under the padding function `pad` (see `padder`)."""
    return Bucket(exp.name, tuple(sorted(exp.shape(config, pad).items())))


def padded_config(bucket: Bucket, config: dict) -> dict:
    """`config` with every size replaced by its bucket's padded size (what the program computes)."""
    shape = dict(bucket.shape)
    return {k: shape[k] if k in shape and type(shape[k]) is int and type(v) is int else v for k, v in config.items()}


def padding_waste(exp: Experiment, bucket: Bucket, configs: list[dict]) -> float:
    """Ratio of the bucket's FLOPs per step to the true FLOPs of its runs (1.0 = no waste)."""
    true = sum(exp.flops_per_step(c) for c in configs)
    padded = sum(exp.flops_per_step(padded_config(bucket, c)) for c in configs)
    return padded / true if true else 1.0
