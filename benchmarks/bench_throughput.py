"""The throughput table behind the dry-run's and the planner's time estimates (jaxmem/plan/throughput.json):
for every experiment family of bench_suite.py, its representative config trained by the engine with all
runs in one program (`--slots` of them, no early stop), timed in its segments. Each family gets one row
for this machine's device kind: FLOPs of one run's step (true sizes), slots, achieved FLOP/s (useful
work over segment time), seconds per program step and seconds per compile (a cold compile of its
program). Rows of other device kinds are kept.

An accelerator's rows come from the device checks instead (`--from-device`): every saturated program of
gpu_check.py (true sizes = the program's) and every 'highest'-precision paper bucket of
paper_scale_check.py (its padded FLOPs: the work the planner estimates), at the device kind they name;
gpu_check's floor case gives the device's least time of a program step (its 1-slot program).

    python benchmarks/bench_throughput.py [--slots 16] [--families assoc_memory,ntp_linear] [--steps-scale 0.25]
    python benchmarks/bench_throughput.py --from-device RESULTS_gpu_throughput.jsonl RESULTS_paper_scale_gpu.jsonl
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import baselines as B  # noqa: E402
import bench_suite as S  # noqa: E402
import common as C  # noqa: E402

from jaxmem.engine import device_memory  # noqa: E402
from jaxmem.experiments.registry import get as get_experiment  # noqa: E402
from jaxmem.plan import throughput  # noqa: E402
from jaxmem.spec.sweep import load  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def measure(family: S.Family, slots: int, steps_scale: float) -> dict:
    """One family's row: its runs all in one program of `slots` slots, timed in the engine's segments."""
    steps = max(family.eval_every, int(family.steps * steps_scale) // family.eval_every * family.eval_every)
    spec = family.spec(max_slots=slots, seeds=slots, steps=steps)
    exp = get_experiment(spec.experiment)
    timed, _ = S.time_engine(spec, exp, B.runs_from_spec(spec, exp))
    per_run = B.flops_per_step(exp, B.runs_from_spec(spec, exp)[0].config)
    return {
        "flops_per_run_step": per_run,
        "slots": timed.slots,
        "flops_per_second": timed.gflop * 1e9 / timed.segments_s,
        "step_seconds": timed.segments_s / steps,
        "compile_seconds": timed.compile_s / max(timed.compiles, 1),
        "others_cpu": round(timed.others, 3),
    }


def device_rows(jsonl: Path) -> tuple[dict, dict]:
    """What one device check's records say of its device (kind, date, the step floor when measured) and its
    throughput rows per family."""
    import gpu_check as GC
    import paper_scale_check as PC

    records = GC.read_records(jsonl)
    device, rows, floor = None, {}, None
    for record in records[1:]:
        result, case = record.get("result") or {}, record["case"]
        device = result.get("device", device)
        if case.startswith("saturation/") and GC.FULL.saturation_of(case).floor:
            floor = min(r["step_s"] for r in result["rows"] if r["slots"] == 1)
            continue
        if case.startswith("saturation/") and result["config"].get("loss_block"):
            continue  # a loss path's measurement, not the program the planner sizes (plan/cross_entropy.json)
        if case.startswith("saturation/"):
            family = GC.FULL.saturation_of(case).experiment
            entries = [_row(result["flops_per_step"], r["slots"], r["step_s"], r["compile_s"]) for r in result["rows"]]
        elif case.startswith("bucket/") and result.get("precision") == "highest":
            family = load(ROOT / PC.FULL.bucket(case).spec).experiment
            entries = [_row(result["padded_flops_per_step"], result["slots"], result["step_s"], result["compile_s"])]
        else:
            continue
        rows.setdefault(family, []).extend(entries)
    date = datetime.datetime.fromtimestamp(records[0]["started"], datetime.timezone.utc).strftime("%Y-%m-%d")
    if device is None or device["platform"] == "cpu":
        raise SystemExit(f"{jsonl}: no case ran on an accelerator (a CPU's rows are measured by this script itself)")
    machine = {"device": f"{device['kind']} ({device['platform']} x{device['count']})", "jax / jaxlib": device["jax"]}
    meta = {"date": date, "machine": machine, "source": str(jsonl)}
    return meta | ({"step_floor_seconds": floor} if floor else {}), rows


def _row(flops_per_run_step: float, slots: int, step_s: float, compile_s: float) -> dict:
    return {
        "flops_per_run_step": flops_per_run_step,
        "slots": slots,
        "flops_per_second": flops_per_run_step * slots / step_s,
        "step_seconds": step_s,
        "compile_seconds": compile_s,
    }


def from_device(paths: list[Path], table: Path) -> None:
    """The throughput rows of device checks' records, each device kind's rows replaced by theirs."""
    measured, entries = json.loads(table.read_text()) if table.is_file() else {}, {}
    for jsonl in paths:
        meta, rows = device_rows(jsonl)
        source, key = meta.pop("source"), meta["machine"]["device"].split(" (")[0]
        entry = entries.setdefault(key, {"sources": [], "families": {}, **in_sweeps(measured.get(key, {}))})
        entry.update(meta | {"date": max(entry.get("date", ""), meta["date"])})  # the newest check's date
        entry["sources"].append(source)
        for family, found in rows.items():
            entry["families"].setdefault(family, []).extend(found)
    table.write_text(json.dumps(measured | entries, indent=1, sort_keys=True) + "\n")


def in_sweeps(entry: dict) -> dict:
    """What a device's entry holds that this script does not measure: its compiles inside sweeps
    (benchmarks/compile_costs.py), kept when its rows are measured again."""
    return {k: entry[k] for k in ("sweep_compile_seconds",) if k in entry}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--slots", type=int, default=16, help="runs in the one program (a GPU wants hundreds)")
    parser.add_argument("--families", default=",".join(n for n, f in S.FAMILIES.items() if f.steps))
    parser.add_argument("--steps-scale", type=float, default=0.25, help="a fraction of each family's steps")
    parser.add_argument("--table", default=str(throughput.TABLE))
    parser.add_argument("--from-device", nargs="+", metavar="JSONL", help="rows from device checks' records")
    args = parser.parse_args()
    if args.from_device:
        return from_device([Path(p) for p in args.from_device], Path(args.table))
    import jax

    C.cold_compiles()
    key = throughput.device_key(device_memory.target_of(jax.devices()))
    rows = {}
    for name in args.families.split(","):
        C.log(f"{name}: {args.slots} slots ...")
        rows[name] = [measure(S.FAMILIES[name], args.slots, args.steps_scale)]
        C.log(f"{name}: {rows[name][0]}")
    path = Path(args.table)
    measured = json.loads(path.read_text()) if path.is_file() else {}
    date = datetime.datetime.now().astimezone().strftime("%Y-%m-%d")
    machine = {k: v for k, v in C.machine().items() if k in ("cpu", "jax / jaxlib", "device")}
    kept = in_sweeps(measured.get(key, {}))
    measured[key] = {"date": date, "machine": machine, "slots": args.slots, "families": rows, **kept}
    path.write_text(json.dumps(measured, indent=1, sort_keys=True) + "\n")
    print(json.dumps(measured[key], indent=1))


if __name__ == "__main__":
    main()
