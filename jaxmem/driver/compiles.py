"""The buckets' programs and their runners: one compile at a time runs in a background thread while the
other buckets train; a program is compiled with as many slots as fit the memory budget, and a runner
that runs out of device memory is replaced by one with half its slots."""

from __future__ import annotations

import math
import time
from concurrent import futures
from pathlib import Path
from typing import Callable

from jaxmem.driver.progress import Progress
from jaxmem.driver.signals import Stopper
from jaxmem.engine import device_memory
from jaxmem.engine.executor import BucketRunner, Program, abstract_state, compile_program, model_state, nbytes
from jaxmem.engine.program import Settings
from jaxmem.experiments.interface import SIZE, Experiment
from jaxmem.plan.buckets import Bucket, padded_config
from jaxmem.plan.layout import Layout
from jaxmem.plan.runs import Run


class Programs:
    """The runners of a sweep's buckets (`runners`, by bucket id) and the compile queue feeding them.
    `record(bucket, shape, slots, seconds, at)`: stores a compile (called in the driver's thread only);
    `lookup(run_id)`: the pending run of an id (a runner restores its checkpointed slots with it);
    `budget(run)`: a run's step budget; `segment_seconds`, `segment_blocks`: the runners' segments."""

    def __init__(
        self,
        exp: Experiment,
        settings: Settings,
        layout: Layout,
        devices: list,
        budget_bytes: float,
        out_dir: Path,
        progress: Progress,
        stopper: Stopper,
        record: Callable,
        lookup: Callable[[str], Run | None],
        budget: Callable[[Run], int],
        segment_seconds: float,
        segment_blocks: int = 0,
    ):
        self.exp, self.settings, self.layout, self.devices = exp, settings, layout, devices
        self.budget_bytes, self.out_dir, self.progress, self.stopper = budget_bytes, out_dir, progress, stopper
        self.record, self.lookup, self.budget, self.segment_seconds = record, lookup, budget, segment_seconds
        self.segment_blocks = segment_blocks  # evaluation blocks of every segment (0: about segment_seconds)
        self.runners: dict[str, BucketRunner] = {}
        self.compiler = futures.ThreadPoolExecutor(1, thread_name_prefix="jaxmem-compile")  # off the critical path
        self.to_compile: dict[str, tuple[Bucket, list[Run]]] = {}  # buckets waiting for (or in) their compile,
        # in order, with the runs handed to them meanwhile (the first is the program's template)
        self.compiling: tuple | None = None  # (future, compile rows) of the compile running now
        self.engine_bytes: dict[tuple, int] = {}  # a run state's bytes besides `model_state`, by static structure
        self.loaded = 0  # compiles served by the persistent compilation cache

    def check_signal(self, compiling: bool = False) -> None:
        self.stopper.check(list(self.runners.values()), compiling)

    def hand_over(self, run: Run) -> None:
        """Give the run to its bucket's runner, or, while that bucket's program waits for or is in its
        compile, to the bucket's waiting list: one compile at a time runs in a background thread while
        the other buckets train."""
        bucket = self.layout.bucket_for(run.config)
        if bucket.id in self.runners:
            self.runners[bucket.id].enqueue(run)
        elif bucket.id in self.to_compile:
            self.to_compile[bucket.id][1].append(run)
        else:
            self.to_compile[bucket.id] = (bucket, [run])
            self.compile_next()

    def compile_next(self) -> None:
        """Start the next bucket's compile when none is running. A stop request is honoured first:
        after a signal no other bucket starts compiling (a compile can outlast a grace period)."""
        if self.compiling is not None or not self.to_compile:
            return
        self.check_signal()
        bucket, (run, *_) = next(iter(self.to_compile.values()))
        rows: list[tuple] = []  # the store is written by the driver's thread only: compile rows wait here
        slots = self.layout.slots_for(bucket, run.config)
        future = self.compiler.submit(self.compile_bucket, bucket, run, slots, lambda *row: rows.append(row))
        self.compiling = (future, rows)

    def start_compiled(self, wait: bool) -> None:
        """Make the runner of the bucket whose compile finished (with `wait`, wait for it), then start
        the next compile."""
        if self.compiling is None:
            return
        future, rows = self.compiling
        if wait:
            with self.stopper.watch.waiting(f"compile of bucket {self.to_compile[next(iter(self.to_compile))][0].id}"):
                while not futures.wait([future], timeout=0.5).done:
                    self.check_signal(compiling=True)
        if not future.done():
            return
        bucket, runs = self.to_compile.pop(next(iter(self.to_compile)))
        self.compiling = None
        for row in rows:
            self.record(*row)
        self.runners[bucket.id] = runner = self.runner_with(bucket, runs[0], future.result())
        for run in runs:
            runner.enqueue(run)
        self.compile_next()

    def new_runner(self, bucket: Bucket, run: Run, slots: int) -> BucketRunner:
        """A runner of `bucket` with `slots` slots, compiled now (in this thread)."""
        return self.runner_with(bucket, run, self.compile_bucket(bucket, run, slots, self.record))

    def runner_with(self, bucket: Bucket, run: Run, program: Program) -> BucketRunner:
        runner = BucketRunner(
            self.exp,
            bucket,
            self.settings,
            program,
            run,
            self.out_dir / "checkpoints" / bucket.id,
            self.lookup,
            self.segment_seconds,
            self.budget,
            self.segment_blocks,
        )
        if runner.occupied:
            self.progress.note(f"bucket {bucket.id}: {runner.occupied} in-flight runs restored from its checkpoint")
        return runner

    def fitting_state(self, bucket: Bucket, template: Run, slots: int) -> tuple[int, int]:
        """(slots, bytes per device of their run state and stated temporaries): `slots`, or fewer (powers
        of two per device) while what is known before compiling (the run state, and the temporaries the
        experiment states, `Costs.temp_bytes`) is over the memory budget. OutOfMemory (exit 6, before
        anything is allocated) when one run's per device is over it."""
        n = self.layout.devices
        temporaries = self.exp.cost("temp_bytes", padded_config(self.exp, bucket, template.config))
        per_run = temporaries if math.isfinite(temporaries) else 0
        state = self.run_state_bytes(bucket, template) * (slots // n)
        one_run = state // (slots // n) + per_run
        if one_run > self.budget_bytes:
            raise device_memory.OutOfMemory(
                f"bucket {bucket.id} ({bucket.label()}) does not fit in device memory: one run's state (parameters, "
                f"optimizer state, problem) and stated temporaries need {one_run / 2**20:,.1f} MiB per device, over "
                f"the memory budget of {self.budget_bytes / 2**20:,.1f} MiB (--memory-cap); make it smaller or give "
                "it a larger device"
            )
        fitting = device_memory.fitting_slots(slots // n, state + per_run * (slots // n), self.budget_bytes)
        return fitting * n, one_run * fitting

    def run_state_bytes(self, bucket: Bucket, template: Run) -> int:
        """Bytes of one run's state in `bucket` (a program's state is its slots' times this: every leaf
        is mapped over them): its parameters, problem and optimizer state (`model_state`), and the
        engine's counters, metrics and history, the same in every bucket of one static structure,
        traced in full (`abstract_state`) once per structure."""
        own = nbytes(model_state(self.exp, bucket, self.settings, template))
        structure = tuple((k, v) for k, v in bucket.shape if self.exp.kinds[k].kind != SIZE)
        if structure not in self.engine_bytes:
            whole = nbytes(abstract_state(self.exp, bucket, self.settings, 1, template))
            self.engine_bytes[structure] = whole - own
        return own + self.engine_bytes[structure]

    def compile_bucket(
        self, bucket: Bucket, template: Run, slots: int, record: Callable = lambda *row: None
    ) -> Program:
        """The bucket's program with `slots` slots, or with fewer (powers of two per device) while its
        memory per device is over the budget: first by the size of the run state (known before
        compiling, a lower bound), then by XLA's memory analysis of the compiled program, or when XLA
        runs out of memory compiling it. A program over the budget with one slot per device is refused
        (OutOfMemory) before it runs. `record(bucket, shape, slots, seconds, at)` is told of every compile."""
        n = len(self.devices)
        slots, _ = self.fitting_state(bucket, template, slots)
        while True:
            self.progress.note(f"compiling bucket {bucket.id} ({bucket.label()}) with {slots_text(slots)}")
            try:
                program = compile_program(self.exp, bucket, self.settings, slots, template, self.devices)
            except Exception as err:
                if not device_memory.is_out_of_memory(err) or slots <= n:
                    raise
                reason, slots = f"out of memory compiling it ({first_line(err)})", slots // 2
            else:
                record(bucket.id, bucket.shape_dict, slots, program.seconds, time.time())
                self.loaded += program.loaded
                if program.peak_bytes <= self.budget_bytes:
                    return program
                if slots <= n:
                    raise device_memory.OutOfMemory(
                        f"bucket {bucket.id} ({bucket.label()}) does not fit in device memory: with one run per "
                        f"device XLA's memory analysis gives {program.peak_bytes / 2**20:,.1f} MiB, over the "
                        f"memory budget of {self.budget_bytes / 2**20:,.1f} MiB (--memory-cap)"
                    )
                reason = (
                    f"{program.peak_bytes / 2**20:.1f} MiB per device with {slots_text(slots)} is over the memory "
                    f"budget of {self.budget_bytes / 2**20:.1f} MiB"
                )
                slots = device_memory.fitting_slots(slots // n, program.peak_bytes, self.budget_bytes) * n
            self.progress.note(f"bucket {bucket.id}: {reason}; recompiling with {slots_text(slots)}")

    def split(self, runner: BucketRunner, err: Exception) -> None:
        """Replace a bucket that ran out of device memory by one with half its slots; its runs (in the
        slots and queued) start again there, from scratch: none is lost."""
        runs = [r for r in runner.slots if r is not None] + list(runner.queue)
        if runner.n_slots <= len(self.devices):
            raise device_memory.OutOfMemory(
                f"bucket {runner.bucket.id} ({runner.bucket.label()}) does not fit in device memory with one run "
                f"per device: {first_line(err)}"
            ) from err
        runner.close(remove_checkpoints=True)  # saved for its slot count: the replacement could not read them
        self.progress.note(
            f"bucket {runner.bucket.id}: out of memory with {slots_text(runner.n_slots)} ({first_line(err)}); "
            f"retrying its {len(runs)} runs with {slots_text(runner.n_slots // 2)}"
        )
        self.runners[runner.bucket.id] = replacement = self.new_runner(runner.bucket, runs[0], runner.n_slots // 2)
        for run in runs:
            replacement.enqueue(run)

    def close(self) -> None:
        self.compiler.shutdown(wait=False, cancel_futures=True)


def first_line(err: Exception) -> str:
    return str(err).strip().splitlines()[0][:200] if str(err).strip() else type(err).__name__


def slots_text(count: int) -> str:
    """A slot count in words: 1 slot, 8 slots."""
    return f"{count} slot" if count == 1 else f"{count} slots"
