"""The throughput table behind the dry-run's and the planner's time estimates (jaxmem/plan/throughput.json):
for every experiment family of bench_suite.py, its representative config trained by the engine with all
runs in one program (`--slots` of them, no early stop), timed in its segments. Each family gets one row
for this machine's device kind: FLOPs of one run's step (true sizes), slots, achieved FLOP/s (useful
work over segment time), seconds per program step and seconds per compile (a cold compile of its
program). Rows of other device kinds are kept.

    python benchmarks/bench_throughput.py [--slots 16] [--families assoc_memory,ntp_linear] [--steps-scale 0.25]
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--slots", type=int, default=16, help="runs in the one program (a GPU wants hundreds)")
    parser.add_argument("--families", default=",".join(n for n, f in S.FAMILIES.items() if f.steps))
    parser.add_argument("--steps-scale", type=float, default=0.25, help="a fraction of each family's steps")
    parser.add_argument("--table", default=str(throughput.TABLE))
    args = parser.parse_args()
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
    measured[key] = {"date": date, "machine": machine, "slots": args.slots, "families": rows}
    path.write_text(json.dumps(measured, indent=1, sort_keys=True) + "\n")
    print(json.dumps(measured[key], indent=1))


if __name__ == "__main__":
    main()
