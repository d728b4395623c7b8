"""Buckets: runs of one static shape share one compiled program. The engine derives a run's static
shape, traced values and padded config from its experiment's declared field kinds (see
jaxmem.experiments.interface): sizes climb a padding ladder, static values enter the shape, traced
values the per-run arrays.
"""

from __future__ import annotations

import bisect
import dataclasses
import functools
import math

from jaxmem.experiments.interface import SIZE, STATIC, TRACED, Experiment, HostRun
from jaxmem.plan.runs import digest, problem_index, run_key


@functools.lru_cache(maxsize=None)
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

    @functools.cached_property
    def id(self) -> str:
        return digest(self.experiment, self.shape)[:12]

    @property
    def shape_dict(self) -> dict:
        return dict(self.shape)

    def label(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in self.shape)


def static_shape(exp: Experiment, config: dict, pad, floors: dict | None = None) -> dict:
    """The program's static shape for a run: every size padded up its ladder (`pad(n, ladder)`, see
    `padder`), at least to its entry in `floors` (e.g. a derived size's largest value in the sweep),
    every static value as it is; `config` need not be complete."""
    complete = exp.complete(config)
    resolved = exp.resolve(complete)
    floors = floors or {}
    shape = {}
    for name, field in exp.kinds.items():
        if field.kind == SIZE:
            shape[name] = pad(max(resolved[name], floors.get(name, 0)), field.ladder_of(name, complete))
        elif field.kind == STATIC:
            shape[name] = resolved[name]
    return shape


def traced_values(exp: Experiment, config: dict) -> dict:
    """The run's traced values: true sizes, traced numbers (a choice as its index, a bool as 0/1)."""
    resolved = exp.effective(config)
    return {
        name: resolved[name] if field.kind == SIZE else field.traced_value(resolved[name])
        for name, field in exp.kinds.items()
        if field.kind in (SIZE, TRACED)
    }


def bucket_of(exp: Experiment, config: dict, pad, floors: dict | None = None) -> Bucket:
    """The bucket of a config under the padding function `pad` (see `padder`) and size `floors`."""
    return Bucket(exp.name, tuple(sorted(static_shape(exp, config, pad, floors).items())))


def padded_config(exp: Experiment, bucket: Bucket, config: dict) -> dict:
    """The resolved config with every size at its bucket's padded size (what the program computes)."""
    shape = bucket.shape_dict
    padded = {name: shape[name] for name, field in exp.kinds.items() if field.kind == SIZE and name in shape}
    return {**exp.effective(config), **padded}


def covers(exp: Experiment, big: Bucket, small: Bucket) -> bool:
    """Whether `big` has `small`'s fields, its static values and every size at least as large."""
    kinds = exp.kinds
    return len(big.shape) == len(small.shape) and all(
        k == j and (b >= s if kinds[k].kind == SIZE else b == s) for (k, b), (j, s) in zip(big.shape, small.shape)
    )


def padding_waste(exp: Experiment, bucket: Bucket, configs: list[dict]) -> float:
    """Ratio of the bucket's FLOPs per step to the true FLOPs of its runs (1.0 = no waste); without a
    FLOP count, the ratio of padded to true products of the sizes."""

    def work(config: dict) -> float:
        flops = exp.cost("flops_per_step", config)
        if not math.isnan(flops):
            return flops
        return math.prod(max(config[n], 1) for n, f in exp.kinds.items() if f.kind == SIZE)

    true = sum(work(exp.effective(c)) for c in configs)
    padded = sum(work(padded_config(exp, bucket, c)) for c in configs)
    return padded / true if true else 1.0


def unpadded(n: int, _ladder: str | None = None) -> int:
    """The padding function that pads nothing (a run's own shape)."""
    return n


def host_run(exp: Experiment, config: dict, seed: int, variable: str | None = None) -> HostRun:
    """A run's problem as the experiment's host-side reference sees it: `config` (the searched
    `variable` at its value) resolved, the run's key as the engine derives it, unpadded shape and values."""
    point = {k: v for k, v in config.items() if k != variable}
    value = None if variable is None else config[variable]
    key = run_key(seed, problem_index(point, variable, value, exp.same_problem_across))
    return HostRun(exp.effective(config), key, static_shape(exp, config, unpadded), traced_values(exp, config))
