"""Planning: grid points and seeds → runs with stable identities → buckets of one static shape.

Identities are hashes of the run's content, never of its position in a list, so results do not
depend on chunking, scheduling or resume order. A run's random key is
`fold_in(PRNGKey(seed), problem_index)`, where the problem index hashes (point, searched value): all
learning rates of one probe share the same problem and initialisation.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from functools import lru_cache

from jaxmem.experiments.base import Experiment


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


def make_run(point: dict, seed: int, lr: float, variable: str | None, value: int | None, round_: int) -> Run:
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
        problem_index=int(digest(pid, value)[:7], 16),
    )


@lru_cache(maxsize=None)
def ladder(ratio: float, limit: int = 2**31) -> tuple[int, ...]:
    """Padded sizes: 1, 2, 3, ... growing by `ratio` (≤ ratio× waste per axis); multiples of 8 from 64."""
    values, v = [1], 1
    while v < limit:
        v = max(v + 1, math.ceil(v * ratio))
        if v >= 64:
            v = -(-v // 8) * 8
        values.append(v)
    return tuple(values)


def padder(ratio: float):
    """The function an experiment uses to round a size up to its bucket's padded size."""
    if ratio <= 1.0:
        return lambda n: n
    steps = ladder(ratio)

    def pad(n: int) -> int:
        lo, hi = 0, len(steps) - 1
        while lo < hi:
            mid = (lo + hi) // 2
            if steps[mid] >= n:
                hi = mid
            else:
                lo = mid + 1
        return steps[lo]

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


def bucket_of(exp: Experiment, config: dict, pad_ratio: float) -> Bucket:
    return Bucket(exp.name, tuple(sorted(exp.shape(config, padder(pad_ratio)).items())))


def padded_config(bucket: Bucket, config: dict) -> dict:
    """`config` with every size replaced by its bucket's padded size (what the program computes)."""
    shape = dict(bucket.shape)
    return {k: shape[k] if k in shape and type(shape[k]) is int and type(v) is int else v for k, v in config.items()}


def padding_waste(exp: Experiment, bucket: Bucket, configs: list[dict]) -> float:
    """Ratio of the bucket's FLOPs per step to the true FLOPs of its runs (1.0 = no waste)."""
    true = sum(exp.flops_per_step(c) for c in configs)
    padded = sum(exp.flops_per_step(padded_config(bucket, c)) for c in configs)
    return padded / true if true else 1.0
