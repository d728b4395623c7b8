"""Host side of one bucket: a fixed number of run slots, a queue, and the compiled segment program.

Between segments the host retires finished runs (success, budget, divergence) and refills their
slots from the queue, so the program stays full of live work (DESIGN: runs as slots).
"""

from __future__ import annotations

import collections
import dataclasses
import math
import time
from typing import Callable

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from jaxmem.persistence.checkpoints import SlotCheckpoints
from jaxmem.experiments.interface import Experiment
from jaxmem.persistence.local_checkpoints import LocalSlotCheckpoints
from jaxmem.engine import compile_cache, running_clock
from jaxmem.engine.device_memory import peak_bytes
from jaxmem.plan.runs import Run, run_key
from jaxmem.plan.buckets import Bucket, traced_values
from jaxmem.engine.program import (
    RunState,
    Settings,
    at_precision,
    dyn_arrays,
    final_eval_points,
    initial_model,
    make_final_eval,
    make_segment,
    matmul_precision,
    sharded_segment,
)


@dataclasses.dataclass
class Finished:
    run: Run
    best: float
    final: dict
    steps: int
    hit_step: int
    diverged: bool
    wall: float
    at_points: list[dict] = dataclasses.field(default_factory=list)  # test-time axes: the final
    # parameters' metrics at each point of Settings.final_eval's product, in its order
    untrained: dict = dataclasses.field(default_factory=dict)  # the experiment's metrics at initialisation
    start: int = 0  # the logical step (BucketRunner.clock) at which its slot was filled


@dataclasses.dataclass(frozen=True)
class Program:
    """A bucket's compiled segment program for a fixed number of slots."""

    run: Callable  # jax.stages.Compiled: (state, dyn, seeds, problem_index, refill, vacant, rederive, max_blocks,
    # stop_after)
    abstract_state: object  # the slots' RunState as ShapeDtypeStructs, sharded over the devices
    mesh: Mesh
    slots: int
    seconds: float  # lowering and compiling (or loading it from the persistent cache)
    peak_bytes: int  # per device, from XLA's memory analysis
    final_eval: Callable | None = None  # (state, dyn, points) -> {metric: (slots, P)}; with test-time axes
    points: dict | None = None  # field -> (P,) values of the test-time axes' product, as the program reads them
    loaded: bool = False  # the segment program came from the persistent compilation cache


def template_dyn(exp: Experiment, settings: Settings, slots: int, template: Run) -> dict[str, np.ndarray]:
    """The dynamic values of `slots` copies of the template run (what a program is compiled for)."""
    return dyn_arrays([traced_values(exp, template.config)] * slots, [template.lr] * slots, [settings.steps] * slots)


def abstract_state(exp: Experiment, bucket: Bucket, settings: Settings, slots: int, template: Run):
    """The RunState of `slots` slots of the bucket, as ShapeDtypeStructs (traced, nothing compiled)."""
    _, init_all = make_segment(exp, bucket.shape_dict, settings)
    seeds = np.full(slots, template.seed, np.int32)
    return jax.eval_shape(init_all, seeds, seeds, template_dyn(exp, settings, slots, template))


def model_state(exp: Experiment, bucket: Bucket, settings: Settings, template: Run):
    """One run's parameters, problem and optimizer state as ShapeDtypeStructs: the part of its RunState
    that depends on the bucket's shape (its counters, metrics and history do not), traced without the
    engine (a fraction of `abstract_state`'s tracing: no evaluation, no vmap)."""
    dyn = {k: v[0] for k, v in template_dyn(exp, settings, 1, template).items()}
    flow = settings.integrator == "gradient_flow"

    def init(seed, dyn):
        return initial_model(exp, bucket.shape_dict, dyn, run_key(seed, seed), flow)

    return jax.eval_shape(init, np.int32(template.seed), dyn)


def saved_part(state: RunState) -> dict:
    """What a checkpoint holds of the slots' state: all but the problem, which `init` derives from each
    run's key and traced values (the training sets of large-n runs would dominate every save)."""
    return {name: value for name, value in state._asdict().items() if name != "problem"}


def device_zeros(abstract, sharding):
    """Zeros shaped like the ShapeDtypeStructs of `abstract`, built on the host and placed by `sharding`
    (nothing compiled)."""
    return jax.tree.map(lambda a: jax.device_put(np.zeros(a.shape, a.dtype), sharding), abstract)


def with_blank_problem(saved: dict, abstract: RunState, sharding) -> RunState:
    """A restored `saved_part` as a RunState whose problem is zeros, for the next segment to rebuild."""
    return RunState(**saved, problem=device_zeros(abstract.problem, sharding))


def nbytes(tree) -> int:
    return sum(math.prod(a.shape) * a.dtype.itemsize for a in jax.tree.leaves(tree))


def compile_program(exp: Experiment, bucket: Bucket, settings: Settings, slots: int, template: Run, devices) -> Program:
    """Compile the bucket's segment program for `slots` runs, sharded over `devices` (the only compile
    of a bucket: segment length and early exit are traced arguments). Its seconds leave out any time the
    process was stopped (jaxmem.engine.running_clock)."""
    start = running_clock.running()
    mesh = Mesh(np.array(devices), ("runs",))
    shard = NamedSharding(mesh, P("runs"))
    on_mesh = lambda a: jax.ShapeDtypeStruct(np.shape(a), a.dtype, sharding=shard)  # noqa: E731
    state = jax.tree.map(on_mesh, abstract_state(exp, bucket, settings, slots, template))
    dyn = template_dyn(exp, settings, slots, template)
    ints, flags = np.zeros(slots, np.int32), np.zeros(slots, bool)
    scalar = jax.ShapeDtypeStruct((), np.int32, sharding=NamedSharding(mesh, P()))
    args = (jax.tree.map(on_mesh, dyn), on_mesh(ints), on_mesh(ints), *[on_mesh(flags)] * 3, scalar, scalar)
    segment, _ = make_segment(exp, bucket.shape_dict, settings, axis="runs")
    program = sharded_segment(segment, mesh, "runs", settings)
    platform = mesh.devices.flat[0].platform
    loads = compile_cache.loads()
    with matmul_precision(settings, platform):
        compiled = jax.jit(at_precision(program, settings, platform), donate_argnums=0).lower(state, *args).compile()
    loaded = compile_cache.loads() > loads
    final, points = None, None
    if settings.final_eval:
        rows = final_eval_points(settings.final_eval)
        points = {k: np.asarray([r[k] for r in rows], dyn[k].dtype) for k in rows[0]}
        with matmul_precision(settings, platform):
            final_eval = at_precision(make_final_eval(exp, bucket.shape_dict), settings, platform)
            final = jax.jit(final_eval).lower(state, args[0], points).compile()
    seconds = running_clock.running() - start
    return Program(compiled, state, mesh, slots, seconds, peak_bytes(compiled), final, points, loaded)


class BucketRunner:
    def __init__(
        self,
        exp: Experiment,
        bucket: Bucket,
        settings: Settings,
        program: Program,
        template: Run,
        checkpoint_dir,
        lookup: Callable[[str], Run | None],
        segment_seconds: float = 2.0,
        budget: Callable[[Run], int] | None = None,
        segment_blocks: int = 0,
    ):
        """`budget(run)`: a run's own step budget (default: `settings.steps` for every run);
        `segment_blocks`: every segment runs exactly this many evaluation blocks, however many runs
        finish in it (a logical clock: jaxmem.plan.scheduler), instead of about `segment_seconds`."""
        self.exp, self.bucket, self.settings, self.program = exp, bucket, settings, program
        self.budget = budget or (lambda run: settings.steps)
        slots = self.n_slots = program.slots
        self.segment_seconds, self.segment_blocks = segment_seconds, segment_blocks
        self.clock = 0  # the logical step the driver is at: a run placed in a slot starts there
        self.start = np.zeros(slots, np.int64)  # each slot's run's logical start
        self.seen_steps = np.zeros(slots, np.int64)  # each slot's steps after the last segment
        self.program_steps = 0  # program steps the last segment ran
        self.restored_clock: int | None = None  # the clock of the checkpoint restored
        self.slots: list[Run | None] = [None] * slots
        self.wall = np.zeros(slots)
        self.queue: collections.deque[Run] = collections.deque()
        self.queued_ids: set[str] = set()
        self.sec_per_block: float | None = None
        self.unsaved_s = 0.0  # segment time since the last checkpoint
        devices = program.mesh.devices.ravel()
        self.device = f"{devices[0].platform}:{len(devices)}"
        self.shard = NamedSharding(program.mesh, P("runs"))
        self.replicated = NamedSharding(program.mesh, P())
        self.dyn = template_dyn(exp, settings, slots, template)
        self.seeds = np.full(slots, template.seed, np.int32)
        self.problem_index = np.full(slots, template.problem_index, np.int32)
        self.abstract_state = program.abstract_state
        self.rederive = np.zeros(slots, bool)  # restored slots, whose problem the next segment rebuilds
        store = SlotCheckpoints if jax.process_count() == 1 else LocalSlotCheckpoints  # orbax saves in lock-step
        self.checkpoints = store(checkpoint_dir)
        self.state = None
        self._restore(lookup)

    # -- slot bookkeeping -------------------------------------------------------------------------
    @property
    def occupied(self) -> int:
        return sum(r is not None for r in self.slots)

    def has_work(self) -> bool:
        return bool(self.queue) or self.occupied > 0

    def holds(self, run_id: str) -> bool:
        return run_id in self.queued_ids or any(r is not None and r.run_id == run_id for r in self.slots)

    def enqueue(self, run: Run) -> None:
        if not self.holds(run.run_id):
            self.queue.append(run)
            self.queued_ids.add(run.run_id)

    def withdraw(self, run_id: str) -> tuple[int, int] | None:
        """Take a run out (a probe no search wants any more): (its logical start, the steps it ran) if it
        held a slot, which is vacant from the next segment on; None if it was queued or not held."""
        if run_id in self.queued_ids:
            self.queue = collections.deque(r for r in self.queue if r.run_id != run_id)
            self.queued_ids.discard(run_id)
            return None
        for i, r in enumerate(self.slots):
            if r is not None and r.run_id == run_id:
                self.slots[i] = None
                return int(self.start[i]), int(self.seen_steps[i])
        return None

    def forget(self) -> None:
        """Empty every slot (a restored checkpoint from another logical step than the driver's)."""
        self.slots = [None] * self.n_slots
        self.rederive[:] = False

    def requeue(self, runs: list[Run]) -> None:
        """The queue becomes `runs` in this order, less those already in a slot (the next segment fills
        its free slots from the front)."""
        self.queue.clear()
        self.queued_ids.clear()
        for run in runs:
            self.enqueue(run)

    def _place(self, i: int, run: Run) -> None:
        self.slots[i] = run
        self.start[i] = self.clock
        for k, v in traced_values(self.exp, run.config).items():
            self.dyn[k][i] = v
        self.dyn["lr"][i] = run.lr
        self.dyn["budget"][i] = self.budget(run)
        self.seeds[i], self.problem_index[i] = run.seed, run.problem_index

    def _args(self, refill, vacant, rederive, max_blocks, stop_after):
        put = lambda x: jax.device_put(x, self.shard)  # noqa: E731
        scalar = lambda x: jax.device_put(np.int32(x), self.replicated)  # noqa: E731
        return (
            jax.tree.map(put, self.dyn),
            put(self.seeds),
            put(self.problem_index),
            put(refill),
            put(vacant),
            put(rederive),
            scalar(max_blocks),
            scalar(stop_after),
        )

    # -- running ---------------------------------------------------------------------------------
    def next_blocks(self) -> int:
        """Evaluation blocks the next segment may run: about `segment_seconds` of them once a segment
        has timed one (the first runs a single block)."""
        if self.segment_blocks:
            blocks = self.segment_blocks
        else:
            blocks = 1 if self.sec_per_block is None else max(1, int(self.segment_seconds / self.sec_per_block))
        if self.settings.history:  # one evaluation per block, plus the initial one of a refilled slot
            blocks = min(blocks, self.settings.history - 1)
        return blocks

    def expected_seconds(self) -> float | None:
        """How long the next segment should take (refills aside); None before a segment timed a block."""
        return None if self.sec_per_block is None else self.next_blocks() * self.sec_per_block

    def step(self) -> tuple[list[Finished], list[tuple[str, int, dict]], int]:
        """Run one segment; return the runs that finished, the evaluations of this segment as trajectory
        points (run_id, step, metrics; empty unless Settings.history), and the steps taken."""
        refill = np.zeros(self.n_slots, bool) if self.state is not None else np.ones(self.n_slots, bool)
        for i in range(self.n_slots):
            if self.slots[i] is None and self.queue:
                run = self.queue.popleft()
                self.queued_ids.discard(run.run_id)
                self._place(i, run)
                self.wall[i] = 0.0
                refill[i] = True
        vacant = np.array([r is None for r in self.slots])
        state = self.state if self.state is not None else self._blank_state()
        before = np.asarray(state.step) if self.state is not None else np.zeros(self.n_slots, np.int32)
        before = np.where(refill, 0, before)
        max_blocks = self.next_blocks()
        early = self.queue and not self.segment_blocks  # a fixed segment never ends early to refill
        stop_after = max(1, self.n_slots // 4) if early else self.n_slots + 1
        start = time.perf_counter()
        rederive, self.rederive = self.rederive & ~refill, np.zeros(self.n_slots, bool)
        self.state, blocks = self.program.run(state, *self._args(refill, vacant, rederive, max_blocks, stop_after))
        summary = jax.device_get(
            {
                "done": self.state.done,
                "diverged": self.state.diverged,
                "best": self.state.best,
                "hit": self.state.hit_step,
                "step": self.state.step,
                "last": self.state.last,
                "untrained": self.state.untrained,
                "history": self.state.history,
                "history_step": self.state.history_step,
                "history_len": self.state.history_len,
            }
        )
        elapsed = time.perf_counter() - start
        self.unsaved_s += elapsed
        blocks = int(blocks)
        if blocks:  # a refill adds the new runs' init to the segment: it can only make a block look dearer
            per_block = elapsed / blocks
            if self.sec_per_block is None or not refill.any() or per_block < self.sec_per_block:
                self.sec_per_block = per_block
        live = ~vacant
        self.wall[live] += elapsed / max(live.sum(), 1)
        steps_taken = int(np.sum((summary["step"] - before)[live]))
        self.program_steps = int(np.max((summary["step"] - before)[live], initial=0))
        self.seen_steps = np.asarray(summary["step"], np.int64)
        trajectory = [
            (r.run_id, int(summary["history_step"][i, j]), {k: float(v[i, j]) for k, v in summary["history"].items()})
            for i, r in enumerate(self.slots)
            if r is not None
            for j in range(int(summary["history_len"][i]))
        ]
        finished = []
        at_points = self._final_evaluations(summary["done"])
        for i, run in enumerate(self.slots):
            if run is not None and summary["done"][i]:
                finished.append(
                    Finished(
                        run=run,
                        best=self.settings.toward(float(summary["best"][i])),
                        final={k: float(v[i]) for k, v in summary["last"].items()},
                        steps=int(summary["step"][i]),
                        hit_step=int(summary["hit"][i]),
                        diverged=bool(summary["diverged"][i]),
                        wall=float(self.wall[i]),
                        at_points=at_points[i] if at_points else [],
                        untrained={k: float(v[i]) for k, v in summary["untrained"].items()},
                        start=int(self.start[i]),
                    )
                )
                self.slots[i] = None
        return finished, trajectory, steps_taken

    def _final_evaluations(self, done: np.ndarray) -> list[list[dict]] | None:
        """Per slot, the metrics of its parameters at every point of the test-time axes (in the order
        of `final_eval_points`), when some occupied slot is done (None without test-time axes or
        finished runs): read before the slot is refilled, from the state the segment left."""
        finished = [r is not None and done[i] for i, r in enumerate(self.slots)]
        if self.program.final_eval is None or not any(finished):
            return None
        dyn = jax.tree.map(lambda x: jax.device_put(x, self.shard), self.dyn)
        metrics = jax.device_get(self.program.final_eval(self.state, dyn, self.program.points))
        count = len(next(iter(self.program.points.values())))
        return [
            [{k: float(v[i, p]) for k, v in metrics.items()} for p in range(count)] if finished[i] else []
            for i in range(self.n_slots)
        ]

    def _blank_state(self):
        """Placeholder slots for the first segment (every slot is initialised by it); built on the
        host so that nothing but the bucket's program is ever compiled."""
        return device_zeros(self.abstract_state, self.shard)

    # -- checkpoints -----------------------------------------------------------------------------
    def due(self) -> bool:
        """Whether half a segment's time or more is unsaved."""
        return self.unsaved_s >= self.segment_seconds / 2

    def checkpoint(self, force: bool = False, empty: bool = False) -> None:
        """Save the slots' state once half a segment's time or more is unsaved (or with `force`): a
        checkpoint costs tens of milliseconds, more than the calibration segment or a short last one
        it would protect. `empty`: save it with no slot occupied too (its clock says the runner was
        empty then)."""
        if self.state is None or not (self.occupied or empty) or not (force or self.due()):
            return
        self.unsaved_s = 0.0
        self.checkpoints.save(
            saved_part(self.state),
            {
                "slots": [r.run_id if r else None for r in self.slots],
                "wall": self.wall.tolist(),
                "n_slots": self.n_slots,
                "clock": self.clock,
                "start": self.start.tolist(),
            },
        )

    def _restore(self, lookup: Callable[[str], Run | None]) -> None:
        restored = self.checkpoints.restore(saved_part(self.abstract_state))
        if restored is None:
            return
        saved, meta = restored
        if meta.get("n_slots") != self.n_slots:
            return
        self.restored_clock = self.clock = meta.get("clock", 0)
        for i, run_id in enumerate(meta["slots"]):
            run = lookup(run_id) if run_id else None
            if run is not None:
                self._place(i, run)
                self.start[i] = meta.get("start", self.start)[i]
                self.wall[i] = meta["wall"][i]
                self.rederive[i] = True
        self.seen_steps = np.asarray(jax.device_get(saved["step"]), np.int64)
        self.state = with_blank_problem(saved, self.abstract_state, self.shard)

    def close(self, remove_checkpoints: bool = False) -> None:
        self.checkpoints.close(remove=remove_checkpoints)
