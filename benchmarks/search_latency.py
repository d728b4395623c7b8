"""Search latency without training: the authors' binary search, today's rounds and the scheduler without
a round barrier (jaxmem.plan.scheduler), on outcome models of the Fig 1 grids.

The grids are `bench_protocol.py`'s (linear: d ∈ [8, 11, 16, 22, 32], lr 1, 4,096 steps; MLP: d ∈ [8,
11, 16], m = 2d, lr 0.03, 32,768 steps), 5 seeds, the default search spec, in one program of one H200
holding a round of every search ((K + 2) × searches slots). K, the probes per round: the planner's
choice for an H200 today (`jaxmem run … --dry-run --plan-for h200`), the 11 of the H200 run of 28 Nov
(RESULTS_gpu_throughput_2026-11-28.md: "today's" below), and others. Every search runs on a logical timeline
(jaxmem.plan.search_timeline): decisions at segment boundaries, an outcome seen at the boundary
after it is known, at most the program's slots running at once.

Outcome model of a probe at value N of a search with threshold N* (x = N / N*):

- N* per (d, seed): the capacities the H200 run of these grids found (RESULTS_gpu_throughput_2026-11-28.jsonl);
- x ≤ 1 succeeds, after a number of steps drawn (a deterministic hash of the search and N) from the
  quantiles of the steps-to-threshold of CPU runs per bin of x, as a share of their step budget, times
  a scale fitted so that the protocol's probes on the H200 protocol run's answers take its measured
  steps (the MLP runs were the quick preset's, 2,048 steps, where a success near N* takes most of the
  budget; at 32,768 steps it takes a smaller share: the scale is 0.3);
- x > 1 fails, running the whole budget, but for non-monotone successes at the rate seen per bin of x;
- with the early-failure rule GIVE_UP in the spec (its own section per grid), a failure ends where the rule,
  replayed on the same CPU runs recorded with every evaluation, stopped its probe (quantiles of that share
  of the budget; the fitted folders run with `[engine] record_trajectory = true`, which trains the same).

Check: today's rounds in the model against the H200 run (probes and run-steps, printed per grid).

The CPU runs (`--fit linear=FOLDER mlp=FOLDER` prints the FITTED tables from results folders): linear,
the grid itself (`jaxmem.run(bench_protocol.jaxmem_spec(GRIDS["linear"], SEEDS_DEFAULT, "verified", 0),
FOLDER)`: 304 probes, 25 searches); MLP, `jaxmem run sweeps/nichani24/fig1_mlp.toml --out FOLDER` (the
quick preset: 141 probes, 12 searches); both with `engine = {record_trajectory = true,
trajectory_per_decade = 0}` added (`--set engine.record_trajectory=true --set engine.trajectory_per_decade=0`),
which the rule's replay reads.

`python benchmarks/search_latency.py` writes `RESULTS_search_latency.md` (about 30 s, pure Python).
"""

from __future__ import annotations

import argparse
import bisect
import dataclasses
import json
import math
import os
import platform
import sys
import time
import zlib
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import bench_protocol as bp  # noqa: E402

from jaxmem.experiments.registry import get  # noqa: E402
from jaxmem.plan import planner, search  # noqa: E402
from jaxmem.plan import search_timeline as timeline  # noqa: E402
from jaxmem.plan.search_timeline import Trial  # noqa: E402
from jaxmem.plan.target import named  # noqa: E402
from jaxmem.spec.expr import evaluate  # noqa: E402
from jaxmem.spec.sweep import SearchSpec, parse  # noqa: E402

BELOW = (0.5, 0.8, 0.9, 0.95, 0.98, 1.0)  # upper edges of the bins of x = N / N* at or below N*
ABOVE = (1.02, 1.05, 1.1, math.inf)  # and above it
QUANTILES = 8  # steps-to-threshold per bin: its 0, 1/8, ..., 8/8 quantiles
DEPTHS = (0, 1, 2, 3)
PROBES = (7, 11, 23)  # probes per round compared besides the planner's: the H200 run's plan, fewer, more
TODAY_PROBES = 11  # the plan of the H200 run (RESULTS_gpu_throughput_2026-11-28.md): today's rounds
VERDICT_DEPTH = 2
GIVE_UP = (0.5, 2.0)  # the early-failure rule modelled: a window of half the budget, pace 2 (RESULTS_give_up.md)
TARGET_PATH, TARGET_RUN_STEPS = 1.5, 1.3  # issue 38: budgets per search; ÷ today's run-steps
DRIVER_SECTION = "## Measured in the driver"  # the results file's section on real sweeps (driver_critical_path.py)

# Fitted with --fit (see the docstring): per bin of BELOW, the quantiles of steps-to-threshold ÷ budget;
# per bin of ABOVE, the share of probes that still succeed; give_up: the rule GIVE_UP replayed on the same
# runs recorded with every evaluation (`[engine] record_trajectory = true`, training unchanged: the tables
# above fit the same), the quantiles of a failing probe's end ÷ budget and the successes it would stop.
FITTED = {
    "linear": {
        "steps": [
            [0.0078, 0.0078, 0.0078, 0.0078, 0.0078, 0.0078, 0.0078, 0.0078, 0.0078],
            [0.0078, 0.0078, 0.0078, 0.0078, 0.0078, 0.0078, 0.0078, 0.0078, 0.0078],
            [0.0078, 0.0078, 0.0078, 0.0078, 0.0078, 0.0156, 0.0156, 0.0156, 0.0234],
            [0.0078, 0.0156, 0.0234, 0.0234, 0.0312, 0.0312, 0.0391, 0.0391, 0.3047],
            [0.0156, 0.0234, 0.0273, 0.0312, 0.0391, 0.0742, 0.1289, 0.2109, 0.2734],
            [0.0078, 0.0312, 0.0391, 0.0557, 0.0781, 0.0938, 0.1426, 0.2539, 0.4609],
        ],
        "above": [0.0952, 0.0, 0.0455, 0.0],
        "give_up": {
            "rule": [0.5, 2.0],
            "failing": [0.5, 0.5, 0.5, 0.5078, 0.5078, 0.5078, 0.5078, 0.5078, 0.8125],
            "changed": 0,
            "probes": 119,
        },
    },
    "mlp": {
        "steps": [
            [0.0312, 0.0312, 0.0312, 0.0312, 0.0312, 0.0312, 0.0312, 0.0625, 0.0625],
            [0.0625, 0.0625, 0.0625, 0.0938, 0.0938, 0.0938, 0.125, 0.1562, 0.3438],
            [0.1875, 0.1875, 0.1875, 0.1875, 0.1875, 0.2188, 0.25, 0.4844, 0.7188],
            [0.2188, 0.2422, 0.3125, 0.3906, 0.4375, 0.4844, 0.5625, 0.6953, 0.9062],
            [0.1562, 0.2148, 0.2734, 0.332, 0.3906, 0.4414, 0.4609, 0.668, 1.0],
            [0.3438, 0.3672, 0.4062, 0.4766, 0.625, 0.6484, 0.7812, 0.9375, 1.0],
        ],
        "above": [0.0, 0.0, 0.3, 0.0],
        "give_up": {
            "rule": [0.5, 2.0],
            "failing": [0.5, 0.5, 0.5625, 0.5938, 0.6875, 0.7422, 0.8125, 0.9062, 0.9688],
            "changed": 2,
            "probes": 63,
        },
    },
}


NOTES = [
    "Notes:",
    "",
    "- *answers = rounds of the plan*: the scheduler applies a round once the outcomes that decide it are",
    "  known (`search.deciding`), so its answers are the round scheduler's with the same K on the same",
    "  outcomes, the model's non-monotone successes included. Across K the probes differ, and so may an",
    "  answer next to a non-monotone success (the last column).",
    "- Depth beyond the rounds a search has left changes nothing: with K ≥ 7 these searches take 3 rounds.",
    "- The critical path needs decisions at short logical intervals (the segment table); the driver's",
    "  segments are wall time today (about 20 s on an accelerator, some 17,000 program steps of these",
    "  programs on the H200), which would also make the decisions depend on wall time.",
]


# -- the outcome model ---------------------------------------------------------------------------------------
def unit_hash(*parts) -> float:
    """A deterministic draw in [0, 1) per key."""
    return zlib.crc32("/".join(map(str, parts)).encode()) / 2**32


def quantile(points: list[float], u: float) -> float:
    """The u-quantile of a distribution given by its QUANTILES + 1 equally spaced quantiles."""
    at = u * (len(points) - 1)
    i = min(int(at), len(points) - 2)
    return points[i] + (at - i) * (points[i + 1] - points[i])


@dataclasses.dataclass(frozen=True)
class OutcomeModel:
    budget: int
    eval_every: int
    steps: list  # per bin of BELOW: quantiles of steps-to-threshold ÷ the fitted runs' budget
    above: list  # per bin of ABOVE: the share that succeeds
    scale: float = 1.0  # of a success's steps, as a share of `budget`
    failing: list | None = None  # with the early-failure rule: quantiles of a failure's end ÷ budget (None: 1)

    def trial(self, threshold: int, key, value: int) -> Trial:
        x, u = value / threshold, unit_hash(key, value)
        if x > 1 and unit_hash("above", key, value) >= self.above[bisect.bisect_left(ABOVE, x)]:
            return Trial(False, self.failure_steps(u))
        share = quantile(self.steps[min(bisect.bisect_left(BELOW, x), len(BELOW) - 1)], u)
        return Trial(True, self.whole_evaluations(self.scale * share))

    def failure_steps(self, u: float) -> int:
        """When a failure is known: its whole budget, or where the rule gives up (a share of the budget)."""
        return self.budget if self.failing is None else self.whole_evaluations(quantile(self.failing, u))

    def whole_evaluations(self, share: float) -> int:
        """`share` of the budget, rounded up to whole evaluations, at least one and at most the budget."""
        blocks = math.ceil(share * self.budget / self.eval_every)
        return min(self.budget, max(1, blocks) * self.eval_every)

    def scaled(self, scale: float) -> "OutcomeModel":
        return dataclasses.replace(self, scale=scale)

    def giving_up(self, failing: list) -> "OutcomeModel":
        return dataclasses.replace(self, failing=failing)


def fit(folder: str, budget: int) -> dict:
    """The FITTED tables of a results folder: each probe's outcome (its best learning rate) against
    x = N / the search's answer."""
    import numpy as np

    from jaxmem.persistence.store import load_results

    runs, searches = load_results(folder), load_results(folder, "searches")
    answer = {(p, s): c for p, s, c in zip(searches.point, searches.seed, searches.capacity)}
    runs["x"] = [v / answer[(p, s)] for v, p, s in zip(runs.value, runs.point, runs.seed)]
    probes = runs.groupby(["point", "seed", "value"]).agg(x=("x", "first"), ok=("success", "max"))
    probes["share"] = runs.groupby(["point", "seed", "value"]).steps_to_threshold.min() / budget
    below, above = probes[probes.x <= 1], probes[probes.x > 1]
    edges = (0.0, *BELOW)
    steps = [
        np.quantile(below.share[(below.x > lo) & (below.x <= hi)], np.linspace(0, 1, QUANTILES + 1)).round(4).tolist()
        for lo, hi in zip(edges, edges[1:])
    ]
    edges = (1.0, *ABOVE)
    shares = [round(float(above.ok[(above.x > lo) & (above.x <= hi)].mean()), 4) for lo, hi in zip(edges, edges[1:])]
    return {"steps": steps, "above": shares}


def fit_give_up(folder: str, share: float, pace: float) -> dict:
    """The early-failure rule (window `share` of the budget, pace P) replayed on a results folder with every
    evaluation recorded (validate_give_up.given_up_at): the quantiles of a failing probe's end (its runs'
    latest) ÷ the budget, and the runs that succeeded at full length that it would stop first."""
    import numpy as np

    import validate_give_up as vg
    from jaxmem.driver.settings import settings_of
    from jaxmem.persistence.store import Store, load_results

    settings = settings_of(parse(json.loads(Store(folder).meta()["resolved_spec"]), name="fitted"))
    runs = load_results(folder, expand=False).set_index("run_id")
    series = vg.recorded(load_results(folder, "trajectories", expand=False), settings.metric)
    window, ends, changed = vg.window_evaluations(settings, share), {}, 0
    for run_id, (steps, values) in series.items():
        run = runs.loc[run_id]
        at = vg.given_up_at(settings, window, pace, steps, values)
        end = int(run.steps_run) if at is None or at >= run.steps_run else at
        changed += bool(run.success) and end < run.steps_run
        probe = (run.point, run.seed, run.value)
        ends[probe] = max(ends.get(probe, 0), end) if not run.success else math.inf
    failing = [e / settings.steps for e in ends.values() if e != math.inf]
    quantiles = np.quantile(failing, np.linspace(0, 1, QUANTILES + 1)).round(4).tolist()
    return {"rule": [share, pace], "failing": quantiles, "changed": int(changed), "probes": len(failing)}


# -- the grids -----------------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Grid:
    name: str
    search: SearchSpec  # the default spec's, with the planner's probes per round
    budget: int
    eval_every: int
    bounds: dict  # (d, seed) -> the first bracket's (lo, hi, ceiling)
    thresholds: dict  # (d, seed) -> N*
    plan: str  # the planner's words

    def with_probes(self, probes: int) -> "Grid":
        return dataclasses.replace(self, search=dataclasses.replace(self.search, probes=probes))

    @property
    def slots(self) -> int:
        """The plan's one program holds a round's probes (both ends and K inside) of every search."""
        return (self.search.probes + 2) * len(self.thresholds)

    def first(self, spec: SearchSpec) -> dict:
        return {k: search.start(spec, lo, hi, ceiling) for k, (lo, hi, ceiling) in self.bounds.items()}

    def trial(self, model: "OutcomeModel"):
        return lambda key, value: model.trial(self.thresholds[key], key, value)


def grid_of(name: str, gpu_run: dict, give_up: tuple[float, float] | None = None) -> Grid:
    """The grid's searches with the plan the planner makes for one H200 today, N* from the H200 run;
    `give_up`: with the early-failure rule (window share, pace) in its spec."""
    steps = bp.GRIDS[name]["steps"]
    window = round(give_up[0] * 128) if give_up else 0  # the grids evaluate every steps / 128
    raw = bp.jaxmem_spec(bp.GRIDS[name], bp.SEEDS_DEFAULT, "verified", window)
    if give_up:
        raw["train"]["give_up_pace"] = give_up[1]
    assert raw["train"]["eval_every"] * 128 == steps
    spec, exp, target = parse(raw, name=f"fig1_{name}"), get(raw["experiment"]), named("h200")
    plan = planner.plan(spec, exp, target)
    assert plan.estimate.compiles == 1, "the model holds one program"
    bounds = {}
    for point in spec.points:
        lo, hi = (int(evaluate(b, exp.complete(point))) for b in (spec.search.lo, spec.search.hi))
        bounds.update(((point["d"], seed), (lo, hi, exp.fields["N"].maximum)) for seed in spec.seeds)
    thresholds = {(int(d), int(s)): int(c) for d, seeds in gpu_run["capacity"].items() for s, c in seeds.items()}
    search_spec = dataclasses.replace(spec.search, probes=plan.knobs.probes)
    return Grid(name, search_spec, spec.train.steps, spec.train.eval_every, bounds, thresholds, plan.describe()[0])


def gpu_runs() -> dict:
    """The H200 run's cases (RESULTS_gpu_throughput_2026-11-28.jsonl): protocol/<grid> and jaxmem/<grid>."""
    lines = (json.loads(line) for line in (HERE / "RESULTS_gpu_throughput_2026-11-28.jsonl").read_text().splitlines())
    return {r["case"]: r["result"] for r in lines if r.get("status") == "ok"}


def paper(spec: SearchSpec) -> SearchSpec:
    return dataclasses.replace(spec, mode="paper", probes=1)


def calibrated(grid: Grid, model: OutcomeModel, protocol: dict) -> OutcomeModel:
    """The model scaled so that the protocol's probes, on the answers the H200 protocol run found
    (outcomes monotone), take its measured steps (failures their whole budget)."""
    spec = paper(grid.search)
    probes, success_steps, failures = 0, 0, 0
    for d, seeds in protocol["capacity"].items():
        threshold = int(seeds["0"])
        lo, hi, _ = grid.bounds[(int(d), 0)]
        b = search.start(spec, lo, hi)
        while not b.done:
            (value,) = search.probes(spec, b)
            t = model.trial(threshold, ("protocol", d), value) if value <= threshold else Trial(False, model.budget)
            probes, failures = probes + 1, failures + (not t.success)
            success_steps += t.steps if t.success else 0
            b = search.update(spec, b, {value: t.success})
    assert probes == protocol["runs"], f"{grid.name}: the protocol's probes, {probes}, are not its {protocol['runs']}"
    return model.scaled((protocol["steps"] - failures * model.budget) / success_steps)


# -- the schedules -------------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Row:
    plan: str
    schedule: str
    runs: dict  # (d, seed) -> Timeline

    def path(self, agg) -> float:
        return agg([t.done_at for t in self.runs.values()])

    @property
    def run_steps(self) -> int:
        return sum(t.run_steps for t in self.runs.values())


def protocol_row(grid: Grid, model: OutcomeModel) -> Row:
    """The authors' binary search: each search alone, one probe at a time, deciding at every evaluation."""
    spec = paper(grid.search)
    first, trial = grid.first(spec), grid.trial(model)
    runs = {k: timeline.simulate(timeline.rounds(spec, first), [k], trial, grid.eval_every, 1)[k] for k in first}
    return Row("—", "protocol's binary search", runs)


def plan_rows(grid: Grid, model: OutcomeModel, plan: str, segment: int, depths=DEPTHS) -> list[Row]:
    """Today's rounds and the scheduler at each depth, in the plan's program, deciding every `segment` steps."""
    first, keys, trial = grid.first(grid.search), sorted(grid.thresholds), grid.trial(model)
    policies = [("today's rounds", timeline.rounds(grid.search, first))]
    policies += [(f"no barrier, depth {d}", timeline.speculative(grid.search, first, d)) for d in depths]
    return [Row(plan, name, timeline.simulate(p, keys, trial, segment, grid.slots)) for name, p in policies]


def answer_of(t: timeline.Timeline) -> tuple:
    return (t.bracket.capacity, t.bracket.first_failure, t.bracket.censored)


def within_a_step(a: timeline.Timeline, b: timeline.Timeline, resolution: float) -> bool:
    """Within one resolution step (or one unit) of each other, or censored alike."""
    if a.bracket.censored or b.bracket.censored:
        return a.bracket.censored == b.bracket.censored
    return abs(a.bracket.capacity - b.bracket.capacity) <= max(1.0, resolution * b.bracket.capacity)


# -- the report ----------------------------------------------------------------------------------------------
def table(columns: list[str], rows: list[list]) -> list[str]:
    align = ["---"] * 2 + ["---:"] * (len(columns) - 2)
    lines = ["| " + " | ".join(columns) + " |", "| " + " | ".join(align) + " |"]
    return lines + ["| " + " | ".join(map(str, r)) + " |" for r in rows]


def mean(values) -> float:
    return sum(values) / len(values)


def row_cells(r: Row, same_plan_rounds: Row, today: Row, budget: int, resolution: float) -> list:
    equal = sum(answer_of(t) == answer_of(same_plan_rounds.runs[k]) for k, t in r.runs.items())
    close = sum(within_a_step(t, today.runs[k], resolution) for k, t in r.runs.items())
    return [
        r.plan,
        r.schedule,
        f"{r.path(mean):,.0f}",
        f"{r.path(mean) / budget:.2f}",
        f"{r.path(max) / budget:.2f}",
        f"{r.run_steps / 1e6:.3f}",
        f"{r.run_steps / today.run_steps:.2f}",
        sum(t.probes for t in r.runs.values()),
        sum(t.frozen for t in r.runs.values()),
        f"{equal} / {len(r.runs)}",
        f"{close} / {len(r.runs)}",
    ]


COLUMNS = [
    "plan",
    "schedule",
    "critical path per search, steps (mean)",
    "budgets (mean)",
    "budgets (max)",
    "run-steps (M)",
    "÷ today's",
    "probes",
    "frozen",
    "answers = rounds of the plan",
    "answers within a step of today's",
]


def grid_section(grid: Grid, model: OutcomeModel, gpu: dict) -> tuple[list[str], list[str]]:
    budget, resolution, segment = grid.budget, grid.search.resolution, grid.eval_every
    planned = grid.search.probes
    plans = {f"K = {k}" + (", the planner's today" if k == planned else ""): grid.with_probes(k) for k in PROBES}
    plans.setdefault(f"K = {planned}, the planner's today", grid)
    rows = {
        label: plan_rows(g, model, label, segment)
        for label, g in sorted(plans.items(), key=lambda p: p[1].search.probes)
    }
    today = rows[next(label for label in rows if label.startswith(f"K = {TODAY_PROBES}"))][0]
    body = [row_cells(protocol_row(grid, model), today, today, budget, resolution)]
    body[0][-2] = "—"
    for plan_rows_ in rows.values():
        body += [row_cells(r, plan_rows_[0], today, budget, resolution) for r in plan_rows_]
    measured = gpu[f"jaxmem/{grid.name}"]
    lines = [
        f"## {grid.name}: d ∈ {bp.GRIDS[grid.name]['d']}, {len(grid.thresholds)} searches, {budget:,}-step budget",
        "",
        f"The planner today, for one H200: `{grid.plan.strip()}` ({planned} probes per round). The H200 run "
        f"of this grid (28 Nov) planned {TODAY_PROBES}: *today's* is its rounds. Slots: (K + 2) × searches, one "
        f"program. Model scale: a success takes {model.scale:.3g} × its fitted share of the budget.",
        "",
        *table(COLUMNS, body),
        "",
        f"Model check, today's rounds (K = {TODAY_PROBES}) against the H200 run of this grid: "
        f"{sum(t.probes for t in today.runs.values())} probes and {today.run_steps / 1e6:.3f} M run-steps in the "
        f"model; {measured['runs']} runs and {measured['steps'] / 1e6:.3f} M run-steps measured.",
        "",
        f"Segment length, K = {TODAY_PROBES} (decisions every so many program steps; the driver's segments are "
        "about 20 s of wall time on an accelerator today, not a number of steps):",
        "",
    ]
    seg_body = []
    base = grid.with_probes(TODAY_PROBES)
    for label, steps in segments(grid):
        rounds_, depth2 = plan_rows(base, model, label, steps, depths=(VERDICT_DEPTH,))
        seg_body.append(
            [label, f"{steps:,}"]
            + [f"{r.path(mean) / budget:.2f} / {r.path(max) / budget:.2f}" for r in (rounds_, depth2)]
            + [f"{depth2.run_steps / rounds_.run_steps:.2f}"]
        )
    lines += table(
        [
            "segment",
            "steps",
            "today's rounds: budgets mean / max",
            f"depth {VERDICT_DEPTH}: budgets mean / max",
            "run-steps ÷ rounds",
        ],
        seg_body,
    )
    verdicts = [verdict(grid.name, label, rows[label], today, budget) for label in rows]
    ruled_lines, ruled_verdicts = give_up_section(grid.name, model, gpu, today)
    return lines + ["", *ruled_lines], verdicts + ruled_verdicts


def give_up_section(name: str, model: OutcomeModel, gpu: dict, today: Row) -> tuple[list[str], list[str]]:
    """The plans again with the early-failure rule GIVE_UP in the spec: failing probes end where the rule,
    replayed on the fitted CPU runs, stopped them; K the planner's for that spec, and others."""
    fitted = FITTED[name]["give_up"]
    assert tuple(fitted["rule"]) == GIVE_UP, "FITTED holds another rule: fit it again (--fit)"
    grid = grid_of(name, gpu[f"jaxmem/{name}"], GIVE_UP)
    ruled, budget, planned = model.giving_up(fitted["failing"]), grid.budget, grid.search.probes
    plans = {f"K = {k}" + (", the planner's with the rule" if k == planned else ""): k for k in (7, 11)}
    plans.setdefault(f"K = {planned}, the planner's with the rule", planned)
    safe = "changes no run" if not fitted["changed"] else f"changes {fitted['changed']} run(s) (not safe there)"
    rule = f"early-failure rule {GIVE_UP[0]:g}/{GIVE_UP[1]:g}" + ("" if not fitted["changed"] else f", which {safe}")
    body, verdicts = [], []
    for label, k in sorted(plans.items(), key=lambda p: p[1]):
        rows = plan_rows(grid.with_probes(k), ruled, label, grid.eval_every, depths=(VERDICT_DEPTH,))
        body += [row_cells(r, rows[0], today, budget, grid.search.resolution) for r in rows]
        verdicts.append(verdict(name, f"{label}, {rule}", rows, today, budget))
    lines = [
        f"### {name}, with the early-failure rule (window {GIVE_UP[0]:g} of the budget, pace {GIVE_UP[1]:g})",
        "",
        f"`give_up = {round(GIVE_UP[0] * 128)}` evaluations, `give_up_pace = {GIVE_UP[1]:g}` in the spec. A failing "
        f"probe ends where the rule, replayed on the fitted CPU runs' recorded evaluations, stopped it: quantiles "
        f"{', '.join(f'{q:g}' for q in fitted['failing'])} of the budget ({fitted['probes']} failing probes); there "
        f"the rule {safe}. Successes as above. The planner's plan for the spec with the rule: `{grid.plan.strip()}`. "
        "*÷ today's*: against today's rounds without the rule.",
        "",
        *table(COLUMNS, body),
        "",
    ]
    return lines, verdicts


def segments(grid: Grid) -> list[tuple[str, int]]:
    return [
        ("one evaluation", grid.eval_every),
        ("budget / 16", grid.budget // 16),
        ("budget / 4", grid.budget // 4),
        ("budget / 2", grid.budget // 2),
    ]


def verdict(name: str, label: str, rows: list[Row], today: Row, budget: int) -> str:
    r = next(r for r in rows if r.schedule.endswith(f"depth {VERDICT_DEPTH}"))
    path, ratio = r.path(max) / budget, r.run_steps / today.run_steps
    same = sum(answer_of(t) == answer_of(rows[0].runs[k]) for k, t in r.runs.items())
    return (
        f"- {name}, {label}, depth {VERDICT_DEPTH}: critical path at most {path:.2f} budgets per search (mean "
        f"{r.path(mean) / budget:.2f}; today's {today.path(max) / budget:.2f}), target ≤ {TARGET_PATH}: "
        f"**{'PASS' if path <= TARGET_PATH else 'FAIL'}**; run-steps {ratio:.2f}× today's, target ≤ "
        f"{TARGET_RUN_STEPS}: **{'PASS' if ratio <= TARGET_RUN_STEPS else 'FAIL'}**; answers those of the plan's "
        f"rounds in {same} of {len(r.runs)} searches."
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--fit", nargs="*", default=None, help="GRID=FOLDER: print the fitted tables and stop")
    parser.add_argument("--out", default=str(HERE / "RESULTS_search_latency.md"))
    args = parser.parse_args()
    if args.fit is not None:
        budgets = {"linear": bp.GRIDS["linear"]["steps"], "mlp": 2048}
        for item in args.fit:
            name, folder = item.split("=", 1)
            print(name, json.dumps({**fit(folder, budgets[name]), "give_up": fit_give_up(folder, *GIVE_UP)}))
        return
    gpu = gpu_runs()
    lines = [
        "# Search latency: binary search, today's rounds, and searches without a round barrier",
        "",
        "Written by `python benchmarks/search_latency.py` (no training: the schedules on outcome models; "
        f"{platform.python_implementation()} {platform.python_version()} on a {platform.machine()} CPU, "
        f"{os.cpu_count()} cores shared with other work, {time.strftime('%Y-%m-%d')}; the numbers do not depend "
        "on the machine). The outcome models and their sources are in the script's docstring.",
        "",
        "*Critical path per search*: the logical step (program steps since the sweep began) at which a search",
        "ends, in steps and in step budgets; *run-steps*: the steps its probes ran, a frozen one up to its",
        "freezing; *÷ today's*: against today's rounds with the H200 run's plan. The protocol runs each search",
        "alone, one probe at a time; the others share the plan's slots. Every schedule decides at every",
        "evaluation (the segment table shows longer segments). *depth*: how many rounds past the current one",
        "the scheduler speculates into; *K*: probes inside the bracket per round.",
        "",
    ]
    verdicts = []
    for name in ("linear", "mlp"):
        steps = bp.GRIDS[name]["steps"]
        base = OutcomeModel(steps, steps // 128, FITTED[name]["steps"], FITTED[name]["above"])
        grid = grid_of(name, gpu[f"jaxmem/{name}"])
        section, verdict_lines = grid_section(grid, calibrated(grid, base, gpu[f"protocol/{name}"]), gpu)
        lines += section
        verdicts += verdict_lines
    lines += ["## Acceptance (issue 38, on the model)", "", *verdicts, "", *NOTES, ""]
    out = Path(args.out)
    kept = out.read_text().partition(DRIVER_SECTION)[2] if out.is_file() else ""  # written by hand: kept
    Path(args.out).write_text("\n".join(lines) + (f"\n{DRIVER_SECTION}{kept}" if kept else ""))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
