"""Benchmark: the `quick` preset of sweeps/nichani24/fig1_mlp.toml run three ways in one process.

(a) jaxmem `run_sweep` (padded buckets of vmapped slots, one compile per bucket);
(b) one jitted `lax.while_loop` program per run, unpadded, one compile per distinct shape;
(c) a per-step Python loop around a jitted train step, host-side evaluation every `eval_every` steps.
(b) and (c) train exactly the runs that (a) executed (read back from its results table), from the
same keys, with the same optimizer and early-stop rule. Writes benchmarks/RESULTS_assoc_memory.md and prints it.

    python benchmarks/bench_assoc_memory.py [--c-every K] [--b-every K]
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import baselines as B  # noqa: E402
import common as C  # noqa: E402

import jaxmem.driver.sweep as driver  # noqa: E402
from jaxmem.driver.compiles import Programs  # noqa: E402
from jaxmem.engine.executor import BucketRunner  # noqa: E402
from jaxmem.experiments.registry import get as get_experiment  # noqa: E402
from jaxmem.persistence.store import Store  # noqa: E402
from jaxmem.plan.buckets import padded_config  # noqa: E402
from jaxmem.spec.sweep import load  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SPEC, PRESET = ROOT / "sweeps/nichani24/fig1_mlp.toml", "quick"
RESULTS = Path(__file__).resolve().parent / "RESULTS_assoc_memory.md"


# -- (a) with light instrumentation of the engine's host side (wrappers only; nothing is changed) --------
SETUP = "runner setup (compile included)"
HOST_PARTS = (
    (Programs, "new_runner", SETUP),
    (BucketRunner, "step", "segments (program + device_get + slot bookkeeping)"),
    (BucketRunner, "checkpoint", "checkpoints (orbax save, waits for the previous one)"),
    (BucketRunner, "close", "closing runners (final checkpoint waits, cleanup)"),
    (Store, "add_runs", "store writes (SQLite, FULL sync)"),
    (driver.Sweep, "refresh", "search replay (Sweep.refresh)"),
)


class EngineProbe:
    """Records each bucket's slots, compile time, segments (blocks run) and segment seconds by wrapping
    `BucketRunner.__init__` and `.step`."""

    def __init__(self):
        self.buckets: dict[str, dict] = {}

    def _init(self, original):
        buckets = self.buckets

        def init(runner, *args, **kwargs):
            original(runner, *args, **kwargs)
            program = runner.program
            record = buckets.setdefault(
                runner.bucket.id,
                {"bucket": runner.bucket, "slots": runner.n_slots, "compile_s": program.seconds, "segments": [],
                 "step_s": 0.0},
            )  # fmt: skip

            def program_probe(*args):  # out[1] = blocks run in this segment (read after the sweep)
                out = program.run(*args)
                record["segments"].append(out[1])
                return out

            runner.program = dataclasses.replace(program, run=program_probe)

        return init

    def _step(self, original):
        buckets = self.buckets

        def step(runner):
            t = time.perf_counter()
            out = original(runner)
            buckets[runner.bucket.id]["step_s"] += time.perf_counter() - t
            return out

        return step

    def __enter__(self):
        self._stack = contextlib.ExitStack()
        self._stack.enter_context(C.patched(BucketRunner, "__init__", self._init))
        self._stack.enter_context(C.patched(BucketRunner, "step", self._step))
        return self

    def __exit__(self, *exc):
        self._stack.close()


def run_jaxmem(spec) -> dict:
    with EngineProbe() as probe:
        a = C.run_engine(spec, parts=HOST_PARTS)
    return {
        "runs": a.runs,
        "compile_s": a.compile_s,
        "compiles": len(a.compiles),
        "run_sweep_s": a.run_sweep_s,
        "report_s": a.report_s,
        "total_s": a.total_s,
        "parts": a.parts,
        "probe": probe,
    }


# -- analysis ------------------------------------------------------------------------------------------
def bucket_rows(exp, spec, runs, run_specs: list[B.RunSpec], probe: EngineProbe) -> list[dict]:
    """Per bucket: slots, segments, live vs executed slot-steps, shape padding, useful/executed FLOPs."""
    configs = {r.run_id: r.config for r in run_specs}
    rows = []
    for bucket_id, b in probe.buckets.items():
        mine = runs[runs.bucket == bucket_id]
        if not b["segments"] or mine.empty:
            continue
        blocks = sum(int(n) for n in b["segments"])
        slot_steps = blocks * spec.train.eval_every * b["slots"]
        live_steps = int(mine.steps_run.sum())
        padded_flops = exp.cost("flops_per_step", padded_config(exp, b["bucket"], configs[mine.run_id.iloc[0]]))
        useful = B.useful_gflop(exp, run_specs, dict(zip(mine.run_id, mine.steps_run)))
        executed = padded_flops * slot_steps / 1e9
        shape_waste = padded_flops * live_steps / 1e9 / useful if useful else float("nan")
        rows.append(
            {
                "bucket": bucket_id,
                "label": _short_label(b["bucket"].shape_dict),
                "slots": b["slots"],
                "runs": len(mine),
                "segments": len(b["segments"]),
                "blocks": blocks,
                "live_steps": live_steps,
                "slot_steps": slot_steps,
                "occupancy": live_steps / slot_steps if slot_steps else float("nan"),
                "shape_waste": shape_waste,
                "useful_gflop": useful,
                "executed_gflop": executed,
                "compile_s": b["compile_s"],
                "seconds": b["step_s"],
            }
        )
    return sorted(rows, key=lambda r: -r["seconds"])


def _short_label(shape: dict) -> str:
    return f"d={shape['d']} m={shape['m']} N={shape['N']} M={shape['M']}"


def agreement(runs, outcomes: list[B.Outcome], succeeded) -> dict:
    """How a baseline's `outcomes` agree with (a)'s `runs` table; `succeeded(outcome)` is the sweep's rule."""
    ref = runs.set_index("run_id")
    success = [(bool(ref.loc[o.run_id, "success"]), succeeded(o)) for o in outcomes]
    same_steps = sum(int(ref.loc[o.run_id, "steps_run"]) == o.steps for o in outcomes)
    diff = [abs(float(ref.loc[o.run_id, "max_metric"]) - o.best) for o in outcomes]
    return {
        "n": len(outcomes),
        "success_agree": sum(a == b for a, b in success),
        "steps_agree": same_steps,
        "flips_a_only": sum(a and not b for a, b in success),
        "flips_other_only": sum(b and not a for a, b in success),
        "max_metric_exact": sum(d == 0.0 for d in diff),
        "max_abs_diff": max(diff) if diff else 0.0,
    }


# -- report ------------------------------------------------------------------------------------------------
def verdict(methods, peak) -> list[str]:
    """The issue's targets checked against this run: (a) >= 5x faster than (c), and faster than (b)."""
    a, b, c = methods
    total_c, total_b = c["total_s"] / a["total_s"], b["total_s"] / a["total_s"]
    run_c, run_b = c["run_s"] / a["run_s"], b["run_s"] / a["run_s"]
    status = lambda ok: "met" if ok else "**not met**"  # noqa: E731
    return [
        "### Targets\n",
        f"- (a) at least 5× faster than (c): {total_c:.2f}× in total, {run_c:.2f}× excluding compile: "
        f"{status(total_c >= 5)}.",
        f"- (a) faster than (b): {total_b:.2f}× in total ({status(total_b > 1)}), {run_b:.2f}× excluding "
        f"compile ({status(run_b > 1)}).",
        f"- Utilisation of (a): {a['gflops']:.1f} GFLOP/s of useful work = {100 * a['gflops'] / peak:.1f}% of the "
        "measured matmul peak; the bucket table below shows the executed (padded) rate.",
        f"- Compiles of (a): {a['compiles']}, one per bucket; none during segments or across search rounds "
        "(`tests/test_end_to_end.py::test_one_compile_per_bucket_and_none_while_running`).\n",
    ]


def render(info, spec, peak, a, methods, agree, buckets, every) -> str:
    L = []
    L.append("# Benchmark: fig1_mlp `quick` preset — jaxmem vs per-run jit vs per-step Python loop\n")
    L.append(
        "Written by `python benchmarks/bench_assoc_memory.py` (all numbers below come from one process "
        "run on one machine; rerun to refresh).\n"
    )
    L.append("## Method\n")
    L.append(
        f"- **Work**: the `{PRESET}` preset of `sweeps/nichani24/fig1_mlp.toml` (MLP associative memory, "
        f"M = N, Adam, {spec.train.steps} steps max, eval every {spec.train.eval_every}, early stop at "
        f"accuracy ≥ {spec.train.early_stop}, lr ∈ {list(spec.train.learning_rates)}, seeds "
        f"{list(spec.seeds)}, a {spec.search.probes}-probe search over N per (d, m, seed)). "
        "The set of runs is whatever (a) "
        f"executed ({a['n_runs']} runs over {a['n_shapes']} distinct unpadded (d, m, N) shapes); (b) and "
        "(c) train exactly those runs.\n"
        "- **(a) jaxmem**: `run_sweep(load(spec, 'quick'), tmpdir, quiet=True)`. Compile = sum of the "
        "`compiles` table (AOT `lower().compile()` per bucket). Total excludes the report writing at the "
        f"end of `run_sweep` (plots, report.md: {a['report_s']:.1f} s; with it `run_sweep` took "
        f"{a['run_sweep_s']:.1f} s). The host side is timed by wrapping engine methods (no engine code "
        "changed).\n"
        "- **(b) per-run jit**: for each run one jitted program `while (not stopped) { fori_loop(eval_every "
        "train steps); evaluate }` on the unpadded model (`static_shape(exp, config, unpadded)`); dyn "
        "(sizes, lr) and the key are traced, so it compiles once per distinct shape (AOT "
        "`lower().compile()`, timed apart).\n"
        "- **(c) per-step Python loop**: jitted init / train step (params and optimizer state donated) / "
        "evaluate per shape; `for step in range(steps): params, opt_state = step_fn(...)`, with every "
        "metric read on the host every eval_every steps. Compile = first call of the three functions "
        "per shape (trace + compile + one execution).\n"
        "- **Same runs, same numbers**: keys are the engine's own `run_key(seed, problem_index)`, "
        "problem_index recomputed with `jaxmem.plan.runs.make_run` (its run_id is checked against the stored "
        "one); same `exp.init`, `exp.loss`, `exp.optimizer`, `exp.evaluate`; same stop rule (evaluate at "
        "step 0 and every eval_every steps, stop once best accuracy ≥ threshold or at `steps`). "
        "Baselines have no divergence guard (the engine's per-step NaN check and freeze); no run "
        "diverged.\n"
        "- **GFLOP/s** = Σ over runs of `exp.cost('flops_per_step', exp.effective(config)) × steps_run` "
        "(each method's own steps_run, true unpadded sizes: useful work only) / wall time excluding compile. "
        "**Peak** = best of 10 jitted 2048×2048 float32 matmuls through JAX.\n"
    )
    for name, k in (("(b)", every["b"]), ("(c)", every["c"])):
        if k > 1:
            L.append(
                f"- **{name} ran on a subset**: every {k}-th run (sorted by run_id). Its run time is "
                "scaled by useful FLOPs (full set / subset) and its compile time by distinct shapes "
                "(full set / subset); agreement is over the subset only.\n"
            )
    L.append("\n## Machine\n")
    L.append("| | |\n| --- | --- |")
    for k, v in info.items():
        L.append(f"| {k} | {v} |")
    L.append(f"| f32 matmul peak (2048², jitted, best of 10) | {peak:.1f} GFLOP/s |\n")
    L.append("## Results\n")
    L.append(
        "| method | programs compiled | compile s | run s (excl. compile) | total s | total ÷ (a) | "
        "run ÷ (a) | Σ steps | useful GFLOP/s | % of peak | process CPU s | other processes' CPU |"
    )
    L.append("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    base = methods[0]
    for m in methods:
        L.append(
            f"| {m['name']} | {m['compiles']} | {m['compile_s']:.1f} | {m['run_s']:.1f} | {m['total_s']:.1f} | "
            f"{m['total_s'] / base['total_s']:.2f} | {m['run_s'] / base['run_s']:.2f} | {m['steps']:,} | "
            f"{m['gflops']:.1f} | {100 * m['gflops'] / peak:.1f} | {m['cpu_s']:.0f} | "
            f"{100 * m['others_cpu']:.0f}% |"
        )
    L.append("")
    L.append(
        "(c) compiles three small functions (init, step, evaluate) per shape; the count is shapes. "
        "*Process CPU s* = user + system CPU time of this process during the phase (all threads; less "
        "sensitive to other load than wall time, but it counts XLA's thread-pool spinning). "
        "*Other processes' CPU* = CPU time of every other process during that phase (from /proc/stat) as a "
        "share of all cores: near 0% means the timings are uncontended.\n"
    )
    L.extend(verdict(methods, peak))
    busy = [m["name"] for m in methods if m["others_cpu"] > 0.05]
    if busy:
        L.append(
            f"**Warning: the machine was busy during {', '.join(busy)}; those timings are inflated. "
            "Rerun on an idle machine.**\n"
        )
    L.append("## Agreement with (a)\n")
    L.append(
        "| method | runs compared | success agrees | flips (a ✓, other ✗) | flips (a ✗, other ✓) | "
        "same steps_run | max_metric bit-equal | max abs Δ max_metric |"
    )
    L.append("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for name, g in agree.items():
        L.append(
            f"| {name} | {g['n']} | {g['success_agree']} ({100 * g['success_agree'] / g['n']:.1f}%) | "
            f"{g['flips_a_only']} | {g['flips_other_only']} | {g['steps_agree']} | {g['max_metric_exact']} | "
            f"{g['max_abs_diff']:.4f} |"
        )
    L.append(
        "\nDifferences come from float reduction order: the engine's padded matmuls (N, M, d, m padded "
        "up the ladder, zeros in the padding) sum in another order than the unpadded ones, and a run near "
        "the 0.99 threshold can land on either side. (b) and (c) run the same unpadded XLA computations.\n"
    )
    L.append("## Where jaxmem's time goes (host side, wrapped methods)\n")
    L.append("| part | seconds | share of run_sweep |")
    L.append("| --- | ---: | ---: |")
    named = dict(a["parts"])
    setup = named.pop(SETUP, 0.0)
    rows = [("compile (compiles table)", a["compile_s"]), ("runner setup besides compile", setup - a["compile_s"])]
    rows += list(named.items()) + [("report writing (plots, report.md)", a["report_s"])]
    accounted = sum(s for _, s in rows)
    rows.append(("other (driver loop, spec, store open, ...)", a["run_sweep_s"] - accounted))
    for part, s in rows:
        L.append(f"| {part} | {s:.2f} | {100 * s / a['run_sweep_s']:.1f}% |")
    L.append(f"| **run_sweep total** | {a['run_sweep_s']:.2f} | 100% |\n")
    L.append("## jaxmem buckets\n")
    L.append(
        "`slot-steps` = blocks × eval_every × slots (every slot computes, live or not); `occupancy` = live "
        "run-steps / slot-steps; `shape waste` = padded ÷ true FLOPs per live step (steps-weighted); "
        "useful work = true FLOPs of live steps; executed = padded FLOPs of all slot-steps.\n"
    )
    L.append(
        "| bucket (padded) | slots | runs | segments | live steps | slot-steps | occupancy | shape waste | "
        "useful GFLOP | executed GFLOP | useful ÷ executed | compile s | segment s | useful GFLOP/s | "
        "executed GFLOP/s |"
    )
    L.append(
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
    )
    for r in buckets:
        L.append(
            f"| {r['label']} | {r['slots']} | {r['runs']} | {r['segments']} | {r['live_steps']:,} | "
            f"{r['slot_steps']:,} | {r['occupancy']:.2f} | {r['shape_waste']:.2f} | {r['useful_gflop']:.1f} | "
            f"{r['executed_gflop']:.1f} | {r['useful_gflop'] / r['executed_gflop']:.2f} | {r['compile_s']:.2f} | "
            f"{r['seconds']:.2f} | {r['useful_gflop'] / r['seconds']:.1f} | "
            f"{r['executed_gflop'] / r['seconds']:.1f} |"
        )
    if not buckets:
        L.append("(no bucket data: the engine's BucketRunner no longer exposes `program`)\n")
        return "\n".join(L)
    tot_u = sum(r["useful_gflop"] for r in buckets)
    tot_e = sum(r["executed_gflop"] for r in buckets)
    tot_s = sum(r["seconds"] for r in buckets)
    L.append(
        f"| **all** | | {sum(r['runs'] for r in buckets)} | {sum(r['segments'] for r in buckets)} | "
        f"{sum(r['live_steps'] for r in buckets):,} | {sum(r['slot_steps'] for r in buckets):,} | "
        f"{sum(r['live_steps'] for r in buckets) / max(sum(r['slot_steps'] for r in buckets), 1):.2f} | | "
        f"{tot_u:.1f} | {tot_e:.1f} | {tot_u / tot_e:.2f} | {sum(r['compile_s'] for r in buckets):.1f} | "
        f"{tot_s:.1f} | {tot_u / tot_s:.1f} | {tot_e / tot_s:.1f} |\n"
    )
    return "\n".join(L)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--b-every", type=int, default=1, help="run (b) on every k-th run only, and scale")
    parser.add_argument("--c-every", type=int, default=1, help="run (c) on every k-th run only, and scale")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    started = time.perf_counter()
    C.cold_compiles()

    spec = load(SPEC, PRESET)
    exp = get_experiment(spec.experiment)
    settings = driver.settings_of(spec)
    info = C.machine()
    C.log(f"machine: {info}")
    with C.CpuShare() as cpu:
        peak = B.matmul_peak()
    info["other processes' CPU during the peak measurement"] = f"{100 * cpu.share:.0f}%"
    C.log(f"f32 matmul peak {peak:.1f} GFLOP/s")

    C.log("(a) jaxmem run_sweep ...")
    with C.CpuShare() as cpu:
        a = run_jaxmem(spec)
    a["others_cpu"], a["cpu_s"] = cpu.share, cpu.mine_s
    runs = a["runs"]
    assert not runs.diverged.any(), "a run diverged; the baselines have no divergence guard"
    run_specs = B.runs_from_table(spec, exp, runs)
    a["n_runs"] = len(run_specs)
    a["n_shapes"] = len({B.unpadded(exp, r)[1] for r in run_specs})
    a_steps = dict(zip(runs.run_id, runs.steps_run.astype(int)))
    a["gflop"] = B.useful_gflop(exp, run_specs, a_steps)
    C.log(
        f"(a) {a['total_s']:.1f} s ({a['compiles']} compiles, {a['compile_s']:.1f} s), {len(runs)} runs, "
        f"{a['n_shapes']} shapes"
    )

    methods = [
        {
            "name": "(a) jaxmem run_sweep",
            "compiles": a["compiles"],
            "compile_s": a["compile_s"],
            "total_s": a["total_s"],
            "run_s": a["total_s"] - a["compile_s"],
            "steps": sum(a_steps.values()),
            "gflops": a["gflop"] / (a["total_s"] - a["compile_s"]),
            "others_cpu": a["others_cpu"],
            "cpu_s": a["cpu_s"],
        }
    ]
    agree = {}
    for label, name, fn, k in (
        ("(b)", "(b) per-run jit while_loop", B.run_while_loops, args.b_every),
        ("(c)", "(c) per-step Python loop", B.run_python_loops, args.c_every),
    ):
        subset = run_specs[::k]
        C.log(f"{label} {len(subset)} runs ...")
        with C.CpuShare() as cpu:
            outcomes, timing = fn(exp, subset, settings)
        steps = {o.run_id: o.steps for o in outcomes}
        gflop = B.useful_gflop(exp, run_specs, steps)
        run_s, compile_s, compiles = timing.run_s, timing.compile_s, timing.compiles
        scale = 1.0  # CPU seconds scale like the wall time
        if k > 1:  # scale to the full set
            run_s *= a["gflop"] / B.useful_gflop(exp, run_specs, {r: a_steps[r] for r in steps})
            compile_s *= a["n_shapes"] / compiles
            compiles = a["n_shapes"]
            scale = (run_s + compile_s) / timing.total_s
        methods.append(
            {
                "name": name + (f" (every {k}-th run, scaled)" if k > 1 else ""),
                "compiles": compiles,
                "compile_s": compile_s,
                "run_s": run_s,
                "total_s": run_s + compile_s,
                "steps": sum(steps.values()),
                "gflops": gflop / timing.run_s,
                "others_cpu": cpu.share,
                "cpu_s": cpu.mine_s * scale,
            }
        )
        agree[name] = agreement(runs, outcomes, lambda o: driver.succeeded(spec.success, settings, o))
        C.log(f"{label} {timing.total_s:.1f} s ({compiles} compiles, {timing.compile_s:.1f} s)")

    buckets = bucket_rows(exp, spec, runs, run_specs, a["probe"])
    text = render(info, spec, peak, a, methods, agree, buckets, {"b": args.b_every, "c": args.c_every})
    text += f"\nBenchmark wall time (whole script): {time.perf_counter() - started:.0f} s.\n"
    args.out.write_text(text)
    print(text)
    C.log(f"wrote {args.out}")


if __name__ == "__main__":
    main()
