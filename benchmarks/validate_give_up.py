"""Validation of the early-failure rule (`[train] give_up = K`) against full-length runs.

Each sweep's `quick` preset runs once with `give_up = 0` and every evaluation recorded; the rule is
then replayed on each run's recorded evaluations with the engine's own predicate
(`jaxmem.engine.program.hopeless`) for every window K. A run the rule stops before it succeeds would
change its verdict (a disagreement); a run it stops that fails anyway keeps its verdict and saves the
steps it would have run. No disagreement for a window means every search of the sweep probes the
same values and finds the same answer with the rule on (a search is a function of its verdicts).

`python benchmarks/validate_give_up.py` writes `RESULTS_give_up.md`; `--sweeps a.toml,b.toml`,
`--windows 4,8,16`.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SWEEPS = [
    "sweeps/nichani24/fig1_linear.toml",
    "sweeps/nichani24/fig1_mlp.toml",
    "sweeps/nichani24/fig6_mlp_fixed_outputs.toml",
    "sweeps/nichani24/linear_fixed_outputs.toml",
    "sweeps/nichani24/lowrank_linear.toml",
]


def full_length_spec(path: Path):
    """The sweep's quick preset with the rule off and every evaluation of every run recorded."""
    from jaxmem.spec.sweep import parse, read_toml

    raw = read_toml(path)
    quick = raw.setdefault("presets", {}).setdefault("quick", {})
    quick.setdefault("train", {})["give_up"] = 0
    quick.setdefault("engine", {}).update(record_trajectory=True, trajectory_per_decade=0)
    return parse(raw, name=path.stem, preset="quick")


def given_up_at(settings, window: int, steps: list[int], values: list[float]) -> int | None:
    """The step at which the rule (window K) stops a run with these evaluations, or None."""
    import jax.numpy as jnp

    from jaxmem.engine.program import hopeless

    rule = settings._replace(give_up=window)
    recent, best = np.zeros(window, np.float32), -np.inf
    for step, value in zip(steps, values):
        best = max(best, float(rule.toward(value)))
        n = step // rule.eval_every
        if bool(hopeless(rule, jnp.asarray(recent), jnp.int32(n), jnp.float32(best), jnp.int32(step), rule.steps)):
            return step
        recent[n % window] = best
    return None


def validate(path: Path, windows: list[int]) -> dict:
    from jaxmem.driver.settings import settings_of
    from jaxmem.driver.sweep import run_sweep
    from jaxmem.persistence.store import load_results

    spec = full_length_spec(path)
    settings = settings_of(spec)
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        run_sweep(spec, Path(tmp), quiet=True)
        wall = time.perf_counter() - start
        runs = load_results(tmp, expand=False)
        trajectories = load_results(tmp, "trajectories", expand=False)
    series = {run_id: group.sort_values("step") for run_id, group in trajectories.groupby("run_id")}
    out = {"sweep": str(path.relative_to(ROOT)), "runs": len(runs), "wall_s": wall, "windows": {}}
    total_steps = int(runs["steps_run"].sum())
    probe_of = {r.run_id: (r.point, r.seed, r.value) for r in runs.itertuples()}
    probes_won = {probe_of[r.run_id] for r in runs.itertuples() if r.success}
    for k in windows:
        changed, stopped, saved, lost = [], 0, 0, set()
        for run in runs.itertuples():
            if run.diverged or run.run_id not in series:
                continue
            points = series[run.run_id]
            values = [json.loads(m)[settings.metric] for m in points["metrics"]]
            at = given_up_at(settings, k, list(points["step"]), values)
            if at is None or at >= run.steps_run:
                continue
            stopped += 1
            saved += int(run.steps_run) - at
            if bool(run.success):
                lost.add(run.run_id)
                changed.append(f"{run.config}, value {run.value}: succeeded at step {run.steps_run}, given up at {at}")
        still_won = {probe_of[r.run_id] for r in runs.itertuples() if r.success and r.run_id not in lost}
        out["windows"][k] = {
            "stopped": stopped,
            "changed": changed,
            "probes_changed": len(probes_won - still_won),
            "saved": saved / max(total_steps, 1),
        }
    out["probes"] = len(set(probe_of.values()))
    out["failures"] = int((~runs["success"].astype(bool)).sum())
    return out


def markdown(results: list[dict], windows: list[int]) -> str:
    lines = [
        "# Early-failure rule: verdicts against full-length runs",
        "",
        "Written by `python benchmarks/validate_give_up.py`. Each sweep's `quick` preset ran once with",
        "`give_up = 0` and every evaluation recorded; the rule `give_up = K` was replayed on the recorded",
        "evaluations with the engine's own predicate. *probes changed* = probes (a value of one search, all",
        "its learning rates) whose verdict the rule flips from success to failure: each would change that",
        "search; *runs changed* = runs that succeeded at full length but that the rule stops first (a probe",
        "survives when another rate still succeeds); *stopped* = failing runs it stops early; *steps saved* =",
        "share of all the sweep's training steps it saves.",
        "",
        "| sweep | probes | runs | failing | "
        + " | ".join(f"K={k}: probes changed / runs changed / stopped / steps saved" for k in windows)
        + " |",
        "| --- | ---: | ---: | ---: | " + " | ".join("---:" for _ in windows) + " |",
    ]
    for r in results:
        cells = [
            f"{w['probes_changed']} / {len(w['changed'])} / {w['stopped']} / {100 * w['saved']:.0f}%"
            for w in (r["windows"][k] for k in windows)
        ]
        lines.append(f"| {r['sweep']} | {r['probes']} | {r['runs']} | {r['failures']} | " + " | ".join(cells) + " |")
    lines.append("")
    for r in results:
        for k in windows:
            for c in r["windows"][k]["changed"]:
                lines.append(f"- {r['sweep']}, K={k}: {c}")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sweeps", default=",".join(SWEEPS))
    parser.add_argument("--windows", default="4,8,16")
    parser.add_argument("--out", default=str(HERE / "RESULTS_give_up.md"))
    args = parser.parse_args()
    windows = [int(k) for k in args.windows.split(",")]
    results = []
    for sweep in args.sweeps.split(","):
        print(f"[validate] {sweep} ...", flush=True)
        results.append(validate(ROOT / sweep, windows))
        print(json.dumps({k: v for k, v in results[-1].items()}, default=str)[:600], flush=True)
    Path(args.out).write_text(markdown(results, windows))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
