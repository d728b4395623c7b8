"""Which program (bucket) each run of a sweep goes to, and how many slots a program gets, under the
engine settings a plan chose (`Knobs`). A pure function of the spec, the settings and the device kind:
a resumed sweep, the dry-run and the planner's estimates all see the same programs.
"""

from __future__ import annotations

import collections
import dataclasses
import math
from typing import Callable

from jaxmem.experiments.interface import Experiment
from jaxmem.plan.buckets import Bucket, bucket_of, padded_config, padder
from jaxmem.plan.costs import ACCELERATORS, padding_pays, slots_per_device, wave_slots
from jaxmem.plan.loss_blocks import DENSE, choose_loss_path, measured_cases
from jaxmem.spec.expr import evaluate
from jaxmem.spec.sweep import SweepSpec


@dataclasses.dataclass(frozen=True)
class Knobs:
    """The settings a plan decides; where the spec gives one, it is the spec's (an override)."""

    pad_ratio: float  # sizes climb a ladder of steps ≈ this ratio
    search_pad_ratio: float  # the searched variable's finer ladder
    search_pad_floor: float  # a searched value is padded to at least this × its point's initial upper bound
    pad_to_max: tuple[str, ...]  # sizes padded to their largest value in the sweep
    probes: int  # K interior probes per search round
    max_slots: int  # runs per program per device; 0 = from the work per step
    segment_seconds: float  # host syncs (and checkpoints) about this often
    speculation: int = 0  # rounds a search probes ahead of its current one (0: the round barrier)
    segment_steps: int = 0  # with speculation: program steps per segment (decisions at each end)

    @classmethod
    def of_spec(cls, spec: SweepSpec) -> "Knobs":
        """The spec's settings (its values, or the spec format's defaults): a CPU's plan."""
        engine = spec.engine
        return cls(
            pad_ratio=engine.pad_ratio,
            search_pad_ratio=engine.search_pad_ratio,
            search_pad_floor=engine.search_pad_floor,
            pad_to_max=tuple(engine.pad_to_max),
            probes=spec.search.probes if spec.search else 0,
            max_slots=engine.max_slots,
            segment_seconds=engine.segment_seconds,
            speculation=engine.speculation,
            segment_steps=engine.segment_steps,
        )

    def given_by(self, spec: SweepSpec) -> frozenset[str]:
        """The knobs the spec sets itself (its base or preset), which a plan keeps as they are."""
        engine = set(spec.resolved.get("engine", {})) & {f.name for f in dataclasses.fields(self)}
        return frozenset(engine | ({"probes"} if "probes" in (spec.resolved.get("search") or {}) else set()))


LOSS_SHARE = 0.25  # one run's loss temporaries may take this share of a device's memory budget, else blocked


class Layout:
    """Buckets and slots of a sweep's runs on `devices` devices of `platform` under `knobs`, with
    `budget_bytes` of memory per device (where an experiment states its loss temporaries, a run whose
    dense logits would take more than LOSS_SHARE of it gets the blocked loss; else, on an accelerator, the
    loss path measured fastest on `device`, a `throughput.device_key`: plan.loss_blocks; a CPU keeps dense,
    as it keeps the spec's other settings: a measured speed table must not change a CPU's numbers, which
    the shipped quick results are)."""

    def __init__(
        self,
        spec: SweepSpec,
        exp: Experiment,
        knobs: Knobs,
        platform: str,
        devices: int,
        budget_bytes: float,
        device: str = "",
    ):
        self.spec, self.exp, self.knobs, self.platform, self.devices = spec, exp, knobs, platform, devices
        self.loss_budget = LOSS_SHARE * budget_bytes
        self.loss_rates = measured_cases(device, exp.name) if platform in ACCELERATORS else ()
        self.search = dataclasses.replace(spec.search, probes=knobs.probes) if spec.search else None
        variable = (spec.search.variable,) if spec.search else ()
        self.pad = padder(knobs.pad_ratio, knobs.search_pad_ratio, variable)
        fields = [n for n in knobs.pad_to_max if n in exp.fields]
        self.size_floors = {name: max(exp.complete(p)[name] for p in spec.points) for name in fields}
        self.derived_floors = {  # a derived size's floor applies to the resolved config (static_shape)
            name: max(exp.effective(p)[name] for p in spec.points) for name in knobs.pad_to_max if name not in fields
        }
        self.eval_floors = {  # a test-time size is padded to hold its largest value
            name: max(values) for name, values in spec.final_eval if exp.fields[name].kind == "size"
        }
        for name, floor in self.eval_floors.items():
            self.size_floors[name] = max(self.size_floors.get(name, 0), floor)
        self._shared: dict[int | None, collections.Counter] = {}  # _sharing, by value
        self._chosen: dict[tuple, tuple[Bucket, str]] = {}  # choice, by config: the layout is a pure function
        self._padded: dict[tuple, Bucket] = {}  # padded_bucket, likewise

    def runs_per_round(self) -> int:
        """The runs one unit has live at once: one per learning rate, times the values a search round
        tests (the first round of a verified search: both ends and `probes` inside; paper mode: one)."""
        search = self.search
        values = 1 if search is None or search.mode == "paper" else search.probes + 2
        return len(self.spec.train.learning_rates) * values

    def bucket_for(self, config: dict) -> Bucket:
        """A run's bucket. The searched variable climbs a finer ladder than the other sizes (its
        padding dominates the waste, quadratically when M = N), but is padded to at least
        `search_pad_floor` times the point's initial upper bound: the small early probes share the
        programs of larger ones instead of each compiling its own (on a CPU one compile costs more
        than all those small runs together; measured on the quick MLP grid: 74 s instead of 85 s with
        one ladder of ratio 2 and floor 0.25). The sizes in `pad_to_max` are padded to their largest
        value in the sweep (a derived size's, after the experiment resolves the config), so points
        differing only in them share a program. A searched size is not padded at all where its bucket
        would hold one run at a time and the padding would cost more work over the step budget than
        a compile (`costs.padding_pays`). On an accelerator, where a program holds one run per device
        padded and unpadded alike (runs of paper size), no size is padded unless that padding costs less
        than a compile: runs that never share a step gain nothing else from it (the Fig 1 MLP paper
        bucket was padded 1.47×). (Runs that would share an unpadded program keep the padding: thousands
        of small programs would each hold device memory and a compile.)"""
        return self.choice(config)[0]

    def choice(self, config: dict) -> tuple[Bucket, str]:
        """`bucket_for`'s bucket and the rule that chose it, in words (memoised by config)."""
        return memoised(self._chosen, tuple(sorted(config.items())), lambda: self._choose(config))

    def _choose(self, config: dict) -> tuple[Bucket, str]:
        padded = self.padded_bucket(config)
        one_per_device = False  # one run per device, padded or not, and padding costs less than a compile
        if self.platform in ACCELERATORS and self.slots_for(padded, config) == self.devices:
            alone = self.exact_bucket(config)
            if self.slots_for(alone, config) == self.devices:
                if not self._padding_pays(padded, alone, config):
                    return (
                        alone,
                        "unpadded: one run per device padded or not, and padding would cost more than a compile",
                    )
                one_per_device = True
        if self.search is None or self.live_runs(padded) > 1:
            if one_per_device:
                return padded, (
                    "padded: one run per device either way, but padding costs less than a compile of its own "
                    "(extra FLOPs over the step budget against a compile's)"
                )
            return padded, f"padded: shares its program with up to {self.live_runs(padded)} live runs"
        exact = self.padded_bucket(config, exact_variable=True)
        if self._padding_pays(padded, exact, config):
            return padded, "padded: one live run, whose extra work costs less than a compile of its own"
        return exact, "searched value unpadded: one live run, whose padding would cost more than a compile"

    def _padding_pays(self, padded: Bucket, exact: Bucket, config: dict) -> bool:
        """Whether `padded`'s extra work over the step budget costs less than compiling `exact`."""
        flops = [self.padded_flops(b, config) for b in (padded, exact)]
        return padding_pays(self.spec.train.steps * (flops[0] - flops[1]), self.platform)

    def exact_bucket(self, config: dict) -> Bucket:
        """The bucket of `config`'s own sizes (a test-time size still holds its largest value)."""
        config = self.exp.complete(config)
        config.update((name, max(config[name], floor)) for name, floor in self.eval_floors.items())
        return self._bucket(config, padder(1.0), derived_floors={})

    def padded_bucket(self, config: dict, exact_variable: bool = False) -> Bucket:
        """The bucket of `config` on the padding ladders (the searched variable's own size with
        `exact_variable`), memoised: `live_runs` asks for every point's at each new bucket's value."""
        key = (tuple(sorted(config.items())), exact_variable)
        return memoised(self._padded, key, lambda: self._padded_bucket(config, exact_variable))

    def _padded_bucket(self, config: dict, exact_variable: bool) -> Bucket:
        config = self.exp.complete(config)
        config.update((name, max(config[name], floor)) for name, floor in self.size_floors.items())
        search = self.search
        if search is None or self.exp.fields[search.variable].kind != "size":  # a traced variable: no padding
            return self._bucket(config, self.pad)
        if exact_variable:
            return self._bucket(config, padder(self.knobs.pad_ratio, 1.0, (search.variable,)))
        floor = math.ceil(self.knobs.search_pad_floor * evaluate(search.hi, config))
        config[search.variable] = max(config[search.variable], floor)
        return self._bucket(config, self.pad)

    def _bucket(self, config: dict, pad, derived_floors: dict | None = None) -> Bucket:
        """The bucket of `config` under `pad`, with the blocked loss where its dense logits do not fit."""
        floors = self.derived_floors if derived_floors is None else derived_floors
        bucket = bucket_of(self.exp, config, pad, floors)
        padded = padded_config(self.exp, bucket, config)
        steps = self.spec.train.steps
        path = choose_loss_path(self.exp, padded, self.loss_budget, 1, self.loss_rates, steps)
        return bucket_of(self.exp, {**config, **path.entries}, pad, floors) if path != DENSE else bucket

    def live_runs(self, bucket: Bucket) -> int:
        """At most how many runs `bucket` holds at once: the units whose runs at the bucket's value of
        the searched variable fall in it, times `runs_per_round`. A function of the bucket and the
        spec only (not of timing, of what already ran or of how many processes share the sweep), so a
        resumed sweep chooses the same programs."""
        variable = self.search.variable if self.search else None
        value = bucket.shape_dict.get(variable) if variable else None
        sharing = self._sharing(variable, value).get(bucket, 0)
        return max(sharing * len(self.spec.seeds), 1) * self.runs_per_round()

    def _sharing(self, variable: str | None, value: int | None) -> collections.Counter:
        """How many points have their run at `value` of the searched variable in each bucket (padded, or
        the variable unpadded), memoised by value: every bucket at that value asks."""
        if value not in self._shared:
            counts: collections.Counter = collections.Counter()
            for p in self.spec.points:
                config = {**p, variable: value} if value is not None else p
                padded = self.padded_bucket(config)
                exact = self.padded_bucket(config, True) if value is not None else padded
                counts.update({padded, exact})
            self._shared[value] = counts
        return self._shared[value]

    def padded_flops(self, bucket: Bucket, config: dict) -> float:
        """FLOPs per step of one run of `config` in `bucket` (its padded sizes: what the program computes)."""
        return self.exp.cost("flops_per_step", padded_config(self.exp, bucket, config))

    def slots_for(self, bucket: Bucket, config: dict) -> int:
        """Total slots of a bucket: a deterministic number per device, times the devices."""
        flops = self.padded_flops(bucket, config)
        if wave_slots(flops, self.platform, self.knobs.max_slots) == 1:  # whatever its live runs (costlier)
            return self.devices
        return slots_per_device(flops, self.live_runs(bucket), self.platform, self.knobs.max_slots) * self.devices


def memoised(cache: dict, key: tuple, compute: Callable):
    """compute(), kept in `cache` under `key`; computed every time for an unhashable key (a list value)."""
    try:
        hash(key)
    except TypeError:
        return compute()
    if key not in cache:
        cache[key] = compute()
    return cache[key]
