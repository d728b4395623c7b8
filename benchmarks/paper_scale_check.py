"""The paper-scale check: one command that measures, within 9 minutes on one H100 or H200, what the
"paper scale" issue asks, and writes `RESULTS_paper_scale_gpu.md` naming the device. The device call:

    PYTHONUNBUFFERED=1 PYTHONPATH=. python3 benchmarks/paper_scale_check.py --out $OUT/RESULTS_paper_scale_gpu.md

Every case runs in its own child process (cold compile caches) under a timeout from one budget, with
the machinery of `gpu_check.py` (its records, peaks and program timing), in this order:

1. `peaks`: the device's f32 matmul FLOP/s at JAX's default precision (TF32 on recent GPUs) and at
   'highest', and its copy bandwidth (`gpu_check.peaks_case`);
2. `bucket/<name>`: the bucket the planner builds on this device for one paper point of a Fig 1 preset
   `paper` (`Layout.bucket_for`, slots from `Layout.slots_for`: what `jaxmem run --dry-run` prints), its
   program compiled with every slot a live run that never stops, timed over whole segments; FLOP/s from
   the true sizes (`exp.cost("flops_per_step", config)`) against the peak at the sweep's precision.
   The points: fig1_linear d = 256, N = 16384 (inside [d, d²/2] and an exact value of the padding ladder,
   so its program computes the true sizes; the authors' guide d² = 1.3 N ln N puts the capacity near
   6,000, and the first round also probes d²/2 = 32768, a larger bucket not measured here), and fig1_mlp
   d = 90, m = 720 at N = 64800 = m·d (the search's upper end, probed in the first round: the preset's
   largest bucket, padded to d = 128, m = 1024, N = 65536, where the planner picks the blocked loss) and
   at N = 32768 (dense loss; reported only). Evaluation every 32 steps (the linear preset's; the MLP
   preset's 256 would make one timed block last tens of seconds);
3. `sweep/quick` and `sweep/paper-d128`: fig1_linear's quick preset and its paper preset at d ≤ 128 (all
   5 seeds, both rates) run to the end with `run_sweep`, after the planner's estimate for this device
   (`planner.plan` and `jaxmem.cli.views.dry_run`'s totals): capacities compared at the shared d, the
   measured sweep time against the estimate. The paper sweep runs last, under all the time left (about
   5.5 minutes if the cases before it take their expected ~3); `--cases sweep/quick,sweep/paper-d128`
   gives it the whole budget.

Each case appends one JSON line to `<out>.jsonl`; the Markdown is rewritten after every case. `--smoke`
runs tiny versions on a CPU in about two minutes, to a temporary file marked "CPU SMOKE RUN": never
commit it as GPU results.

    python benchmarks/paper_scale_check.py [--smoke] [--out PATH.md] [--cases peaks,sweep/quick] [--budget S]
    python benchmarks/paper_scale_check.py --render PATH.jsonl --out PATH.md
"""

from __future__ import annotations

import dataclasses
import json
import math
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import gpu_check as gc  # noqa: E402  (no JAX in the parent)

ROOT = HERE.parent
LINEAR, MLP = "sweeps/nichani24/fig1_linear.toml", "sweeps/nichani24/fig1_mlp.toml"
RESULTS = HERE / "RESULTS_paper_scale_gpu.md"
SMOKE_RESULTS = Path(tempfile.gettempdir()) / "jaxmem_paper_scale_smoke" / "RESULTS_paper_scale_gpu.md"
FLOPS_TARGET = 0.50  # a paper bucket's useful FLOP/s ÷ the matmul peak at its precision
CAPACITY_TOLERANCE = 0.05  # paper's median capacity at a d against the quick preset's
ESTIMATE_FACTOR = 1.5  # measured sweep time within [estimate / this, estimate × this]
D128 = "grid.d=[8,11,16,22,32,45,64,90,128]"
TF32 = 'engine.matmul_precision="tf32"'
DRY_RUN_TOTALS = ("first round:", "whole sweep", "sized for", "NOT sized")


@dataclasses.dataclass(frozen=True)
class BucketCase:
    """One paper point's bucket: `point` picks the grid point of `spec` (with `sets`), `N` the searched value."""

    name: str
    spec: str
    point: dict
    N: int
    sets: tuple[str, ...] = ()
    eval_every: int = 32
    acceptance: bool = True  # judged against FLOPS_TARGET (else reported only)

    @property
    def case(self) -> str:
        return f"bucket/{self.name}"

    @property
    def precision(self) -> str:
        return "tf32" if TF32 in self.sets else "highest"


@dataclasses.dataclass(frozen=True)
class SweepCase:
    name: str
    spec: str
    preset: str
    sets: tuple[str, ...] = ()

    @property
    def case(self) -> str:
        return f"sweep/{self.name}"


@dataclasses.dataclass(frozen=True)
class Mode:
    name: str
    peaks: gc.Mode  # the matmul and copy sizes of `gc.peaks_case`
    buckets: tuple[BucketCase, ...]
    sweeps: tuple[SweepCase, ...]  # (quick, paper): compared
    order: tuple[str, ...]
    segment_s: float
    budget_s: float
    caps: dict

    def cases(self) -> list[str]:
        return list(self.order)

    def bucket(self, case: str) -> BucketCase:
        return next(b for b in self.buckets if b.case == case)

    def sweep(self, case: str) -> SweepCase:
        return next(s for s in self.sweeps if s.case == case)


def _buckets(linear: dict, mlp: dict, mlp_mid: int, eval_every: int = 32) -> tuple:
    """The cases at one linear point and one MLP point (each dict: its point, N and --set overrides)."""
    lin = dict(spec=LINEAR, sets=linear.get("sets", ()), eval_every=eval_every)
    ml = dict(spec=MLP, sets=mlp.get("sets", ()), eval_every=eval_every)
    return (
        BucketCase("fig1_linear", point={"d": linear["d"]}, N=linear["N"], **lin),
        BucketCase("fig1_mlp", point=mlp["point"], N=mlp["N"], **ml),
        BucketCase("fig1_linear-tf32", point={"d": linear["d"]}, N=linear["N"], **tf32(lin)),
        BucketCase("fig1_mlp-tf32", point=mlp["point"], N=mlp["N"], **tf32(ml)),
        BucketCase(f"fig1_mlp-N{mlp_mid}", point=mlp["point"], N=mlp_mid, acceptance=False, **ml),
    )


def tf32(case: dict) -> dict:
    return {**case, "sets": (*case["sets"], TF32)}


ORDER = ("peaks", "bucket/fig1_linear", "bucket/fig1_mlp", "bucket/fig1_linear-tf32", "bucket/fig1_mlp-tf32")
LAST = ("sweep/quick", "sweep/paper-d128")  # the paper sweep last, under the time left (no cap of its own)

FULL = Mode(
    name="full",
    peaks=gc.FULL,
    buckets=_buckets({"d": 256, "N": 16384}, {"point": {"d": 90, "m_over_d": 8}, "N": 64800}, 32768),
    sweeps=(SweepCase("quick", LINEAR, "quick"), SweepCase("paper-d128", LINEAR, "paper", (D128,))),
    order=(*ORDER, "bucket/fig1_mlp-N32768", *LAST),
    segment_s=1.5,
    budget_s=520.0,  # 8 min 40 s: the call's 9 minutes less the parent's own work
    caps={"peaks": 60, "bucket": 75, "bucket/fig1_mlp": 100, "bucket/fig1_mlp-tf32": 90, "sweep/quick": 90},
)

SMALL = ("grid.d=[8,11]", "train.steps=256", "train.eval_every=16")
SMOKE = Mode(
    name="smoke",
    peaks=gc.SMOKE,
    buckets=_buckets(
        {"d": 8, "N": 32, "sets": ("grid.d=[8]",)},
        {"point": {"d": 8, "m_over_d": 2}, "N": 128, "sets": ("grid.d=[8]", "grid.m_over_d=[2]")},
        64,
        eval_every=16,
    ),
    sweeps=(SweepCase("quick", LINEAR, "quick", SMALL), SweepCase("paper-d128", LINEAR, "paper", SMALL)),
    order=(*ORDER, "bucket/fig1_mlp-N64", *LAST),
    segment_s=0.2,
    budget_s=400.0,
    caps={"peaks": 60, "bucket": 60, "sweep/quick": 120},
)
MODES = {"full": FULL, "smoke": SMOKE}


def case_cap(case: str, mode: Mode) -> float:
    return mode.caps.get(case, mode.caps["bucket"] if case.startswith("bucket/") else mode.budget_s)


# -- children: one case each ------------------------------------------------------------------------------
def planned_bucket(case: BucketCase, target) -> tuple:
    """(spec, experiment, layout, config, bucket) of the case's paper point as the driver lays it out on
    `target` (a `plan.target.Target`: this process's devices, or `plan.target.named("h100")` to look)."""
    from jaxmem.cli.views import load_spec
    from jaxmem.engine import device_memory
    from jaxmem.experiments.registry import get
    from jaxmem.plan import planner
    from jaxmem.plan.layout import Layout

    spec = load_spec(str(ROOT / case.spec), "paper", list(case.sets))
    exp = get(spec.experiment)
    plan = planner.plan(spec, exp, target)
    budget = device_memory.budget(target.memory_bytes, device_memory.DEFAULT_CAP)
    layout = Layout(spec, exp, plan.knobs, target.platform, target.count, budget)
    point = next(p for p in spec.points if all(p.get(k) == v for k, v in case.point.items()))
    config = exp.complete({**point, spec.search.variable: case.N})
    return spec, exp, layout, config, layout.bucket_for(config)


def bucket_case(case: BucketCase, mode: Mode) -> dict:
    """The planner's bucket and slots for the case's point on this device, timed (or why it ran out of memory)."""
    import jax

    from jaxmem.driver.settings import settings_of
    from jaxmem.driver.sweep import precision
    from jaxmem.engine import device_memory
    from jaxmem.plan.runs import make_run

    spec, exp, layout, config, bucket = planned_bucket(case, device_memory.target_of(jax.local_devices()))
    slots = layout.slots_for(bucket, config) // layout.devices
    out = {
        "config": {k: v for k, v in exp.effective(config).items() if k in ("d", "m", "N", "M") and v},
        "bucket": dict(bucket.shape_dict),
        "precision": spec.engine.matmul_precision,
        "eval_every": case.eval_every,
        "flops_per_step": exp.cost("flops_per_step", exp.effective(config)),
        "padded_flops_per_step": layout.padded_flops(bucket, config),
        "slots": slots,
    }
    settings = settings_of(spec)._replace(
        steps=gc.STEP_BUDGET, eval_every=case.eval_every, stop_threshold=math.inf, eval_steps=()
    )  # never stops early
    lr = spec.train.learning_rates[0]
    runs = [make_run(config, seed, lr, None, None, 0, exp.same_problem_across) for seed in range(slots)]
    try:
        with precision(spec.train.precision):
            out.update(gc.time_program(exp, bucket, settings, runs, mode.segment_s))
    except Exception as err:  # noqa: BLE001  (out of memory is a result; anything else is an error)
        if not device_memory.is_out_of_memory(err):
            raise
        out["oom"] = str(err).splitlines()[0][:200]
    return out


def sweep_case(case: SweepCase):
    """The planner's estimate for this device (yielded first: a run cut short keeps it), then the sweep run
    to the end: its time and capacities."""
    import jax

    from jaxmem.cli.views import dry_run, load_spec
    from jaxmem.driver.sweep import run_sweep
    from jaxmem.engine import device_memory
    from jaxmem.experiments.registry import get
    from jaxmem.persistence.store import load_results
    from jaxmem.plan import planner

    spec = load_spec(str(ROOT / case.spec), case.preset, list(case.sets))
    plan = planner.plan(spec, get(spec.experiment), device_memory.target_of(jax.local_devices()))
    totals = [x.strip() for x in dry_run(spec).splitlines() if x.strip().startswith(DRY_RUN_TOTALS) and "FLOPs" in x]
    out = {
        "sets": list(case.sets),
        "seeds": list(spec.seeds),
        "learning_rates": list(spec.train.learning_rates),
        "estimate_s": plan.estimate.seconds,
        "plan": plan.describe(),
        "dry_run_totals": totals,
    }
    yield out
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        run_sweep(spec, Path(tmp) / "out", quiet=True)
        out["sweep_s"] = time.perf_counter() - start
        searches = load_results(Path(tmp) / "out", "searches")
        out["runs"] = len(load_results(Path(tmp) / "out"))
    out["capacity"] = {}
    for row in searches.itertuples():
        out["capacity"].setdefault(str(int(row.d)), []).append(float(row.capacity))
    yield out


def child(case: str, mode: Mode) -> None:
    import common

    common.cold_compiles()
    start = time.perf_counter()
    if case == "peaks":
        results = [gc.peaks_case(mode.peaks)]
    elif case.startswith("bucket/"):
        results = [bucket_case(mode.bucket(case), mode)]
    else:
        results = sweep_case(mode.sweep(case))
    for out in results:  # the parent keeps the last line printed
        out = {**out, "wall_s": time.perf_counter() - start, "device": gc.device_info()}
        print("RESULT " + json.dumps(out), flush=True)


# -- verdicts (pure: from the records alone) ---------------------------------------------------------------
def peak_for(peaks: dict | None, precision: str) -> float | None:
    """The measured matmul peak a bucket at `precision` is judged against: 'highest' or JAX's default (TF32)."""
    if peaks is None:
        return None
    return peaks["matmul_flops_highest"] if precision == "highest" else peaks["matmul_flops"]


def achieved(bucket: dict, peaks: dict | None) -> tuple[float | None, float | None]:
    """Useful FLOP/s (true sizes × slots ÷ seconds per step) and its share of the peak; None where untimed."""
    if "step_s" not in bucket:
        return None, None
    flops = bucket["flops_per_step"] * bucket["slots"] / bucket["step_s"]
    peak = peak_for(peaks, bucket["precision"])
    return flops, (flops / peak if peak else None)


def flops_verdict(record: dict | None, peaks: dict | None) -> tuple[str, str]:
    if not record or record.get("status") == "skipped":
        return "not run", ""
    bucket = record.get("result")
    if bucket is None:
        return ("undecided (timed out)", "") if record.get("status") == "timeout" else ("FAIL", "error")
    if "oom" in bucket:
        return "FAIL", f"out of memory at {bucket['slots']} slot(s)"
    flops, share = achieved(bucket, peaks)
    if share is None:
        return "not run", "no peaks measured" if flops else "not timed"
    return gc._pass(share >= FLOPS_TARGET), f"{gc.si(flops, 'FLOP/s')} = {gc.pct(share)} of the peak"


def medians(sweep: dict) -> dict[str, float]:
    """Per d: the median capacity over seeds and rates (none before the sweep finished)."""
    return {d: statistics.median(values) for d, values in sweep.get("capacity", {}).items() if values}


def capacity_verdict(quick: dict | None, paper: dict | None) -> tuple[str, str]:
    """Paper's median capacity over its seeds and rates against the quick preset's, at every shared d."""
    if not (quick and paper and "capacity" in quick and "capacity" in paper):
        return "not run", ""
    ours, theirs = medians(paper), medians(quick)
    gaps = {d: abs(ours[d] / theirs[d] - 1) for d in ours.keys() & theirs.keys()}
    if not gaps:
        return "not run", "no shared d"
    worst = max(gaps, key=gaps.get)
    return gc._pass(gaps[worst] <= CAPACITY_TOLERANCE), f"at most {gc.pct(gaps[worst])} (d = {worst})"


def finished_verdict(record: dict | None) -> str:
    status = (record or {}).get("status")
    return {"ok": "PASS", "timeout": "undecided (timed out)", "error": "FAIL"}.get(status, "not run")


def estimate_verdict(record: dict | None, estimate_s: float | None) -> tuple[str, str]:
    """Measured ÷ estimated within [1/ESTIMATE_FACTOR, ESTIMATE_FACTOR]; a timed-out run's time is a lower
    bound (the sweep's own wall when it finished, else the case's process wall)."""
    if not record or estimate_s is None or record.get("status") not in ("ok", "timeout"):
        return "not run", ""
    done = record["status"] == "ok"
    seconds = record["result"]["sweep_s"] if done else record["process_s"]
    ratio = seconds / estimate_s
    detail = f"{seconds:.0f} s{'' if done else ' or more'} ÷ {estimate_s:.0f} s = {ratio:.2f}{'' if done else '+'}"
    if done:
        return gc._pass(1 / ESTIMATE_FACTOR <= ratio <= ESTIMATE_FACTOR), detail
    return ("FAIL" if ratio > ESTIMATE_FACTOR else "undecided (timed out)"), detail


# -- the report --------------------------------------------------------------------------------------------
def markdown(records: list[dict]) -> str:
    meta, cases = records[0], gc.by_case(records[1:])
    mode = MODES[meta["mode"]]
    device = next((r["result"]["device"] for r in records[1:] if gc.result(cases, r["case"])), None)
    peaks = gc.result(cases, "peaks")
    lines = ["# Paper scale on one accelerator: Fig 1 paper buckets and a paper sweep", ""]
    if meta["mode"] != "full":
        lines += ["> **CPU SMOKE RUN (`--smoke`): tiny grids and shapes, not GPU results. Do not commit.**", ""]
    lines += [
        "Written by `python benchmarks/paper_scale_check.py` in one invocation: every case in its own child",
        "process (cold compile caches), under a timeout from one budget. Wall = the child process.",
        "",
    ]
    lines += gc.md_table(["", ""], [[k, v] for k, v in gc.about(meta, device, records).items()])
    lines += ["## Cases", ""]
    rows = [
        [r["case"], gc.ran_on(r), r["status"], gc.fmt_seconds(r), r.get("timeout_s", "—"), r.get("status_detail", "")]
        for r in records[1:]
    ]
    lines += gc.md_table(["case", "ran on", "status", "wall s:", "timeout s:", "note"], rows)
    lines += gc.peaks_section(peaks)
    lines += buckets_section(records, cases, peaks)
    lines += sweeps_section(mode, cases)
    lines += acceptance_section(mode, cases, peaks)
    return "\n".join(lines) + "\n"


def buckets_section(records: list[dict], cases: dict, peaks: dict | None) -> list[str]:
    lines = [
        "## Paper buckets: the planner's program for one paper point, every slot live",
        "",
        "The bucket and slots the planner picks on this device (`Layout.bucket_for`, `Layout.slots_for`), its",
        "program compiled and timed over whole eval blocks (best of two segments, evaluation included).",
        "FLOP/s = `flops_per_step` at the true sizes × slots ÷ s/step; % of the measured matmul peak at the",
        "bucket's precision ('highest', or JAX's default = TF32 for tf32).",
        "",
    ]
    rows = []
    for r in records[1:]:
        b = gc.result(cases, r["case"]) if r["case"].startswith("bucket/") else None
        if b is None:
            continue
        flops, share = achieved(b, peaks)
        rows.append(
            [
                r["case"].removeprefix("bucket/"),
                ", ".join(f"{k} = {v}" for k, v in b["config"].items()),
                ", ".join(f"{k}={v}" for k, v in b["bucket"].items() if k in ("d", "m", "N", "M", "loss_block")),
                b["precision"],
                b["slots"],
                b["eval_every"],
                f"{b['compile_s']:.1f}" if "compile_s" in b else "—",
                f"{1e3 * b['step_s']:.2f}" if "step_s" in b else b.get("oom", "—"),
                f"{b['padded_flops_per_step'] / b['flops_per_step']:.2f}",
                gc.si(flops, "FLOP/s"),
                gc.pct(share),
                f"{b['peak_bytes'] / 2**20:.1f}" if b.get("peak_bytes") else "—",
            ]
        )
    if not rows:
        return lines + ["No bucket case finished.", ""]
    cols = [
        "case",
        "true config",
        "bucket",
        "precision",
        "slots:",
        "eval every:",
        "compile s:",
        "ms / step:",
        "padded ÷ true FLOPs:",
        "FLOP/s:",
        "% peak:",
        "peak MiB:",
    ]
    return lines + gc.md_table(cols, rows)


def sweeps_section(mode: Mode, cases: dict) -> list[str]:
    lines = ["## fig1_linear run to the end: quick, and paper at d ≤ 128", ""]
    rows, plans = [], []
    for s in mode.sweeps:
        record, r = cases.get(s.case), gc.result(cases, s.case) or {}
        if record is None:
            continue
        caps = ", ".join(f"{d}: {c:g}" for d, c in medians(r).items()) or "—"
        rows.append(
            [
                s.case,
                f"{s.preset} {' '.join(s.sets)}".strip(),
                record["status"],
                f"{r['sweep_s']:.1f}" if "sweep_s" in r else gc.fmt_seconds(record),
                f"{r['estimate_s']:.0f}" if r else "—",
                r.get("runs", "—"),
                caps,
            ]
        )
        if r:
            plans += [f"{s.case}:", "", *(f"    {x}" for x in r["plan"] + r["dry_run_totals"]), ""]
    if not rows:
        return lines + ["No sweep case ran.", ""]
    cols = ["case", "preset and --set", "status", "sweep s:", "estimate s:", "runs:", "median N* by d"]
    return lines + gc.md_table(cols, rows) + ["The planner's estimate and the dry-run's totals:", "", *plans]


def acceptance_section(mode: Mode, cases: dict, peaks: dict | None) -> list[str]:
    lines = ["## Acceptance", ""]
    for b in mode.buckets:
        verdict, detail = flops_verdict(cases.get(b.case), peaks)
        if b.acceptance:
            lines.append(
                f"- {b.case} ({b.precision}, N = {b.N}): {detail or '—'} (target ≥ {gc.pct(FLOPS_TARGET)}): "
                f"**{verdict}**."
            )
    paper = cases.get(mode.sweeps[1].case)
    lines.append(
        f"- {mode.sweeps[1].case} run to the end within this call: **{finished_verdict(paper)}** "
        f"({gc.fmt_seconds(paper, ' s')})."
    )
    verdict, detail = capacity_verdict(gc.result(cases, mode.sweeps[0].case), gc.result(cases, mode.sweeps[1].case))
    lines.append(
        f"- capacities against the quick preset's at the shared d: {detail or '—'} "
        f"(target ≤ {gc.pct(CAPACITY_TOLERANCE)}): **{verdict}**."
    )
    estimate = (gc.result(cases, mode.sweeps[1].case) or {}).get("estimate_s")
    verdict, detail = estimate_verdict(paper, estimate)
    lines.append(
        f"- measured ÷ the planner's estimate for this device: {detail or '—'} "
        f"(target within {ESTIMATE_FACTOR}×): **{verdict}**."
    )
    return lines + [""]


def main() -> None:
    script = Path(__file__).resolve()
    gc.cli(gc.Check(__doc__.splitlines()[0], MODES, RESULTS, SMOKE_RESULTS, child, markdown, case_cap, script))


if __name__ == "__main__":
    main()
