"""The sweep driver: the loop that connects searches on the host (driver.searches), buckets of slots on
the device (driver.compiles), results in the store (driver.rows) and stop requests (driver.signals).

Searches run with a round barrier (`plan.knobs.speculation` = 0: a CPU's plan, today's schedule) or
without one (jaxmem.plan.scheduler, an accelerator's plan): then every segment runs a fixed number of
program steps, decisions are taken at segment ends on that logical clock only, and the clock is stored
(meta CLOCK, each runner's checkpoint), so a resumed sweep decides as an undisturbed one would. Either
way the store's timeline holds each run's logical start, end and outcome step (jaxmem.persistence.timeline).

The driver is resumable by construction: the state of every threshold search is replayed from the
runs already in the store, in-flight runs come back from their bucket's checkpoint, and everything
else is recomputed deterministically. A bucket is checkpointed after a segment once half a segment's
time or more is unsaved, so a kill -9 costs it at most about a segment and a half of work. SIGINT /
SIGTERM stop it at the next segment end, after the finished runs are stored and the slots checkpointed.
"""

from __future__ import annotations

import contextlib
import json
import logging
import shutil
import signal
import time
from pathlib import Path

import jax

from jaxmem.driver.compiles import Programs, slots_text
from jaxmem.driver.distributed import owned
from jaxmem.driver.folder import RESTART_FLAG, claim, discard_results
from jaxmem.driver.progress import Progress
from jaxmem.driver.rows import Rows
from jaxmem.driver.searches import Searches, Unit
from jaxmem.driver.settings import settings_of
from jaxmem.driver.signals import EXIT_INTERRUPTED, EXIT_TERMINATED, Interrupted, Stopper, save_runners
from jaxmem.engine import compile_cache, device_memory
from jaxmem.engine.executor import BucketRunner
from jaxmem.engine.program import final_eval_points
from jaxmem.experiments.registry import get as get_experiment
from jaxmem.persistence.lock import OutputLock
from jaxmem.persistence.progress import Found, inflight
from jaxmem.persistence.shards import merge_shards
from jaxmem.persistence.store import COMPILE_CACHE, Store
from jaxmem.plan import planner
from jaxmem.plan.buckets import Bucket
from jaxmem.plan.layout import Knobs, Layout
from jaxmem.plan.runs import Run
from jaxmem.plan.target import Target
from jaxmem.plan.throughput import device_key
from jaxmem.spec.sweep import SweepSpec, run_budget

__all__ = ["EXIT_INTERRUPTED", "EXIT_TERMINATED", "Interrupted", "Sweep", "Unit", "claim", "run_sweep"]
log = logging.getLogger("jaxmem")
CLOCK = "clock"  # meta key: the logical step (program steps since the sweep began) the driver has reached


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
        self.exp = get_experiment(spec.experiment)
        self.devices = list(devices or jax.local_devices())
        self.units = [Unit(p, s) for p in spec.points for s in spec.seeds]
        self.mine = owned(self.units, *part)  # the units this process runs (all, in a single process)
        self.target = target or device_memory.target_of(self.devices)
        self.budget = device_memory.budget(self.target.memory_bytes, memory_cap)
        self.settings = settings_of(spec)
        self.plan = planner.plan(spec, self.exp, self.target, pinned_plan(store, spec))
        target, knobs = self.target, self.plan.knobs
        self.layout = Layout(spec, self.exp, knobs, target.platform, target.count, self.budget, device_key(target))
        self.searches = Searches(
            spec, self.exp, self.layout.search, self.mine, part, store, lambda message: self.progress.note(message)
        )
        self.pending: dict[str, Run] = {}
        self.enqueued: set[str] = set()  # run ids handed to a runner (a runner keeps a run until it finishes)
        self.turn = 0
        self.stopper = Stopper(progress, lease, hard_exit)
        self.busy: BucketRunner | None = None  # the runner whose segment the driver waits for
        self.rows = Rows(spec, self.exp, self.settings, final_eval_points(spec.final_eval))
        self.programs = Programs(
            self.exp,
            self.settings,
            self.layout,
            self.devices,
            self.budget,
            out_dir,
            progress,
            self.stopper,
            lambda *row: self.store.add_compile(*row),
            lambda run_id: self.pending.get(run_id),
            self.step_budget,
            self.plan.knobs.segment_seconds,
            self.plan.knobs.segment_steps // self.settings.eval_every if self.plan.knobs.speculation else 0,
        )
        self.clock = int(store.meta().get(CLOCK, 0))

    def step_budget(self, run: Run) -> int:
        """The run's step budget: `train.steps`, or the spec's step expression at the run's config."""
        if self.spec.step_budget is None:
            return self.spec.train.steps
        return run_budget(self.spec.step_budget, self.exp.complete(run.config), self.spec.train.eval_every)

    def bucket_for(self, run: Run) -> Bucket:
        """The run's bucket (see jaxmem.plan.layout.Layout.bucket_for)."""
        return self.layout.bucket_for(run.config)

    def refresh(self) -> list[dict]:
        """Recompute the pending runs of every open unit; return rows of searches that just finished."""
        self.pending, finished = self.searches.refresh()
        return finished

    def _step(self, runner: BucketRunner):
        """One segment of `runner` (see BucketRunner.step), or None if it ran out of memory and was split."""
        what = f"segment of bucket {runner.bucket.id} ({runner.bucket.label()}) with {slots_text(runner.n_slots)}"
        try:
            with self.stopper.watch.waiting(what, runner.expected_seconds()):
                self.busy = runner
                return runner.step()
        except Exception as err:
            if not device_memory.is_out_of_memory(err):
                raise
            self.programs.split(runner, err)
            return None

    # -- main loop -----------------------------------------------------------------------------------
    def run(self) -> None:
        watch = self.stopper.watch
        try:
            self._run_speculative() if self.plan.knobs.speculation else self._run()
        except Exception:  # the Abandoned the stop handler raised, or an error JAX made of it (in a callback)
            if watch.abandoned is None:
                raise
            save_runners(list(self.programs.runners.values()), skip=self.busy)  # the busy one's state never came back
            raise Interrupted(watch.abandoned.signum, watch.abandoned.wait.what) from None
        finally:
            watch.close()
            self.programs.close()

    def _run(self) -> None:
        programs = self.programs
        while True:
            self._add_searches(self.refresh())
            self._enqueue_pending()
            programs.check_signal()
            active = [r for r in programs.runners.values() if r.has_work()]
            self.progress.update(
                done=len(self.searches.outcomes),
                pending=len(self.pending),
                searches=(len(self.searches.done), len(self.mine) if self.spec.search else 0),
            )
            if not active:
                if programs.compiling is None:
                    break
                programs.start_compiled(wait=True)
                continue
            runner = active[self.turn % len(active)]
            self.turn += 1
            runner.clock = self.clock
            segment = self._step(runner)
            self.busy = None
            if segment is None:
                continue
            self._store(runner, segment, self.clock + runner.program_steps)
            self.clock += runner.program_steps
            self.store.set_meta({CLOCK: self.clock})
            runner.checkpoint()
            programs.start_compiled(wait=False)
        self._close()

    def _store(self, runner: BucketRunner, segment: tuple, known_at: int) -> None:
        """Store a segment's finished runs, known to the driver at logical step `known_at`, and count them."""
        finished, trajectory, steps = segment
        self.store.add_runs(
            [self.rows.run_row(f, runner) for f in finished],
            self.rows.kept(trajectory),
            self.rows.final_eval(finished),
            [("run", f.run.run_id, f.start, f.start + f.steps, known_at, "done") for f in finished],
        )
        for f in finished:
            self.searches.learn(f.run, self.rows.success(f), f.diverged, known_at)
        self.progress.advance(steps=steps, runs=len(finished))
        for line in self.rows.notes(finished):
            self.progress.note(line)

    def _close(self) -> None:
        """The sweep is done: its runners closed, its checkpoints removed."""
        for runner in self.programs.runners.values():
            runner.close(remove_checkpoints=True)
        shutil.rmtree(self.out_dir / "checkpoints", ignore_errors=True)  # also those of a run killed after its last row

    def _add_searches(self, rows: list[dict]) -> None:
        """Store the searches that ended at the current logical step."""
        self.store.add_searches(rows, [("search", r["unit"], 0, self.clock, self.clock, "done") for r in rows])

    # -- without a round barrier ------------------------------------------------------------------------
    def _run_speculative(self) -> None:
        """Segments of `segment_steps` program steps; at each boundary the searches (Searches.decide)
        freeze the probes no round wants and queue the wanted ones, most wanted first. Every bucket's
        compile is waited for before a segment (a compile's wall time must not move runs on the clock),
        and every runner with work runs one segment per boundary."""
        programs, depth = self.programs, self.plan.knobs.speculation
        self._restore_runners()
        while True:
            rows, launch, freeze = self.searches.decide(self.clock, depth, self._running())
            self._add_searches(rows)
            self._freeze(freeze)
            self._launch(launch)
            programs.check_signal()
            while programs.compiling is not None:
                programs.start_compiled(wait=True)
            active = [programs.runners[b] for b in sorted(programs.runners) if programs.runners[b].has_work()]
            self.progress.update(
                done=len(self.searches.outcomes),
                pending=len(self.pending),
                searches=(len(self.searches.done), len(self.mine)),
            )
            if not active:
                break
            end = self.clock + self.plan.knobs.segment_steps
            for runner in active:
                runner.clock = self.clock
                segment = self._step(runner)
                self.busy = None
                if segment is not None:
                    self._store(runner, segment, end)
            self._tick(end)
        self._close()

    def _tick(self, end: int) -> None:
        """Move the clock to the segment end `end`, store it and, when a runner's unsaved time is due,
        checkpoint every runner at it (an empty one too: a checkpoint from another step is not restored)."""
        self.clock = end
        self.store.set_meta({CLOCK: end})
        runners = list(self.programs.runners.values())
        for runner in runners:
            runner.clock = end
        if any(r.due() for r in runners):
            for runner in runners:
                runner.checkpoint(force=True, empty=True)

    def _running(self) -> dict[str, set[int]]:
        """unit id -> the values with a run in a slot."""
        running: dict[str, set[int]] = {}
        for runner in self.programs.runners.values():
            for run in runner.slots:
                if run is not None:
                    running.setdefault(run.unit, set()).add(run.value)
        return running

    def _freeze(self, probes: list[tuple[str, int]]) -> None:
        """Take the runs of the frozen probes out of their slots; store them as frozen at this step."""
        frozen = {(unit, value) for unit, value in probes}
        rows = []
        for runner in self.programs.runners.values():
            for run in [r for r in runner.slots if r is not None and (r.unit, r.value) in frozen]:
                start, steps = runner.withdraw(run.run_id)
                rows.append(("run", run.run_id, start, start + steps, self.clock, "frozen"))
        self.store.add_timeline(rows)

    def _launch(self, runs: list[Run]) -> None:
        """Queue the runs to launch, in their order, in their buckets (a runner's queue becomes exactly
        these: a probe wanted no more leaves it); a bucket without a program starts its compile."""
        self.pending = {r.run_id: r for r in runs}
        by_bucket: dict[str, list[Run]] = {b: [] for b in self.programs.runners}
        for run in runs:
            by_bucket.setdefault(self.bucket_for(run).id, []).append(run)
        for bucket, queued in by_bucket.items():
            if bucket in self.programs.runners:
                self.programs.runners[bucket].requeue(queued)
            else:
                for run in queued:
                    self.programs.hand_over(run)

    def _restore_runners(self) -> None:
        """On a resume, the runners of the buckets that have a checkpoint, and the clock at their latest
        checkpoint (a runner checkpointed at another step was empty then: its slots are emptied), from
        where the sweep replays: outcomes known later are run again; without a checkpoint to restore (a
        kill -9 before the first), from step 0: the runs in flight then start again where they started.
        A run in a slot was wanted at some segment end before."""
        if not self.clock:
            return
        knobs = self.plan.knobs
        for step in range(0, self.clock, knobs.segment_steps):
            self.pending.update(self.searches.wanted_runs(step, knobs.speculation))
        templates = {}
        for run in self.pending.values():
            templates.setdefault(self.bucket_for(run), run)
        runners = self.programs.runners
        for bucket, run in templates.items():
            if (self.out_dir / "checkpoints" / bucket.id).is_dir():
                runners[bucket.id] = self.programs.new_runner(bucket, run, self.layout.slots_for(bucket, run.config))
        restored = [r.restored_clock for r in runners.values() if r.restored_clock is not None]
        self.clock = max(restored, default=0)
        for runner in runners.values():
            if runner.restored_clock != self.clock:
                runner.forget()
            runner.clock = self.clock

    def _enqueue_pending(self) -> None:
        """Hand every pending run over once (see Programs.hand_over): its bucket and the runner's checks
        cost O(slots), too much to repeat after every segment."""
        for run in self.pending.values():
            if run.run_id not in self.enqueued:
                self.programs.hand_over(run)
                self.enqueued.add(run.run_id)


PLAN = "plan"  # meta key: the result-deciding settings of the folder's first run (planner.pinned_knobs)


def pinned_plan(store: Store, spec: SweepSpec) -> dict | None:
    """The settings a folder's first run was planned with: its stored plan, or for a folder that ran
    before plans were stored, the spec's own settings (which it ran with); None for a fresh folder."""
    stored = store.meta().get(PLAN)
    if stored:
        return json.loads(stored)
    return planner.pinned_knobs(Knobs.of_spec(spec)) if store.finished_runs() else None


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
    from jaxmem.report.from_store import report  # here: the report package loads scipy and matplotlib (1.7 s)

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
    outcomes = sweep.searches.outcomes
    runs = [r.run_id for u in units for r in sweep.searches.runs_for(u, None, 0)] if grid else outcomes
    held, buckets = inflight(sweep.out_dir / "checkpoints", outcomes)
    searches = sum(u.id in sweep.searches.done for u in units)
    done = sum(r in outcomes for r in runs)
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
        sweep.searches.remember(*prior)
    if found := already_done(sweep).resume_line():
        progress.note(found)
    started = time.time()
    before = store.meta()
    previous = float(before.get("elapsed_s", 0.0))
    loaded_before = json.loads(before.get(COMPILE_CACHE, "{}")).get("loaded", 0)
    handlers = {s: signal.signal(s, sweep.stopper.request_stop) for s in (signal.SIGINT, signal.SIGTERM)}
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
                COMPILE_CACHE: json.dumps(
                    {"dir": compile_cache.directory(), "loaded": loaded_before + sweep.programs.loaded}
                ),
            }
        )
