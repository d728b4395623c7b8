"""Validation of the early-failure rule (`[train] give_up = K`, `give_up_pace = P`) against full-length runs.

Each shipped capacity sweep's `quick` preset runs once with the rule off and every evaluation recorded;
each rule is then replayed on each run's recorded evaluations with the engine's own predicate
(`jaxmem.engine.program.hopeless`). A rule is a window, as a share of the step budget (K = share × steps
/ eval_every evaluations, at least one), and a pace P: the run is credited with P times what it gained
over the window from now on. A run the rule stops before it succeeds would change its verdict (a
disagreement); a run it stops that fails anyway keeps its verdict and saves the steps it would have run.
No run changed means every search of the sweep probes the same values and finds the same answer with the
rule on (a search is a function of its verdicts); *probes changed* counts the probes whose verdict flips
(a probe survives a changed run where another learning rate still succeeds).

`python benchmarks/validate_give_up.py` writes `RESULTS_give_up.md`; `--sweeps a.toml,b.toml` (default:
every shipped sweep with a search), `--grids "mlp:8;linear"` (bench_protocol's Fig 1 grids at the authors'
step budget, 5 seeds, at these widths), `--windows 0.25,0.5`, `--paces 1,2`, `--keep DIR` (keep the
full-length runs there, one folder a sweep, and read them instead of training where they are complete).
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
COMPLETE = "complete.json"  # written into a kept folder once its sweep has run to its end


def capacity_sweeps() -> list[str]:
    """Every shipped sweep with a threshold search, as paths relative to the repository."""
    from jaxmem.spec.sweep import read_toml

    return [str(p.relative_to(ROOT)) for p in sorted(ROOT.glob("sweeps/*/*.toml")) if "search" in read_toml(p)]


RECORDED = {"record_trajectory": True, "trajectory_per_decade": 0}  # every evaluation of every run


def full_length_spec(path: Path):
    """The sweep's quick preset with the rule off and every evaluation of every run recorded."""
    from jaxmem.spec.sweep import parse, read_toml

    raw = read_toml(path)
    quick = raw.setdefault("presets", {}).setdefault("quick", {})
    quick.setdefault("train", {}).update(give_up=0, give_up_pace=1.0)
    quick.setdefault("engine", {}).update(RECORDED)
    return parse(raw, name=path.stem, preset="quick")


def grid_spec(name: str, ds: list[int]):
    """bench_protocol's Fig 1 grid `name` (5 seeds, the authors' rate and step budget) at the widths `ds`,
    every evaluation recorded: the rule at the paper's budget, where the quick presets' is shorter."""
    import bench_protocol as bp

    from jaxmem.spec.sweep import parse

    raw = bp.jaxmem_spec({**bp.GRIDS[name], "d": ds}, bp.SEEDS_DEFAULT, "verified", 0)
    return parse({**raw, "engine": RECORDED}, name=f"grid-{name}-" + "-".join(map(str, ds)))


def quick_rule(path: Path) -> str:
    """The rule the sweep's quick preset runs with: its window as a share of the budget and its pace, or off."""
    from jaxmem.spec.sweep import load

    train = load(path, "quick").train
    return f"{train.give_up * train.eval_every / train.steps:.2g}/{train.give_up_pace:g}" if train.give_up else "off"


def sources(sweeps: list[str], grids: list[str]) -> list[tuple[str, object, str]]:
    """(label, spec, the rule it runs with) of each sweep file (its quick preset's) and each grid `NAME:d,d`
    (bench_protocol's grids: off)."""
    import bench_protocol as bp

    found = [(sweep, full_length_spec(ROOT / sweep), quick_rule(ROOT / sweep)) for sweep in sweeps]
    for item in grids:
        name, _, widths = item.partition(":")
        ds = [int(d) for d in widths.split(",")] if widths else bp.GRIDS[name]["d"]
        grid = bp.GRIDS[name]
        seeds = len(bp.SEEDS_DEFAULT)
        label = f"bench_protocol {name} grid, d ∈ {ds}, {seeds} seeds, lr {grid['lr']:g}, {grid['steps']:,} steps"
        found.append((label, grid_spec(name, ds), "off"))
    return found


def window_evaluations(settings, share: float) -> int:
    """The rule's window K in evaluations: `share` of the step budget, at least one."""
    return max(1, round(share * settings.steps / settings.eval_every))


def given_up_at(settings, window: int, pace: float, steps: list[int], values: list[float]) -> int | None:
    """The step at which the rule (window K, pace P) stops a run with these evaluations (one at every
    evaluation of its linear schedule, step 0 first), or None: the engine's predicate at every
    evaluation at once, its ring of recent bests holding the best of K evaluations before."""
    import jax.numpy as jnp

    steps = np.asarray(steps)
    evaluations = steps // settings.eval_every
    if not np.array_equal(evaluations, np.arange(len(steps))):
        raise ValueError(f"the recorded evaluations are not every {settings.eval_every} steps from step 0")
    size = settings.steps // settings.eval_every + 1  # every run padded to its budget's evaluations: one compile
    best = np.maximum.accumulate(np.asarray([settings.toward(v) for v in values], np.float32))
    best = np.pad(best, (0, size - len(best)), mode="edge")
    earlier = np.concatenate([np.zeros(window, np.float32), best])[:size]  # the best K evaluations before
    stop = _predicate(settings._replace(give_up=window, give_up_pace=pace))(
        jnp.asarray(np.repeat(earlier[:, None], window, axis=1)), jnp.asarray(best)
    )
    hits = np.flatnonzero(np.asarray(stop)[: len(steps)])
    return int(steps[hits[0]]) if hits.size else None


@functools.cache
def _predicate(rule):
    """`hopeless` of `rule` at every evaluation of a budget (rings, bests), jitted once per rule."""
    import jax
    import jax.numpy as jnp

    from jaxmem.engine.program import hopeless

    n = jnp.arange(rule.steps // rule.eval_every + 1, dtype=jnp.int32)
    one = lambda ring, i, best: hopeless(rule, ring, i, best, i * rule.eval_every, rule.steps)  # noqa: E731
    return jax.jit(lambda rings, bests: jax.vmap(one)(rings, n, bests))


def recorded(trajectories, metric: str) -> dict:
    """run id -> (steps, values of `metric`) of its recorded evaluations, in step order."""
    series = {}
    for run_id, group in trajectories.groupby("run_id"):
        group = group.sort_values("step")
        series[run_id] = (list(group["step"]), [json.loads(m)[metric] for m in group["metrics"]])
    return series


def full_length_runs(spec, keep: Path | None):
    """(runs, trajectories, wall seconds) of the full-length spec: trained into `keep` (a folder named for
    the spec; or a temporary folder), or read from `keep` where an earlier call completed it."""
    from jaxmem.driver.sweep import run_sweep
    from jaxmem.persistence.store import load_results

    def read(folder: Path):
        return load_results(folder, expand=False), load_results(folder, "trajectories", expand=False)

    def timed(folder: Path) -> float:
        start = time.perf_counter()
        run_sweep(spec, folder, quiet=True)
        return time.perf_counter() - start

    if keep is None:
        with tempfile.TemporaryDirectory() as tmp:
            wall = timed(Path(tmp))
            return (*read(Path(tmp)), wall)
    folder = keep / spec.name
    if not (folder / COMPLETE).exists():
        wall = timed(folder)
        (folder / COMPLETE).write_text(json.dumps({"wall_s": wall}))
    return (*read(folder), json.loads((folder / COMPLETE).read_text())["wall_s"])


def replay(settings, runs, series, window: int, pace: float, searched: str = "") -> dict:
    """The rule (window K evaluations, pace P) on every run's recorded evaluations (`searched`: the
    searched field, left out where a changed run is named)."""
    probe_of = {r.run_id: (r.point, r.seed, r.value) for r in runs.itertuples()}
    varying = varying_fields(runs, searched)
    probes_won = {probe_of[r.run_id] for r in runs.itertuples() if r.success}
    changed, stopped, saved, lost, failing_ends = [], 0, 0, set(), []
    for run in runs.itertuples():
        if run.diverged or run.run_id not in series:
            continue
        steps, values = series[run.run_id]
        at = given_up_at(settings, window, pace, steps, values)
        if at is None or at >= run.steps_run:
            if not run.success:
                failing_ends.append(run.steps_run / settings.steps)
            continue
        if bool(run.success):
            lost.add(run.run_id)
            where = ", ".join(f"{k} = {v}" for k, v in json.loads(run.config).items() if k in varying)
            changed.append(
                f"{where}{', ' if where else ''}seed {run.seed}, lr {run.lr:g}, value {run.value}: succeeded at step "
                f"{run.steps_run}, given up at {at}"
            )
            continue
        stopped += 1
        saved += int(run.steps_run) - at
        failing_ends.append(at / settings.steps)
    still_won = {probe_of[r.run_id] for r in runs.itertuples() if r.success and r.run_id not in lost}
    return {
        "window": window,
        "stopped": stopped,
        "changed": changed,
        "probes_changed": len(probes_won - still_won),
        "saved": saved / max(int(runs["steps_run"].sum()), 1),
        "failing_end": float(np.mean(failing_ends)) if failing_ends else math.nan,
    }


def varying_fields(runs, searched: str) -> set[str]:
    """The config fields whose value differs between the sweep's points, the `searched` one aside."""
    configs = [json.loads(c) for c in runs["config"].unique()]
    values = {k: {json.dumps(c.get(k)) for c in configs} for k in set().union(*configs) if k != searched}
    return {k for k, v in values.items() if len(v) > 1}


def validate(label: str, spec, default: str, rules: list[tuple[float, float]], keep: Path | None) -> dict:
    from jaxmem.driver.settings import settings_of

    out = {"sweep": label, "default": default, "rules": {}}
    if spec.step_budget is not None or spec.train.eval_schedule == "log" or not spec.train.steps:
        out["skipped"] = "no fixed step budget on a linear evaluation schedule: the rule does not apply"
        return out
    settings = settings_of(spec)
    runs, trajectories, out["wall_s"] = full_length_runs(spec, keep)
    series = recorded(trajectories, settings.metric)
    for share, pace in rules:
        window = window_evaluations(settings, share)
        out["rules"][f"{share:g}/{pace:g}"] = replay(settings, runs, series, window, pace, spec.search.variable)
    out["runs"] = len(runs)
    out["probes"] = len({(r.point, r.seed, r.value) for r in runs.itertuples()})
    out["failures"] = int((~runs["success"].astype(bool)).sum())
    return out


def safe_rule(result: dict) -> str | None:
    """The rule that saves the most steps of those changing no run of the sweep (None: no such rule
    stops any run)."""
    safe = [(r["saved"], name) for name, r in result["rules"].items() if not r["changed"] and r["stopped"]]
    return max(safe)[1] if safe else None


def markdown(results: list[dict], rules: list[tuple[float, float]]) -> str:
    names = [f"{s:g}/{p:g}" for s, p in rules]
    lines = [
        "# Early-failure rule: verdicts against full-length runs",
        "",
        "Written by `python benchmarks/validate_give_up.py`. Each shipped capacity sweep's `quick` preset ran",
        "once with the rule off and every evaluation recorded; each rule was replayed on the recorded",
        "evaluations with the engine's own predicate. A rule *w/P*: a window of w of the step budget",
        "(`give_up` = w × steps / eval_every evaluations) and a pace P (`give_up_pace`): a run stops once its",
        "best, gaining P times what it gained over the window every window from now on, cannot reach the",
        "threshold. Per rule: *probes changed* (probes, a value of one search over all its learning rates,",
        "whose verdict the rule flips: each would change that search) / *runs changed* (runs that succeeded",
        "at full length that the rule stops first) / *stopped* (failing runs it stops early) / *steps saved*",
        "(share of all the sweep's training steps) / *failing end* (where the failing runs end, mean share of",
        "the budget). *safe*: the rule saving the most steps among those that change no run. *on by default*:",
        "the rule the sweep's quick preset runs with today (its spec's `give_up`, `give_up_pace`).",
        "",
        "| sweep | probes | runs | failing | " + " | ".join(names) + " | safe | on by default |",
        "| --- | ---: | ---: | ---: | " + " | ".join("---:" for _ in names) + " | --- | --- |",
    ]
    for r in results:
        if "skipped" in r:
            cells = " | ".join("—" for _ in names)
            lines.append(f"| {r['sweep']} | — | — | — | {cells} | {r['skipped']} | {r['default']} |")
            continue
        cells = [
            f"{w['probes_changed']} / {len(w['changed'])} / {w['stopped']} / {100 * w['saved']:.0f}% / "
            f"{w['failing_end']:.2f}"
            for w in (r["rules"][n] for n in names)
        ]
        safe = safe_rule(r) or "none"
        lines.append(
            f"| {r['sweep']} | {r['probes']} | {r['runs']} | {r['failures']} | "
            + " | ".join(cells)
            + f" | {safe} | {r['default']} |"
        )
    lines.append("")
    for r in results:
        for n in names:
            for c in r.get("rules", {}).get(n, {}).get("changed", []):
                lines.append(f"- {r['sweep']}, {n}: {c}")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sweeps", default=None, help="comma-separated sweep files (default: every capacity sweep)")
    parser.add_argument(
        "--grids", default="linear;mlp:8", help="bench_protocol grids too, NAME or NAME:d,d, semicolon-separated"
    )
    parser.add_argument("--windows", default="0.25,0.5", help="windows, as shares of the step budget")
    parser.add_argument("--paces", default="1,2,4", help="paces P (give_up_pace)")
    parser.add_argument("--keep", default=None, help="keep (and reuse) the full-length runs in this folder")
    parser.add_argument("--out", default=str(HERE / "RESULTS_give_up.md"))
    args = parser.parse_args()
    rules = [(float(w), float(p)) for w in args.windows.split(",") for p in args.paces.split(",")]
    sweeps = args.sweeps.split(",") if args.sweeps else capacity_sweeps()
    keep = Path(args.keep) if args.keep else None
    results = []
    for label, spec, default in sources(sweeps, [g for g in args.grids.split(";") if g]):
        print(f"[validate] {label} ...", flush=True)
        results.append(validate(label, spec, default, rules, keep))
        print(json.dumps({k: v for k, v in results[-1].items() if k != "rules"}, default=str), flush=True)
        Path(args.out).write_text(markdown(results, rules))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
