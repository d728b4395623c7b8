"""A real sweep's critical path against benchmarks/search_latency.py's model for the same outcomes.

The results folder of a `jaxmem run` without a round barrier (engine.speculation > 0) holds its
timeline: each search's end on the logical clock (program steps). The model (jaxmem.plan.search_timeline,
the simulation benchmarks/search_latency.py runs) is driven here with the sweep's own outcomes: each
probe's success (any learning rate) and its steps (the longest of its runs); a probe the sweep froze
before its outcome fails after a whole budget in the model (it matters only if the two schedules part).
Same spec, probes per round, depth, segment and slots (the program's, per probe).

`python benchmarks/driver_critical_path.py FOLDER` prints both critical paths and their ratio.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

from jaxmem.driver.searches import Searches, Unit
from jaxmem.experiments.registry import get
from jaxmem.persistence.store import Store
from jaxmem.persistence.timeline import budget_of, summary
from jaxmem.plan import search_timeline
from jaxmem.plan.search_timeline import Trial
from jaxmem.spec.sweep import parse


def compared(folder: Path) -> dict:
    """The sweep's critical path (its timeline) and the model's on its outcomes, in program steps."""
    store = Store(folder, write=False)
    try:
        meta, runs = store.meta(), store.table("runs")
        measured = summary(store.table("timeline"), store.table("compiles"), budget_of(meta))
        spec = parse(json.loads(meta["resolved_spec"]), name=meta.get("spec", "sweep"))
        plan = json.loads(meta["plan"])
        search = dataclasses.replace(spec.search, probes=plan["probes"])
        units = [Unit(p, s) for p in spec.points for s in spec.seeds]
        first = {u.id: Searches(spec, get(spec.experiment), search, units, (0, 1), store).bracket(u) for u in units}
    finally:
        store.close()
    probes = runs.groupby([runs.point + "/" + runs.seed.astype(str), "value"])
    outcome = {key: (bool(g.success.any()), int(g.steps_run.max())) for key, g in probes}
    budget, lrs = spec.train.steps, len(spec.train.learning_rates)

    def trial(key, value):
        success, steps = outcome.get((key, value), (False, budget))
        return Trial(success if search.goal == "largest" else not success, steps)

    policy = search_timeline.speculative(search, first, plan["speculation"])
    model = search_timeline.simulate(policy, list(first), trial, plan["segment_steps"], measured.slots // lrs)
    path = max(t.done_at for t in model.values())
    return {
        "folder": str(folder),
        "budget": budget,
        "depth": plan["speculation"],
        "segment_steps": plan["segment_steps"],
        "slots": measured.slots,
        "measured_path": measured.path,
        "model_path": path,
        "ratio": measured.path / path,
        "measured_run_steps": measured.run_steps,
        "model_run_steps": sum(t.run_steps for t in model.values()),
        "measured_frozen": measured.frozen,
        "model_frozen": sum(t.frozen for t in model.values()),
        "occupancy": measured.occupancy,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("folder", type=Path)
    args = parser.parse_args()
    json.dump(compared(args.folder), sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
