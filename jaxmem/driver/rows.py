"""The store's rows of what a segment finished: each run's row, its kept trajectory points and its
test-time evaluations, and the notes on runs that diverged or were rejected."""

from __future__ import annotations

import time

from jaxmem.driver.settings import succeeded
from jaxmem.engine.executor import BucketRunner, Finished
from jaxmem.engine.program import Settings
from jaxmem.experiments.interface import Experiment
from jaxmem.persistence.untrained import as_untrained
from jaxmem.plan.runs import Run
from jaxmem.plan.trajectory_grid import on_grid
from jaxmem.spec.sweep import SweepSpec


class Rows:
    """Rows of finished runs under a spec's success rule and settings; `final_points`: the points of its
    test-time axes (jaxmem.engine.program.final_eval_points)."""

    def __init__(self, spec: SweepSpec, exp: Experiment, settings: Settings, final_points: list[dict]):
        self.spec, self.exp, self.settings, self.final_points = spec, exp, settings, final_points

    def success(self, f: Finished) -> bool:
        return succeeded(self.spec.success, self.settings, f)

    def run_row(self, f: Finished, runner: BucketRunner) -> dict:
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
            "success": self.success(f),
            "wall_time_s": f.wall,
            "device": runner.device,
            "finished_at": time.time(),
            "final_metrics": {**f.final, **(as_untrained(f.untrained) if self.settings.steps else {})},
        }

    def kept(self, trajectory: list) -> list:
        """The trajectory points stored: all of a log schedule's, else those `trajectory_per_decade` keeps."""
        if self.settings.eval_steps:
            return trajectory
        return on_grid(trajectory, self.spec.train.eval_every, self.spec.engine.trajectory_per_decade)

    def final_eval(self, finished: list[Finished]) -> list[tuple]:
        """The test-time evaluations of the finished runs: (run id, point index, point, metrics)."""
        return [
            (f.run.run_id, i, at, m) for f in finished for i, (at, m) in enumerate(zip(self.final_points, f.at_points))
        ]

    def notes(self, finished: list[Finished]) -> list[str]:
        """A line on each finished run that diverged, or whose instance failed the experiment's checks."""
        lines = []
        for f in finished:
            if f.diverged:
                lines.append(
                    f"run {f.run.run_id} ({describe(f.run)}) diverged (NaN/inf) after {f.steps} steps; frozen and "
                    "recorded"
                )
            elif failed := self.failed_checks(f):
                lines.append(
                    f"run {f.run.run_id} ({describe(f.run)}) rejected: its instance fails "
                    f"{', '.join(failed)}; not trained, recorded"
                )
        return lines

    def failed_checks(self, f: Finished) -> list[str]:
        """The experiment's precondition checks the run's problem failed at initialisation (see Experiment)."""
        return self.exp.failed_checks(f.final) if self.settings.steps else []


def describe(run: Run) -> str:
    return f"seed={run.seed}, lr={run.lr:g}" + (f", value={run.value}" if run.value is not None else "")
