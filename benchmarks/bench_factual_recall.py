"""Benchmark: the `quick` preset of sweeps/nichani24/fig4_tradeoff.toml (factual recall, one-layer
transformer, H × m grid) run two ways, each in its own subprocess so that its peak host memory is its own:

(a) jaxmem `run_sweep` into a temporary folder (batches sampled inside the compiled step);
(b) the authors' style (spec §4.4, §10 item 21): per run, a pool of steps × batch samples generated up
    front (one `facts.sample` per step key), then a per-step Python loop around a jitted train
    step, one set of jitted functions per distinct shape, evaluation on the fixed test set every
    `eval_every` steps and the spec's early stop.

Same runs (read from the spec, never hard-coded), same keys (the engine's run key and per-step batch
keys, so (b)'s pool holds exactly the batches (a) samples), same init / forward / loss / Adam. Reports
wall, compile and run time, the ratio (b) ÷ (a), peak host memory of each child (wait4 ru_maxrss and
VmHWM), the pool bytes (b) held, a memory-vs-steps check, and whether the two agree on success.
Writes benchmarks/RESULTS_factual_recall.md and prints it.

    python benchmarks/bench_factual_recall.py [--max-runs K] [--scale F] [--out PATH]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import pickle
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import optax

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import baselines as B  # noqa: E402
from common import cold_compiles, cpu_busy, host_memory, log, machine, run_engine  # noqa: E402

from jaxmem.experiments.nichani24 import facts as task  # noqa: E402
from jaxmem.experiments.nichani24 import factual_recall as fr  # noqa: E402
from jaxmem.experiments.registry import get as get_experiment  # noqa: E402
from jaxmem.driver.settings import settings_of  # noqa: E402
from jaxmem.engine.program import batch_key  # noqa: E402
from jaxmem.plan.runs import run_key  # noqa: E402
from jaxmem.spec.sweep import load  # noqa: E402

ROOT = HERE.parent
SPEC = ROOT / "sweeps/nichani24/fig4_tradeoff.toml"
RESULTS = HERE / "RESULTS_factual_recall.md"
POOL_CHUNK = 64  # steps of the pool sampled per call of the jitted, vmapped sampler
MiB = 2**20


# -- what is run: the spec's runs, a deterministic subset of points, a steps-scaled variant ------------
def subset(spec, exp, max_runs: int):
    """The spec restricted to at most `max_runs` runs: evenly spaced grid points, in spec order."""
    if spec.experiment != "factual_recall" or spec.search is not None:
        raise SystemExit(f"{SPEC}: expected a factual_recall sweep without a search")
    per_point = len(spec.seeds) * len(spec.train.learning_rates)
    if max_runs and len(spec.points) * per_point > max_runs:
        keep = max(1, max_runs // per_point)
        index = sorted({round(i * (len(spec.points) - 1) / max(keep - 1, 1)) for i in range(keep)})
        spec = dataclasses.replace(spec, points=tuple(spec.points[i] for i in index))
    return spec


def scaled(spec, exp, factor: float):
    """The memory check: only the cheapest run of `spec` (first seed), steps × factor, no early stop."""
    cheapest = min(spec.points, key=lambda p: exp.cost("flops_per_step", exp.effective(p)))
    train = dataclasses.replace(spec.train, steps=int(spec.train.steps * factor), early_stop=None)
    return dataclasses.replace(spec, points=(cheapest,), seeds=spec.seeds[:1], train=train)


# -- (a) jaxmem -----------------------------------------------------------------------------------------
def child_jaxmem(spec, exp) -> dict:
    a = run_engine(spec)
    per_bucket = a.runs.groupby("bucket").size().to_dict()
    buckets = []
    for row in a.compiles.itertuples():
        shape = row.shape if isinstance(row.shape, dict) else json.loads(row.shape)
        label = ", ".join(f"{k}={shape[k]}" for k in ("d", "H", "d_h", "m", "S", "R", "D", "batch") if k in shape)
        buckets.append({"label": label, "slots": int(row.slots), "runs": int(per_bucket.get(row.bucket, 0)),
                        "seconds": float(row.seconds)})  # fmt: skip
    return {
        "total_s": a.total_s,
        "run_sweep_s": a.run_sweep_s,
        "report_s": a.report_s,
        "compile_s": a.compile_s,
        "compiles": len(a.compiles),
        "buckets": buckets,
        "peak_before_report": a.peak_before_report,
        "parts": a.parts,
        "pool_bytes": 0,
        "outcomes": [
            {"run_id": r.run_id, "best": float(r.max_metric), "steps": int(r.steps_run), "diverged": bool(r.diverged)}
            for r in a.runs.itertuples()
        ],
    }


# -- (b) the authors' style: a pre-generated pool and a per-step Python loop -----------------------------
def make_loop_functions(exp, shape: dict):
    """Jitted (init, pool chunk, train step, evaluate: every metric, as the engine) of one unpadded shape."""

    def init(seed, problem_index, dyn):
        params, problem = exp.init(run_key(seed, problem_index), shape, dyn)
        return params, exp.optimizer(dyn).init(params), problem

    def pool_chunk(key, ts, facts, dyn):  # the batches of steps `ts`, from the engine's per-step keys
        def one(t):
            tokens, s, r = task.sample(batch_key(key, t), shape["batch"], shape, dyn)
            return tokens, facts[s, r]

        return jax.vmap(one)(ts)

    def pool_loss(params, problem, dyn, tokens, answers):  # factual_recall.loss on a given batch
        return jnp.mean(task.nll(fr.forward(params, problem, shape, dyn, tokens), answers))

    def step(params, opt_state, problem, dyn, tokens, answers):
        grads = jax.grad(pool_loss)(params, problem, dyn, tokens, answers)
        updates, opt_state = exp.optimizer(dyn).update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state

    return {
        "init": jax.jit(init),
        "pool": jax.jit(pool_chunk),
        "step": jax.jit(step, donate_argnums=(0, 1)),
        "evaluate": jax.jit(B.evaluation(exp, shape)),
    }


def build_pool(fns, key, facts, dyn, steps: int, shape: dict) -> tuple[np.ndarray, np.ndarray]:
    """The run's whole sample pool on the host: tokens (steps, batch, T) and answers (steps, batch), int32."""
    tokens = np.empty((steps, shape["batch"], shape["T"]), np.int32)
    answers = np.empty((steps, shape["batch"]), np.int32)
    for start in range(0, steps, POOL_CHUNK):
        x, y = fns["pool"](key, np.arange(start, start + POOL_CHUNK, dtype=np.int32), facts, dyn)
        n = min(POOL_CHUNK, steps - start)
        tokens[start : start + n], answers[start : start + n] = np.asarray(x)[:n], np.asarray(y)[:n]
    return tokens, answers


def warm_up(fns, run, dyn) -> float:
    """Seconds of the first call of each jitted function of a new shape (trace + compile + one execution)."""
    start = time.perf_counter()
    params, opt_state, problem = fns["init"](np.int32(run.seed), np.int32(run.problem_index), dyn)
    jax.block_until_ready(fns["evaluate"](params, problem, dyn))
    x, y = fns["pool"](run_key(run.seed, run.problem_index), np.arange(POOL_CHUNK, dtype=np.int32), problem["facts"],
                       dyn)  # fmt: skip
    jax.block_until_ready(fns["step"](params, opt_state, problem, dyn, x[0], y[0]))
    return time.perf_counter() - start


def child_loop(spec, exp) -> dict:
    settings = settings_of(spec)
    fns, outcomes = {}, []
    compile_s = pool_s = 0.0
    pool_bytes = 0
    start = time.perf_counter()
    for run in B.runs_from_spec(spec, exp):
        shape, shape_key, dyn = B.unpadded(exp, run)
        dyn = jax.device_put(dyn)
        if shape_key not in fns:
            fns[shape_key] = make_loop_functions(exp, shape)
            compile_s += warm_up(fns[shape_key], run, dyn)
        f = fns[shape_key]
        params, opt_state, problem = f["init"](np.int32(run.seed), np.int32(run.problem_index), dyn)
        t = time.perf_counter()
        tokens, answers = build_pool(f, run_key(run.seed, run.problem_index), problem["facts"], dyn, settings.steps,
                                     shape)  # fmt: skip
        pool_s += time.perf_counter() - t
        pool_bytes = max(pool_bytes, tokens.nbytes + answers.nbytes)
        best = final = float(jax.device_get(f["evaluate"](params, problem, dyn))[settings.metric])
        steps = 0
        for i in range(settings.steps):
            if best >= settings.stop_threshold:
                break
            params, opt_state = f["step"](params, opt_state, problem, dyn, tokens[i], answers[i])
            steps += 1
            if steps % settings.eval_every == 0:
                final = float(jax.device_get(f["evaluate"](params, problem, dyn))[settings.metric])
                best = max(best, final)
        del tokens, answers
        outcomes.append({"run_id": run.run_id, "best": best, "steps": steps, "final": final})
    return {
        "total_s": time.perf_counter() - start,
        "compile_s": compile_s,
        "compiles": 4 * len(fns),
        "shapes": len(fns),
        "pool_s": pool_s,
        "pool_bytes": pool_bytes,
        "outcomes": outcomes,
    }


def child(args) -> None:
    spec = pickle.loads(Path(args.spec).read_bytes())  # the parent's spec: the tree may change meanwhile
    exp = get_experiment(spec.experiment)
    jnp.zeros(1).block_until_ready()  # the runtime is up: memory from here on is the method's
    before = host_memory()["VmRSS"]
    result = (child_jaxmem if args.child == "jaxmem" else child_loop)(spec, exp)
    mem = host_memory()
    result.update(rss_before=before, vmhwm=mem["VmHWM"], steps_budget=spec.train.steps)
    Path(args.result).write_text(json.dumps(result))


# -- the parent: one subprocess per measurement ----------------------------------------------------------
def spawn(method: str, spec) -> dict:
    """Run one method on `spec` in a fresh interpreter; add its wait4 peak RSS, wall, CPU and the other load."""
    with tempfile.TemporaryDirectory() as tmp:
        result, spec_file = Path(tmp) / "result.json", Path(tmp) / "spec.pickle"
        spec_file.write_bytes(pickle.dumps(spec))
        cmd = [sys.executable, __file__, "--child", method, "--spec", str(spec_file), "--result", str(result)]
        busy, start = cpu_busy(), time.perf_counter()
        proc = subprocess.Popen(cmd)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        wall, busy = time.perf_counter() - start, cpu_busy() - busy
        if proc.returncode:
            raise SystemExit(f"{method} child failed with exit code {proc.returncode}")
        out = json.loads(result.read_text())
    cpu = usage.ru_utime + usage.ru_stime
    out.update(
        maxrss=usage.ru_maxrss * 1024,  # Linux: KiB
        process_wall_s=wall,
        cpu_s=cpu,
        others_cpu=max(busy - cpu, 0.0) / (wall * os.cpu_count()),
    )
    return out


def agreement(a: dict, b: dict, thresholds: list[float]) -> dict:
    ra, rb = ({o["run_id"]: o for o in m["outcomes"]} for m in (a, b))
    common = sorted(set(ra) & set(rb))
    out = {"n": len(common), "missing": len(set(ra) ^ set(rb))}
    for t in thresholds:
        out[t] = sum((ra[r]["best"] >= t) == (rb[r]["best"] >= t) for r in common)
    out["steps"] = sum(ra[r]["steps"] == rb[r]["steps"] for r in common)
    out["max_diff"] = max((abs(ra[r]["best"] - rb[r]["best"]) for r in common), default=0.0)
    return out


def mib(n) -> str:
    return f"{n / MiB:,.0f}" if n is not None else "—"


def render(args, info, spec, full_spec, runs, a, b, scaling, command, script_s) -> str:
    settings = settings_of(spec)
    success = settings.hit_threshold
    exp = get_experiment(spec.experiment)
    thresholds = sorted({success, 0.99})
    agree = agreement(a, b, thresholds)
    total_ratio, run_ratio = b["total_s"] / a["total_s"], b["run_s"] / a["run_s"]
    fixed = {k: v for k, v in spec.points[0].items() if k not in spec.axes}
    fixed_text = ", ".join(f"{k} = {v}" for k, v in fixed.items())
    grid = ", ".join(f"{k} ∈ {sorted({p[k] for p in full_spec.points})}" for k in full_spec.axes)
    L = ["# Benchmark: fig4_tradeoff `quick` — jaxmem vs the authors' per-step loop with a sample pool\n"]
    L.append(f"Command: `{command}` (all numbers below come from this one invocation; rerun to refresh).\n")
    L.append("## Method\n")
    chosen = (
        f"a deterministic subset of **{len(runs)} of the preset's {len(full_spec.points) * len(full_spec.seeds)} "
        f"runs** (`--max-runs {args.max_runs}`: evenly spaced grid points in spec order)"
        if len(spec.points) < len(full_spec.points)
        else f"all {len(runs)} runs of the preset"
    )
    L.append(
        f"- **Work**: the `{args.preset}` preset of `sweeps/nichani24/fig4_tradeoff.toml`, read with "
        f"`jaxmem.spec.sweep.load`: grid {grid}; {chosen}. Fixed: {fixed_text}. Adam lr "
        f"{list(spec.train.learning_rates)}, seeds {list(spec.seeds)}, at most {settings.steps} steps, accuracy on the "
        f"fixed test set every {settings.eval_every} steps, early stop once the best accuracy ≥ "
        f"{settings.stop_threshold}; success = best accuracy ≥ {success} (the engine's rule for a sweep without a "
        "search).\n"
        "- **(a) jaxmem**: `jaxmem.driver.sweep.run_sweep(spec, tmpdir, quiet=True)`; batches are sampled inside the "
        "compiled step from per-step keys, nothing is pre-generated. Compile = sum of the `compiles` table. Wall "
        f"excludes the report written at the end of `run_sweep` ({a['report_s']:.1f} s; `run_sweep` in all "
        f"{a['run_sweep_s']:.1f} s); store writes and checkpoints are included.\n"
        "- **(b) authors' style** (`run.py`, spec §4.4 and §10 item 21): per run, init, then the whole pool of "
        f"steps × batch samples generated up front — one `facts.sample` per step key "
        f"`jaxmem.engine.program.batch_key(run_key, t)` (the engine's keys, so the pool holds exactly the batches "
        f"(a) samples), through a jitted sampler vmapped over {POOL_CHUNK} steps at a time, copied into host "
        "NumPy arrays — then `for t in range(steps): params, opt_state = step(params, opt_state, pool[t])` with "
        "a jitted Adam step (params and optimizer state donated) and every metric read on the host every "
        "eval_every steps. The same `init`, `forward`, cross-entropy (`factual_recall._nll`), `optimizer` and "
        "`evaluate` as (a), on the unpadded shape. Compile = the first call of each of its 4 jitted functions "
        "(init, pool sampler, step, evaluate) per distinct shape (trace + compile + one execution). Pool "
        "generation counts as run time.\n"
        "- **Separate processes**: each method runs in its own fresh interpreter, one after the other. Peak "
        "host memory = `ru_maxrss` of that child from `os.wait4` (VmHWM inside the child agrees); *RSS before* "
        "= its VmRSS after importing JAX and jaxmem and starting the runtime, before any work.\n"
        "- *Process wall* includes interpreter start-up and imports; *other processes' CPU* = CPU time of all "
        "other processes during the child (from /proc/stat) as a share of all cores: near 0% means the "
        "timings are uncontended.\n"
    )
    L.append("## Machine\n")
    L.append("| | |\n| --- | --- |")
    L.extend(f"| {k} | {v} |" for k, v in info.items())
    L.append("")
    L.append("## Results\n")
    L.append(
        "| method | programs compiled | compile s | run s (excl. compile) | wall s | wall ÷ (a) | run ÷ (a) | "
        "Σ steps | peak host memory MiB | RSS before MiB | peak − before MiB | sample pool held MiB | "
        "process wall s | process CPU s | other processes' CPU |"
    )
    L.append("| --- |" + " ---: |" * 14)
    for name, m in (("(a) jaxmem run_sweep", a), ("(b) pool + per-step Python loop", b)):
        L.append(
            f"| {name} | {m['compiles']} | {m['compile_s']:.1f} | {m['run_s']:.1f} | {m['total_s']:.1f} | "
            f"{m['total_s'] / a['total_s']:.2f} | {m['run_s'] / a['run_s']:.2f} | "
            f"{sum(o['steps'] for o in m['outcomes']):,} | {mib(m['maxrss'])} | {mib(m['rss_before'])} | "
            f"{mib(m['maxrss'] - m['rss_before'])} | {mib(m['pool_bytes'])} | {m['process_wall_s']:.1f} | "
            f"{m['cpu_s']:.0f} | {100 * m['others_cpu']:.0f}% |"
        )
    L.append("")
    L.append(
        f"(b) generated its pools in {b['pool_s']:.1f} s (part of its run time); each pool is "
        f"{b['pool_bytes']:,} bytes = steps × batch × (T + 1) × 4 B ({settings.steps} × "
        f"{fixed.get('batch', '?')} × {fixed.get('T', 32) + 1} × 4), held for the whole run. At the paper "
        "size (2^14 steps × 1024 × 33 × 4 B) one pool is "
        f"{2**14 * 1024 * 33 * 4 / 2**30:.1f} GiB. jaxmem's peak before the report was written: "
        f"{mib(a['peak_before_report'])} MiB.\n"
    )
    higher = "higher" if a["maxrss"] > b["maxrss"] else "lower"
    L.append(
        f"Peak memory at this size: jaxmem's is {higher} than the loop's ({mib(a['maxrss'])} vs "
        f"{mib(b['maxrss'])} MiB). jaxmem holds no samples: its growth over *RSS before* comes with compiling "
        "and running its programs and with the libraries of the store, checkpoints and report"
        + (", and it does not change with the steps (memory check below)" if scaling else "")
        + "; the loop's peak carries one pool per run, which grows with steps × batch.\n"
    )
    L.append("### Target\n")
    status = "met" if total_ratio >= 5 else "**not met**"
    L.append(
        f"- (a) at least 5× faster than (b) on the CPU: **{total_ratio:.2f}×** in wall time, {run_ratio:.2f}× "
        f"excluding compile: {status}.\n"
    )
    busy = [n for n, m in (("(a)", a), ("(b)", b)) if m["others_cpu"] > 0.05]
    if busy:
        L.append(
            f"**Warning: other processes used the CPU during {', '.join(busy)} (see the last column); those "
            "timings are inflated. Rerun on an idle machine.**\n"
        )
    L.append("### What limits the ratio\n")
    slots = sum(x["slots"] for x in a["buckets"])
    a_steps, b_steps = (max(sum(o["steps"] for o in m["outcomes"]), 1) for m in (a, b))
    sharing = (
        "every run has a bucket (a padded shape) of its own, so no program is shared and vmapping gains nothing"
        if len(a["buckets"]) >= len(runs)
        else f"{len(runs)} runs share {len(a['buckets'])} programs"
    )
    L.append(
        f"- Compiling: jaxmem compiled {a['compiles']} programs (one per bucket) in {a['compile_s']:.1f} s = "
        f"{100 * a['compile_s'] / a['total_s']:.0f}% of its wall; (b) compiled its {b['shapes']} shapes' 4 small "
        f"functions in {b['compile_s']:.1f} s ({100 * b['compile_s'] / b['total_s']:.0f}% of its wall). The grid "
        f"trains only {a_steps:,} run-steps in all, so on both sides compiling dominates.\n"
        f"- Sharing: jaxmem's buckets hold {slots} slots for {len(runs)} runs (occupancy ≤ "
        f"{len(runs) / max(slots, 1):.2f}; a frozen or vacant slot still computes); {sharing}.\n"
        f"- Per step: (b) costs {1e3 * (b['run_s'] - b['pool_s']) / b_steps:.2f} ms per step (pool excluded); "
        f"jaxmem {1e3 * a['run_s'] / a_steps:.2f} ms per live run-step, vacant slots and host syncs, store "
        "writes and checkpoints included. At batch 256 the loop's per-step dispatch is small next to the "
        "step's compute, so only sharing programs across runs (more live slots per compiled program, fewer "
        "compiles) can buy the 5×.\n"
    )
    if a.get("parts"):
        L.append("### Where jaxmem's wall goes (engine methods timed by wrapping)\n")
        L.append("| part | s | share of wall |")
        L.append("| --- | ---: | ---: |")
        rows = [("compile (compiles table)", a["compile_s"])] + sorted(a["parts"].items())
        rows.append(("other (runner setup besides compile, driver loop, store open, ...)",
                     a["total_s"] - sum(v for _, v in rows)))  # fmt: skip
        L.extend(f"| {k} | {v:.2f} | {100 * v / a['total_s']:.0f}% |" for k, v in rows)
        L.append("")
    L.append("### jaxmem's compiles table\n")
    L.append("| bucket (padded shape) | slots | runs | compile s |")
    L.append("| --- | ---: | ---: | ---: |")
    L.extend(f"| {x['label']} | {x['slots']} | {x['runs']} | {x['seconds']:.1f} |" for x in a["buckets"])
    L.append("")
    L.append("## Agreement\n")
    L.append(
        "| runs compared | "
        + " | ".join(f"success agrees (best ≥ {t:g})" for t in thresholds)
        + " | same steps_run | max abs Δ best accuracy |"
    )
    L.append("| ---: | " + " | ".join("---:" for _ in thresholds) + " | ---: | ---: |")
    L.append(
        f"| {agree['n']} | "
        + " | ".join(f"{agree[t]} ({100 * agree[t] / max(agree['n'], 1):.0f}%)" for t in thresholds)
        + f" | {agree['steps']} | {agree['max_diff']:.4f} |"
    )
    L.append("")
    ra, rb = ({o["run_id"]: o for o in m["outcomes"]} for m in (a, b))
    L.append("| run | " + " | ".join(spec.axes) + " | params | (a) best acc | (a) steps | (b) best acc | (b) steps |")
    L.append("| --- | " + " | ".join("---:" for _ in spec.axes) + " | ---: | ---: | ---: | ---: | ---: |")
    for r in runs:
        x, y = ra.get(r.run_id, {}), rb.get(r.run_id, {})
        L.append(
            f"| {r.run_id[:8]} | "
            + " | ".join(str(r.config[k]) for k in spec.axes)
            + f" | {exp.cost('params', exp.effective(r.config)):,.0f} | {x.get('best', float('nan')):.4f} | "
            f"{x.get('steps', '—')} | {y.get('best', float('nan')):.4f} | {y.get('steps', '—')} |"
        )
    L.append(
        "\nBoth sample the same batches from the same keys; (a) runs the model vmapped over its slots and "
        "inside a compiled loop, so float reductions can be ordered differently and a run can stop at a "
        "different evaluation.\n"
    )
    if scaling:
        L.append("## Memory against steps × batch\n")
        cfg = scaling[0]["config"]
        L.append(
            f"The cheapest run ({', '.join(f'{k} = {cfg[k]}' for k in spec.axes)}) alone, with early stopping "
            f"off, at {scaling[0]['steps_budget']:,} and {scaling[-1]['steps_budget']:,} steps; each line is its "
            "own subprocess.\n"
        )
        L.append(
            "| method | steps | Σ steps run | sample pool held MiB | peak host memory MiB | RSS before MiB | "
            "peak − before MiB | wall s |"
        )
        L.append("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
        for m in scaling:
            L.append(
                f"| {m['name']} | {m['steps_budget']:,} | {sum(o['steps'] for o in m['outcomes']):,} | "
                f"{mib(m['pool_bytes'])} | {mib(m['maxrss'])} | {mib(m['rss_before'])} | "
                f"{mib(m['maxrss'] - m['rss_before'])} | {m['total_s']:.1f} |"
            )
        ja = [m for m in scaling if m["name"].startswith("(a)")]
        lb = [m for m in scaling if m["name"].startswith("(b)")]
        if len(ja) == 2 and len(lb) == 2:
            L.append(
                f"\n{scaling[-1]['steps_budget'] // scaling[0]['steps_budget']}× the steps: jaxmem's peak changes by "
                f"{(ja[1]['maxrss'] - ja[0]['maxrss']) / MiB:+.0f} MiB, the loop's by "
                f"{(lb[1]['maxrss'] - lb[0]['maxrss']) / MiB:+.0f} MiB (its pool by "
                f"{(lb[1]['pool_bytes'] - lb[0]['pool_bytes']) / MiB:+.0f} MiB).\n"
            )
    L.append(f"Benchmark wall time (whole script, all subprocesses): {script_s:.0f} s.\n")
    return "\n".join(L)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", default="quick")
    parser.add_argument("--max-runs", type=int, default=0, help="benchmark at most K runs (evenly spaced points)")
    parser.add_argument(
        "--scale", type=float, default=4, help="memory check: the cheapest run at 1× and F× steps (0: skip)"
    )
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--child", choices=("jaxmem", "loop"), help=argparse.SUPPRESS)
    parser.add_argument("--spec", help=argparse.SUPPRESS)
    parser.add_argument("--result", help=argparse.SUPPRESS)
    args = parser.parse_args()
    cold_compiles()
    if args.child:
        return child(args)

    started = time.perf_counter()
    command = " ".join(["python benchmarks/bench_factual_recall.py", *sys.argv[1:]])
    full_spec = load(SPEC, args.preset)  # read once: other children get this very object (pickled)
    exp = get_experiment(full_spec.experiment)
    spec = subset(full_spec, exp, args.max_runs)
    runs = B.runs_from_spec(spec, exp)
    info = machine()
    log(f"{len(runs)} runs; machine: {info}")
    methods = {}
    for name, method in (("(a)", "jaxmem"), ("(b)", "loop")):
        log(f"{name} {method} ...")
        m = spawn(method, spec)
        m["run_s"] = m["total_s"] - m["compile_s"]
        methods[method] = m
        log(f"{name} wall {m['total_s']:.1f} s, compile {m['compile_s']:.1f} s, peak {mib(m['maxrss'])} MiB")
    scaling = []
    if args.scale:
        for name, method in (("(a) jaxmem", "jaxmem"), ("(b) pool + loop", "loop")):
            for scale in (1, args.scale):
                log(f"memory check: {method} at {scale:g}× steps ...")
                variant = scaled(spec, exp, scale)
                m = spawn(method, variant)
                m.update(name=name, config=variant.points[0])
                scaling.append(m)
    text = render(
        args, info, spec, full_spec, runs, methods["jaxmem"], methods["loop"], scaling, command,
        time.perf_counter() - started,
    )  # fmt: skip
    args.out.write_text(text)
    print(text)
    log(f"wrote {args.out}")


if __name__ == "__main__":
    main()
