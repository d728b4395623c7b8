"""The sweep driver: searches on the host, buckets of slots on the device, results in the store.

The driver is resumable by construction: the state of every threshold search is replayed from the
runs already in the store, in-flight runs come back from their bucket's checkpoint, and everything
else is recomputed deterministically. A bucket is checkpointed after a segment once half a segment's
time or more is unsaved, so a kill -9 costs it at most about a segment and a half of work. SIGINT /
SIGTERM stop it at the next segment end, after the finished runs are stored and the slots checkpointed.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
from concurrent import futures
from typing import Callable
import json
import logging
import math
import shutil
import signal
import time
from pathlib import Path

import jax

from jaxmem.plan import search as searching
from jaxmem.engine import device_memory
from jaxmem.driver.distributed import owned
from jaxmem.engine.executor import (
    BucketRunner,
    Finished,
    Program,
    abstract_state,
    compile_program,
    nbytes,
)
from jaxmem.experiments.registry import get as get_experiment
from jaxmem.driver.folder import RESTART_FLAG, claim, discard_results
from jaxmem.spec.expr import evaluate
from jaxmem.persistence.lock import LockError, OutputLock
from jaxmem.plan.runs import Run, make_run, point_id
from jaxmem.plan import planner
from jaxmem.plan.buckets import Bucket, padded_config
from jaxmem.plan.layout import Knobs, Layout
from jaxmem.plan.target import Target
from jaxmem.driver.progress import Progress
from jaxmem.driver.watchdog import Watch
from jaxmem.persistence.progress import Found, inflight
from jaxmem.engine.program import Settings, final_eval_points, log_schedule
from jaxmem.report.capacity.fit import fit_power_law
from jaxmem.report.from_store import report
from jaxmem.persistence.shards import merge_shards
from jaxmem.spec.sweep import SweepSpec, run_budget
from jaxmem.persistence.store import Store
from jaxmem.persistence.untrained import as_untrained
from jaxmem.plan.trajectory_grid import on_grid

EXIT_INTERRUPTED = 130
HISTORY = 128  # evaluations a segment records per slot when trajectories are on
EXIT_TERMINATED = 143
log = logging.getLogger("jaxmem")


class Interrupted(RuntimeError):
    """The sweep was stopped by a signal after saving everything; rerun to resume. With `abandoned`,
    the stop cut short a wait (a segment past its grace, a compile): that work goes on in a background
    thread, so a command line tool should exit without waiting for it (os._exit)."""

    def __init__(self, signum: int, abandoned: str = ""):
        self.signum, self.abandoned = signum, abandoned
        saved = (
            f"abandoned the {abandoned}; stored results and earlier checkpoints are kept"
            if abandoned
            else "results and checkpoints are saved"
        )
        super().__init__(f"stopped by {signal.Signals(signum).name}; {saved}, rerun the same command to resume")


@dataclasses.dataclass
class Unit:
    """One (grid point, seed) pair: a threshold search, or a plain set of runs (one per learning rate)."""

    point: dict
    seed: int

    @functools.cached_property
    def id(self) -> str:
        return f"{point_id(self.point)}/{self.seed}"


def settings_of(spec: SweepSpec) -> Settings:
    """The program's training settings: the success rule's metric and direction (a run without one
    never stops early and never succeeds), its threshold for steps_to_threshold and giving up,
    `train.early_stop` on the metric `stop_metric` names, `train.give_up`."""
    train, rule = spec.train, spec.success
    higher = rule is None or rule.direction == "at_least"
    never = math.inf if higher else -math.inf
    metric = rule.metric if rule else train.metric
    return Settings(
        steps=train.steps,
        eval_every=train.eval_every,
        metric=metric,
        hit_threshold=rule.threshold if rule else never,
        stop_threshold=train.early_stop if train.early_stop is not None else never,
        stop_metric=stop_metric(spec, metric),
        history=HISTORY if spec.engine.record_trajectory else 0,
        integrator=train.integrator,
        rtol=train.rtol,
        atol=train.atol,
        higher_is_better=higher,
        give_up=train.give_up,
        eval_steps=log_schedule(train.steps, train.eval_points) if train.eval_schedule == "log" else (),
        final_eval=final_eval_values(spec),
        matmul_precision=spec.engine.matmul_precision,
    )


def stop_metric(spec: SweepSpec, judged: str) -> str:
    """The metric `train.early_stop` reads: `train.metric` where the spec gives one, else the judged
    metric. A [success] metric other than train.metric thus judges runs on data that did not stop them
    (e.g. stop on a validation error, succeed on the final test error)."""
    return spec.train.metric if "metric" in spec.resolved.get("train", {}) else judged


def final_eval_values(spec: SweepSpec) -> tuple[tuple[str, tuple], ...]:
    """The test-time axes with the values the program reads (a choice's index, a bool as 0/1)."""
    fields = get_experiment(spec.experiment).fields
    return tuple((name, tuple(fields[name].traced_value(v) for v in values)) for name, values in spec.final_eval)


def succeeded(rule, settings: Settings, f: Finished) -> bool:
    """Whether a finished run meets the success rule: its best or its final evaluation reaches the
    threshold in the rule's direction."""
    if rule is None:
        return False
    value = f.best if rule.counts == "best" else f.final.get(rule.metric, math.nan)
    return bool(settings.toward(value) >= settings.toward(rule.threshold))


class Sweep:
    def __init__(
        self,
        spec: SweepSpec,
        out_dir: Path,
        store: Store,
        progress: Progress,
        devices=None,
        lease=None,
        part: tuple[int, int] = (0, 1),
        memory_cap: float | int = device_memory.DEFAULT_CAP,
        hard_exit: bool = False,
        target: Target | None = None,
    ):
        """A sweep, or with `part` = (k, n) process k's share of it (every n-th unit) in a job of n
        processes. `memory_cap` bounds each program's memory per device (see jaxmem.memory);
        `hard_exit`: a stop signal may end the process when a hung program keeps it from answering
        (see driver.watchdog; for the command line, not for a Python session); `target`: the devices
        to plan for (default: `devices`; another kind only to show its plan, see jaxmem.plan.planner)."""
        self.spec, self.out_dir, self.store, self.progress = spec, out_dir, store, progress
        self.lease: OutputLock | None = lease  # checked at segment ends: stop if another run took the folder
        self.exp = get_experiment(spec.experiment)
        self.devices = list(devices or jax.local_devices())
        self.units = [Unit(p, s) for p in spec.points for s in spec.seeds]
        self.mine = owned(self.units, *part)  # the units this process runs (all, in a single process)
        self.target = target or device_memory.target_of(self.devices)
        self.budget = device_memory.budget(self.target.memory_bytes, memory_cap)
        self.outcomes = store.finished_runs()
        self.searches_done = store.finished_searches()
        self.answers = store.search_answers()  # unit id -> answer (NaN when censored): seeds law brackets
        self.runners: dict[str, BucketRunner] = {}
        self.compiler = futures.ThreadPoolExecutor(1, thread_name_prefix="jaxmem-compile")  # off the critical path
        self.to_compile: dict[str, tuple[Bucket, list[Run]]] = {}  # buckets waiting for (or in) their compile,
        # in order, with the runs handed to them meanwhile (the first is the program's template)
        self.compiling: tuple | None = None  # (future, compile rows) of the compile running now
        self.pending: dict[str, Run] = {}
        self.enqueued: set[str] = set()  # run ids handed to a runner (a runner keeps a run until it finishes)
        self.run_cache: dict[tuple, list[Run]] = {}  # see _runs_for
        self.turn = 0
        self.settings = settings_of(spec)
        self.stop_signal: int | None = None
        self.watch = Watch(lambda message: self.progress.note(message, self.stop_signal is not None), hard_exit)
        self.busy: BucketRunner | None = None  # the runner whose segment the driver waits for
        self.plan = planner.plan(spec, self.exp, self.target, pinned_plan(store, spec))
        self.layout = Layout(spec, self.exp, self.plan.knobs, self.target.platform, self.target.count, self.budget)
        self.search = self.layout.search  # the spec's search with the plan's probes per round
        self.final_points = final_eval_points(spec.final_eval)
        self.earlier = law_chains(spec, self.mine, part)
        self.seeded_noted: set[str] = set()

    def step_budget(self, run: Run) -> int:
        """The run's step budget: `train.steps`, or the spec's step expression at the run's config."""
        if self.spec.step_budget is None:
            return self.spec.train.steps
        return run_budget(self.spec.step_budget, self.exp.complete(run.config), self.spec.train.eval_every)

    # -- what is left to run ---------------------------------------------------------------------
    def _runs_for(self, unit: Unit, value: int | None, round_: int) -> list[Run]:
        """The unit's runs at `value`, memoised: `refresh` asks for every open unit's runs after every
        segment, and their ids are hashes (sha1 of JSON) that cost more than a short segment's work."""
        key = (unit.id, value, round_)
        if key not in self.run_cache:
            variable = self.spec.search.variable if self.spec.search else None
            shared = self.exp.same_problem_across
            self.run_cache[key] = [
                make_run(unit.point, unit.seed, lr, variable, value, round_, shared)
                for lr in self.spec.train.learning_rates
            ]
        return self.run_cache[key]

    def _probe_outcome(self, unit: Unit, value: int) -> bool | None:
        results = [self.outcomes.get(r.run_id) for r in self._runs_for(unit, value, 0)]
        if any(r is None for r in results):
            return None
        success = any(success for success, _ in results)
        return success if self.spec.search.goal == "largest" else not success  # bracket the last failure

    def _bracket(self, unit: Unit) -> searching.Bracket:
        """The unit's first bracket: the spec's bounds, or with `law_axis` the neighbourhood of the
        power law fitted to the answers of the same seed's smaller values on that axis (>= 2 needed)."""
        s = self.search
        lo, hi = (int(evaluate(b, unit.point)) for b in (s.lo, s.hi))
        ceiling = self.exp.fields[s.variable].maximum
        known = [(u.point[s.law_axis], self.answers.get(u.id, math.nan)) for u in self.earlier.get(unit.id, [])]
        prediction = power_law_at(known, unit.point[s.law_axis]) if s.law_axis else math.nan
        seeded = searching.seeded(lo, hi, prediction, s.law_margin)
        if seeded is None:
            return searching.start(s, lo, hi, ceiling)
        if unit.id not in self.seeded_noted:
            self.seeded_noted.add(unit.id)
            self.progress.note(
                f"search {unit.id}: bracket {list(seeded)} around {prediction:.4g}, the law fitted to "
                f"{s.law_axis} = {', '.join(str(x) for x, _ in known)} (spec bounds [{lo}, {hi}])"
            )
        return searching.start(s, *seeded, ceiling, within=(lo, hi))

    def _waiting(self, unit: Unit) -> bool:
        """Whether a law-seeded search still waits for the searches of its seed's smaller values."""
        return any(u.id not in self.searches_done for u in self.earlier.get(unit.id, []))

    def refresh(self) -> list[dict]:
        """Recompute the pending runs of every open unit; return rows of searches that just finished."""
        pending, finished_searches = {}, []
        for unit in self.mine:
            if self.spec.search is None:
                runs = [r for r in self._runs_for(unit, None, 0) if r.run_id not in self.outcomes]
            else:
                if unit.id in self.searches_done or self._waiting(unit):
                    continue
                bracket, values = searching.replay(
                    self.search, self._bracket(unit), lambda v, u=unit: self._probe_outcome(u, v)
                )
                if bracket.done:
                    row = self._search_row(unit, bracket)
                    finished_searches.append(row)
                    self.searches_done.add(unit.id)
                    self.answers[unit.id] = row["capacity"] if not bracket.censored else math.nan
                    continue
                runs = [
                    r for v in values for r in self._runs_for(unit, v, bracket.rounds) if r.run_id not in self.outcomes
                ]
            pending.update((r.run_id, r) for r in runs)
        self.pending = pending
        return finished_searches

    def remember(self, runs: dict[str, tuple[bool, bool]], searches: set[str]) -> None:
        """Count runs and searches finished before, outside this sweep's store, as done."""
        self.outcomes.update(runs)
        self.searches_done |= searches

    def _search_row(self, unit: Unit, b: searching.Bracket) -> dict:
        """The finished search's row. Its `capacity` is the answer: the largest value that succeeds, or
        with goal "smallest" the smallest (the bracket then ran on flipped outcomes: its capacity is the
        last failure and its first failure the answer); `first_failure` is the value just past it."""
        config = self.exp.complete(unit.point)
        variable = self.spec.search.variable
        found, beyond = (
            (b.capacity, b.first_failure) if self.spec.search.goal == "largest" else (b.first_failure, b.capacity)
        )
        at_capacity = {**config, variable: int(found)} if not math.isnan(found) else None
        return {
            "unit": unit.id,
            "point": point_id(unit.point),
            "seed": unit.seed,
            "config": unit.point,
            "variable": variable,
            "capacity": found,
            "first_failure": beyond,
            "censored": b.censored,
            "rounds": b.rounds,
            "probes": b.probes,
            "non_monotone": b.non_monotone,
            "params": self.exp.cost(
                "params", self.exp.effective(at_capacity or {**config, variable: b.lo})
            ),  # the variable may size it
            "bits": self.exp.cost("bits", self.exp.effective(at_capacity)) if at_capacity else math.nan,
            "status": "done",
        }

    # -- buckets -----------------------------------------------------------------------------------
    def bucket_for(self, run: Run) -> Bucket:
        """The run's bucket (see jaxmem.plan.layout.Layout.bucket_for)."""
        return self.layout.bucket_for(run.config)

    def _hand_over(self, run: Run) -> None:
        """Give the run to its bucket's runner, or, while that bucket's program waits for or is in its
        compile, to the bucket's waiting list: one compile at a time runs in a background thread while
        the other buckets train."""
        bucket = self.bucket_for(run)
        if bucket.id in self.runners:
            self.runners[bucket.id].enqueue(run)
        elif bucket.id in self.to_compile:
            self.to_compile[bucket.id][1].append(run)
        else:
            self.to_compile[bucket.id] = (bucket, [run])
            self._compile_next()

    def _compile_next(self) -> None:
        """Start the next bucket's compile when none is running. A stop request is honoured first:
        after a signal no other bucket starts compiling (a compile can outlast a grace period)."""
        if self.compiling is not None or not self.to_compile:
            return
        self._check_signal()
        bucket, (run, *_) = next(iter(self.to_compile.values()))
        rows: list[tuple] = []  # the store is written by the driver's thread only: compile rows wait here
        slots = self.slots_for(bucket, run)
        future = self.compiler.submit(self.compile_bucket, bucket, run, slots, lambda *row: rows.append(row))
        self.compiling = (future, rows)

    def _start_compiled(self, wait: bool) -> None:
        """Make the runner of the bucket whose compile finished (with `wait`, wait for it), then start
        the next compile."""
        if self.compiling is None:
            return
        future, rows = self.compiling
        if wait:
            with self.watch.waiting(f"compile of bucket {self.to_compile[next(iter(self.to_compile))][0].id}"):
                while not futures.wait([future], timeout=0.5).done:
                    self._check_signal(compiling=True)
        if not future.done():
            return
        bucket, runs = self.to_compile.pop(next(iter(self.to_compile)))
        self.compiling = None
        for row in rows:
            self.store.add_compile(*row)
        self.runners[bucket.id] = runner = self._runner_with(bucket, runs[0], future.result())
        for run in runs:
            runner.enqueue(run)
        self._compile_next()

    def slots_for(self, bucket: Bucket, run: Run) -> int:
        """Total slots of a bucket: a deterministic number per device, times the devices."""
        return self.layout.slots_for(bucket, run.config)

    def _new_runner(self, bucket: Bucket, run: Run, slots: int) -> BucketRunner:
        """A runner of `bucket` with `slots` slots, compiled now (in this thread)."""
        program = self.compile_bucket(bucket, run, slots, lambda *row: self.store.add_compile(*row))
        return self._runner_with(bucket, run, program)

    def _runner_with(self, bucket: Bucket, run: Run, program: Program) -> BucketRunner:
        runner = BucketRunner(
            self.exp,
            bucket,
            self.settings,
            program,
            run,
            self.out_dir / "checkpoints" / bucket.id,
            self.pending.get,
            self.plan.knobs.segment_seconds,
            self.step_budget,
        )
        if runner.occupied:
            self.progress.note(f"bucket {bucket.id}: {runner.occupied} in-flight runs restored from its checkpoint")
        return runner

    def fitting_state(self, bucket: Bucket, template: Run, slots: int) -> tuple[int, int]:
        """(slots, bytes per device of their run state and stated temporaries): `slots`, or fewer (powers
        of two per device) while what is known before compiling (the run state, and the temporaries the
        experiment states, `Costs.temp_bytes`) is over the memory budget. OutOfMemory (exit 6, before
        anything is allocated) when one run's per device is over it."""
        n = self.target.count
        temporaries = self.exp.cost("temp_bytes", padded_config(self.exp, bucket, template.config))
        per_run = temporaries if math.isfinite(temporaries) else 0
        state = nbytes(abstract_state(self.exp, bucket, self.settings, slots // n, template))
        one_run = state // (slots // n) + per_run
        if one_run > self.budget:
            raise device_memory.OutOfMemory(
                f"bucket {bucket.id} ({bucket.label()}) does not fit in device memory: one run's state (parameters, "
                f"optimizer state, problem) and stated temporaries need {one_run / 2**20:,.1f} MiB per device, over "
                f"the memory budget of {self.budget / 2**20:,.1f} MiB (--memory-cap); make it smaller or give it a "
                "larger device"
            )
        fitting = device_memory.fitting_slots(slots // n, state + per_run * (slots // n), self.budget)
        return fitting * n, one_run * fitting

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
                reason, slots = f"out of memory compiling it ({_first_line(err)})", slots // 2
            else:
                record(bucket.id, bucket.shape_dict, slots, program.seconds, time.time())
                if program.peak_bytes <= self.budget:
                    return program
                if slots <= n:
                    raise device_memory.OutOfMemory(
                        f"bucket {bucket.id} ({bucket.label()}) does not fit in device memory: with one run per "
                        f"device XLA's memory analysis gives {program.peak_bytes / 2**20:,.1f} MiB, over the "
                        f"memory budget of {self.budget / 2**20:,.1f} MiB (--memory-cap)"
                    )
                reason = (
                    f"{program.peak_bytes / 2**20:.1f} MiB per device with {slots_text(slots)} is over the memory "
                    f"budget of {self.budget / 2**20:.1f} MiB"
                )
                slots = device_memory.fitting_slots(slots // n, program.peak_bytes, self.budget) * n
            self.progress.note(f"bucket {bucket.id}: {reason}; recompiling with {slots_text(slots)}")

    def _split(self, runner: BucketRunner, err: Exception) -> None:
        """Replace a bucket that ran out of device memory by one with half its slots; its runs (in the
        slots and queued) start again there, from scratch: none is lost."""
        runs = [r for r in runner.slots if r is not None] + list(runner.queue)
        if runner.n_slots <= len(self.devices):
            raise device_memory.OutOfMemory(
                f"bucket {runner.bucket.id} ({runner.bucket.label()}) does not fit in device memory with one run "
                f"per device: {_first_line(err)}"
            ) from err
        runner.close(remove_checkpoints=True)  # saved for its slot count: the replacement could not read them
        self.progress.note(
            f"bucket {runner.bucket.id}: out of memory with {slots_text(runner.n_slots)} ({_first_line(err)}); "
            f"retrying its {len(runs)} runs with {slots_text(runner.n_slots // 2)}"
        )
        self.runners[runner.bucket.id] = replacement = self._new_runner(runner.bucket, runs[0], runner.n_slots // 2)
        for run in runs:
            replacement.enqueue(run)

    def _step(self, runner: BucketRunner):
        """One segment of `runner` (see BucketRunner.step), or None if it ran out of memory and was split."""
        what = f"segment of bucket {runner.bucket.id} ({runner.bucket.label()}) with {slots_text(runner.n_slots)}"
        try:
            with self.watch.waiting(what, runner.expected_seconds()):
                self.busy = runner
                return runner.step()
        except Exception as err:
            if not device_memory.is_out_of_memory(err):
                raise
            self._split(runner, err)
            return None

    # -- main loop -----------------------------------------------------------------------------------
    def run(self) -> None:
        try:
            self._run()
        except Exception:  # the Abandoned the stop handler raised, or an error JAX made of it (in a callback)
            if self.watch.abandoned is None:
                raise
            self._save_runners(skip=self.busy)  # the busy runner's state never came back: none of it is saved
            raise Interrupted(self.watch.abandoned.signum, self.watch.abandoned.wait.what) from None
        finally:
            self.watch.close()
            self.compiler.shutdown(wait=False, cancel_futures=True)

    def _run(self) -> None:
        while True:
            self.store.add_searches(self.refresh())
            self._enqueue_pending()
            self._check_signal()
            active = [r for r in self.runners.values() if r.has_work()]
            self.progress.update(
                done=len(self.outcomes),
                pending=len(self.pending),
                searches=(len(self.searches_done), len(self.mine) if self.spec.search else 0),
            )
            if not active:
                if self.compiling is None:
                    break
                self._start_compiled(wait=True)
                continue
            runner = active[self.turn % len(active)]
            self.turn += 1
            segment = self._step(runner)
            self.busy = None
            if segment is None:
                continue
            finished, trajectory, steps = segment
            self.store.add_runs(
                [self._run_row(f, runner) for f in finished],
                self._kept(trajectory),
                [
                    (f.run.run_id, i, at, m)
                    for f in finished
                    for i, (at, m) in enumerate(zip(self.final_points, f.at_points))
                ],
            )
            self.outcomes.update((f.run.run_id, (self._success(f), f.diverged)) for f in finished)
            runner.checkpoint()
            self._start_compiled(wait=False)
            self.progress.advance(steps=steps, runs=len(finished))
            for f in finished:
                if f.diverged:
                    self.progress.note(
                        f"run {f.run.run_id} ({_describe(f.run)}) diverged (NaN/inf) after "
                        f"{f.steps} steps; frozen and recorded"
                    )
                elif failed := self._failed_checks(f):
                    self.progress.note(
                        f"run {f.run.run_id} ({_describe(f.run)}) rejected: its instance fails "
                        f"{', '.join(failed)}; not trained, recorded"
                    )
        for runner in self.runners.values():
            runner.close(remove_checkpoints=True)
        shutil.rmtree(self.out_dir / "checkpoints", ignore_errors=True)  # also those of a run killed after its last row

    def _kept(self, trajectory: list) -> list:
        """The trajectory points stored: all of a log schedule's, else those `trajectory_per_decade` keeps."""
        if self.settings.eval_steps:
            return trajectory
        return on_grid(trajectory, self.spec.train.eval_every, self.spec.engine.trajectory_per_decade)

    def _enqueue_pending(self) -> None:
        """Hand every pending run over once (see `_hand_over`): its bucket and the runner's checks cost
        O(slots), too much to repeat after every segment."""
        for run in self.pending.values():
            if run.run_id not in self.enqueued:
                self._hand_over(run)
                self.enqueued.add(run.run_id)

    def _failed_checks(self, f: Finished) -> list[str]:
        """The experiment's precondition checks the run's problem failed at initialisation (see Experiment)."""
        return self.exp.failed_checks(f.final) if self.settings.steps else []

    def _success(self, f: Finished) -> bool:
        return succeeded(self.spec.success, self.settings, f)

    def _run_row(self, f: Finished, runner: BucketRunner) -> dict:
        """The runs-table row of a finished run; in a sweep that trains, its final_metrics also hold the
        untrained model's metrics, as `untrained_<metric>` (the baseline that learning is judged against)."""
        r = f.run
        return {
            "run_id": r.run_id,
            "point": r.point,
            "seed": r.seed,
            "lr": r.lr,
            "value": r.value,
            "round": r.round,
            "config": r.config,
            "bucket": runner.bucket.id,
            "max_metric": f.best,
            "final_metric": f.final.get(self.settings.metric),
            "final_loss": f.final.get("loss"),
            "steps_run": f.steps,
            "steps_to_threshold": f.hit_step if f.hit_step >= 0 else None,
            "diverged": f.diverged,
            "success": self._success(f),
            "wall_time_s": f.wall,
            "device": runner.device,
            "finished_at": time.time(),
            "final_metrics": {**f.final, **(as_untrained(f.untrained) if self.settings.steps else {})},
        }

    def request_stop(self, signum, _frame=None) -> None:
        """The SIGINT/SIGTERM handler (main thread). A signal asks the driver to stop after the current
        wait (a repeated SIGTERM too, as a pre-emptor may send it); a wait past its grace (see
        driver.watchdog) is abandoned, and so is any wait on a second Ctrl-C. A second Ctrl-C outside a
        wait is ignored: the stop it asks for is under way (saving checkpoints, which an exception raised
        here would break). The watch thread's own resending of the signal is otherwise ignored."""
        wait = self.watch.past_grace()
        if wait is None and signum == signal.SIGINT and self.stop_signal is not None and not self.watch.resent:
            wait = self.watch.current
            if wait is None:
                return
        if wait is not None:
            raise self.watch.abandon(self.stop_signal or signum, wait)
        if self.watch.resent:
            return
        self.stop_signal = self.stop_signal or signum
        self.watch.stop_requested(self.stop_signal)
        self.progress.note(f"{signal.Signals(signum).name} received: finishing the current segment and saving", True)

    def _check_signal(self, compiling: bool = False) -> None:
        """Stop (Interrupted) if a signal asked for it, after checkpointing every runner; `compiling`:
        a compile is still running in its thread."""
        if self.lease is not None:
            try:
                self.lease.check()
            except LockError:  # another run may use the folder: no new checkpoint; those under way finish
                for runner in self.runners.values():  # (orbax's threads would fail at exit: a screen of tracebacks)
                    runner.close()
                raise
        if self.stop_signal is not None:
            self._save_runners()
            raise Interrupted(self.stop_signal, "compile of the next bucket" if compiling else "")

    def _save_runners(self, skip: BucketRunner | None = None) -> None:
        """Checkpoint the segments since each runner's last checkpoint (not `skip`'s: its state is in
        a program that has not returned) and close them."""
        for runner in self.runners.values():
            if runner is not skip:
                runner.checkpoint(force=True)
            runner.close()


PLAN = "plan"  # meta key: the result-deciding settings of the folder's first run (planner.pinned_knobs)


def pinned_plan(store: Store, spec: SweepSpec) -> dict | None:
    """The settings a folder's first run was planned with: its stored plan, or for a folder that ran
    before plans were stored, the spec's own settings (which it ran with); None for a fresh folder."""
    stored = store.meta().get(PLAN)
    if stored:
        return json.loads(stored)
    return planner.pinned_knobs(Knobs.of_spec(spec)) if store.finished_runs() else None


def law_chains(spec: SweepSpec, units: list[Unit], part: tuple[int, int]) -> dict[str, list[Unit]]:
    """With `search.law_axis`: unit id -> the units of the same seed and the same values of the other
    grid axes at smaller values of the law axis (their answers seed its bracket, so it waits for them)."""
    axis = spec.search.law_axis if spec.search else ""
    if not axis:
        return {}
    if part[1] > 1:
        raise ValueError("search.law_axis: law-seeded brackets run in one process (its searches wait on each other)")
    others = [a for a in spec.resolved.get("grid", {}) if a != axis]
    chain = lambda u: (u.seed, json.dumps([u.point.get(a) for a in others], default=str))  # noqa: E731
    return {u.id: [v for v in units if chain(v) == chain(u) and v.point[axis] < u.point[axis]] for u in units}


def power_law_at(known: list[tuple[float, float]], x: float) -> float:
    """The least-squares power law y = a·x^b through the (x, y) pairs with finite positive y, at `x`;
    NaN with fewer than two distinct such x."""
    pairs = [(px, py) for px, py in known if math.isfinite(py) and py > 0 and px > 0]
    if not pairs:
        return math.nan
    slope, intercept = fit_power_law(*zip(*pairs))
    return math.exp(intercept + slope * math.log(x))


@contextlib.contextmanager
def precision(name: str):
    """JAX's x64 mode on for a "float64" sweep, process-wide (compiles run in another thread, which a
    thread-local config context would not reach), and restored afterwards."""
    before = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", name == "float64" or before)
    try:
        yield
    finally:
        jax.config.update("jax_enable_x64", before)


def _first_line(err: Exception) -> str:
    return str(err).strip().splitlines()[0][:200] if str(err).strip() else type(err).__name__


def slots_text(count: int) -> str:
    """A slot count in words: 1 slot, 8 slots."""
    return f"{count} slot" if count == 1 else f"{count} slots"


def _describe(run: Run) -> str:
    return f"seed={run.seed}, lr={run.lr:g}" + (f", value={run.value}" if run.value is not None else "")


def run_sweep(
    spec: SweepSpec,
    out_dir: Path,
    quiet: bool = False,
    devices=None,
    memory_cap: float | int = device_memory.DEFAULT_CAP,
    noted: dict | None = None,
    hard_exit: bool = False,
    restart: bool = False,
) -> Path:
    """Run (or resume) a sweep into `out_dir`, then write its report; returns the report path. `noted`:
    more meta entries to keep with the sweep (see claim); `hard_exit`: see Sweep; `restart`: first discard
    the results the folder holds (jaxmem.driver.folder.discard_results)."""
    out_dir = Path(out_dir)
    with OutputLock(out_dir) as lock:
        if restart and (discarded := discard_results(out_dir)):
            log.warning("%s: discarded %s", RESTART_FLAG, ", ".join(str(p) for p in discarded))
        store = open_store(out_dir, spec, remove_shards=True, noted=noted)
        try:
            execute(spec, out_dir, store, quiet, devices, lease=lock, memory_cap=memory_cap, hard_exit=hard_exit)
        finally:
            store.close()
    return report(out_dir)


def open_store(work_dir: Path, spec: SweepSpec, remove_shards: bool = False, noted: dict | None = None) -> Store:
    """The store in `work_dir` bound to `spec`, with the rows of the per-process shards a stopped
    multi-process run left there merged in (and, with `remove_shards`, the shards deleted)."""
    store = Store(work_dir, repair=True)
    if store.quarantined:  # in-flight runs restart: their earlier trajectory rows were in the damaged file
        shutil.rmtree(work_dir / "checkpoints", ignore_errors=True)
    try:
        claim(store, spec, noted)
        merge_shards(store, work_dir, remove=remove_shards)
    except BaseException:
        store.close()
        raise
    return store


def already_done(sweep: Sweep) -> Found:
    """What this process's share of the sweep holds already: its runs and searches done, and the
    in-flight runs in its checkpoints."""
    units, grid = sweep.mine, sweep.spec.search is None
    runs = [r.run_id for u in units for r in sweep._runs_for(u, None, 0)] if grid else sweep.outcomes
    held, buckets = inflight(sweep.out_dir / "checkpoints", sweep.outcomes)
    searches = sum(u.id in sweep.searches_done for u in units)
    done = sum(r in sweep.outcomes for r in runs)
    return Found(done, searches, len(units), len(units) * len(sweep.spec.train.learning_rates), not grid, held, buckets)


def execute(
    spec: SweepSpec,
    out_dir: Path,
    store: Store,
    quiet: bool = False,
    devices=None,
    prior=None,
    lease=None,
    part: tuple[int, int] = (0, 1),
    memory_cap: float | int = device_memory.DEFAULT_CAP,
    hard_exit: bool = False,
) -> None:
    """Run a sweep (or with `part`, a process's share of it, see Sweep) into an open, claimed `store`,
    with its checkpoints under `out_dir`; `prior` = (runs, searches) finished before, elsewhere.
    SIGINT and SIGTERM stop it at the next segment end, or abandon a wait past its grace (Interrupted)."""
    title = f"{spec.name} [{spec.preset or 'base'}]" + (f" process {part[0]}/{part[1]}" if part[1] > 1 else "")
    progress = Progress(quiet=quiet, title=title)
    for skipped in spec.skipped:
        progress.note(f"skipped impossible point: {skipped}")
    sweep = Sweep(spec, out_dir, store, progress, devices, lease, part, memory_cap, hard_exit)
    if PLAN not in store.meta():
        store.set_meta({PLAN: json.dumps(planner.pinned_knobs(sweep.plan.knobs))})
    if sweep.target.platform != "cpu":
        for line in sweep.plan.describe():
            progress.note(line.strip())
    if prior:
        sweep.remember(*prior)
    if found := already_done(sweep).resume_line():
        progress.note(found)
    started = time.time()
    previous = float(store.meta().get("elapsed_s", 0.0))
    handlers = {s: signal.signal(s, sweep.request_stop) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        with progress, precision(spec.train.precision):
            sweep.run()
    finally:
        for s, h in handlers.items():
            signal.signal(s, h)
        store.set_meta(
            {
                "elapsed_s": str(previous + time.time() - started),
                "device": f"{sweep.devices[0].platform} x{len(sweep.devices)} ({sweep.devices[0].device_kind})",
            }
        )
