"""Dense against blocked softmax cross-entropy, measured as the engine runs it: one jitted, slot-vmapped
value_and_grad of a family's own `loss` (its `loss_block` 0: the N × M logits written to memory; B: the
blocked loss of jaxmem/experiments/blocked_softmax.py, B classes at a time, as XLA's scan and, on a GPU,
as the fused Pallas kernels of jaxmem/experiments/pallas_softmax.py), at the Fig 1 quick shapes, a
larger assoc_memory shape toward the paper's (whose N = M = 64,800 dense logits, 16.8 GB a run, a CPU
cannot step in a benchmark) and factual_recall's. Compile seconds are reported apart from step seconds.

Writes the Markdown table (--out) and the device's entry of the planner's table (--table,
jaxmem/plan/cross_entropy.json: per case, the bytes of one run's dense logits and the step seconds of each
loss path), from which `jaxmem.plan.loss_blocks` picks dense or blocked per program.

    python benchmarks/bench_cross_entropy.py [--repeats 20] [--slots S] [--out benchmarks/RESULTS_cross_entropy.md]
        [--table jaxmem/plan/cross_entropy.json]

On an accelerator (the saturated programs of RESULTS_gpu_throughput.md hold 256 slots):
    python benchmarks/bench_cross_entropy.py --slots 256 --out benchmarks/RESULTS_cross_entropy_gpu.md
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common as C  # noqa: E402

from jaxmem.engine.device_memory import target_of  # noqa: E402
from jaxmem.experiments import pallas_softmax  # noqa: E402
from jaxmem.experiments.nichani24 import assoc_memory, factual_recall  # noqa: E402
from jaxmem.plan.buckets import static_shape, traced_values  # noqa: E402
from jaxmem.plan.runs import run_key  # noqa: E402
from jaxmem.plan.throughput import device_key  # noqa: E402

HERE = Path(__file__).resolve().parent
FACTS = {"S": 64, "R": 4, "D": 16, "d": 32, "H": 4, "d_h": 8, "m": 64, "T": 8, "batch": 256, "test_size": 64}
CASES = [  # (name, experiment, config, slots): slots as the engine gives a quick program on this CPU
    ("Fig 1 linear quick, d 22, N 242", assoc_memory.EXPERIMENT, {"model": "linear", "d": 22, "N": 242}, 16),
    ("Fig 1 MLP quick, d 16, m 32, N 512", assoc_memory.EXPERIMENT, {"model": "mlp", "d": 16, "m": 32, "N": 512}, 16),
    ("assoc MLP, d 64, m 256, N 4096", assoc_memory.EXPERIMENT, {"model": "mlp", "d": 64, "m": 256, "N": 4096}, 1),
    ("factual_recall, 1024 answers, batch 256", factual_recall.EXPERIMENT, FACTS, 16),
]
XLA_PATHS = ((0, "xla"), (128, "xla"), (512, "xla"))  # (loss_block, loss_kernel); block 0: dense
FUSED_PATHS = ((32, "pallas"), (128, "pallas"))  # tiles of 64 rows × B classes held in registers


def loss_paths() -> tuple[tuple[int, str], ...]:
    """The paths measured here: the fused kernels only where they compile (a GPU), not interpreted."""
    return XLA_PATHS + (() if pallas_softmax.interpret() else FUSED_PATHS)


def program(exp, config: dict, loss_path: tuple[int, str], slots: int):
    """(jitted slot-vmapped value_and_grad of the family's loss on `loss_path`, its arguments)."""
    config = exp.effective(config)
    block, kernel = loss_path
    shape = static_shape(exp, {**config, "loss_block": block, "loss_kernel": kernel}, lambda n, *_: n)
    dyn = {k: jnp.asarray(v) for k, v in traced_values(exp, config).items()}
    keys = jnp.stack([run_key(0, s) for s in range(slots)])
    params, problem = jax.vmap(lambda k: exp.init(k, shape, dyn))(keys)

    def one(params, problem, key):
        return jax.value_and_grad(exp.loss)(params, problem, shape, dyn, key)

    return jax.jit(jax.vmap(one)), (params, problem, keys)


def measure(exp, config: dict, slots: int, repeats: int) -> list[dict]:
    """Compile seconds and median step seconds of each loss path (`loss_paths`) of one case. The paths'
    calls are interleaved (one round calls each once), so a shared machine's load falls on all of them
    alike. A path's entry names its kernel where it is not XLA's."""
    compiled, compile_s, paths = [], [], loss_paths()
    for loss_path in paths:
        fn, args = program(exp, config, loss_path, slots)
        start = time.perf_counter()
        compiled.append((fn.lower(*args).compile(), args))
        compile_s.append(time.perf_counter() - start)
        jax.block_until_ready(compiled[-1][0](*args))
    steps = [[] for _ in paths]
    for _ in range(repeats):
        for (fn, args), times in zip(compiled, steps):
            start = time.perf_counter()
            jax.block_until_ready(fn(*args))
            times.append(time.perf_counter() - start)
    return [
        {"block": block, **kernel_entry(kernel), "compile_seconds": c, "step_seconds": statistics.median(t)}
        for (block, kernel), c, t in zip(paths, compile_s, steps)
    ]


def kernel_entry(kernel: str) -> dict:
    """A measured path's kernel as cross_entropy.json names it: only where it is not XLA's (plan.loss_blocks)."""
    return {} if kernel == "xla" else {"kernel": kernel}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--slots", type=int, default=0, help="slots of every case (0: each case's own)")
    parser.add_argument("--out", type=Path, default=HERE / "RESULTS_cross_entropy.md")
    parser.add_argument("--table", type=Path, default=HERE.parent / "jaxmem" / "plan" / "cross_entropy.json")
    args = parser.parse_args()
    machine, rows, entries = C.machine(), [], []
    for name, exp, config, own_slots in CASES:
        slots = args.slots or own_slots
        C.log(f"{name} ...")
        with C.CpuShare() as share:
            paths = measure(exp, config, slots, args.repeats)
        dense = paths[0]["step_seconds"]
        logits = exp.cost("temp_bytes", {**exp.effective(config), "loss_block": 0})
        for path in paths:
            rows.append(
                [
                    name,
                    slots,
                    " ".join([str(path["block"] or "dense"), path.get("kernel", "")]).strip(),
                    f"{1e3 * path['step_seconds']:.2f}",
                    f"{dense / path['step_seconds']:.2f}×",
                    f"{path['compile_seconds']:.2f}",
                    f"{100 * share.share:.0f}%",
                ]
            )
        entries.append({"case": name, "family": exp.name, "dense_logits_bytes": logits, "slots": slots, "paths": paths})
        write(args, machine, rows, entries)  # after every case: a run stopped at its limit keeps the cases done


def write(args, machine: dict, rows: list, entries: list) -> None:
    """The Markdown table (--out) and the device's entry of the planner's table (--table), of the cases so far."""
    command = " ".join(["python benchmarks/bench_cross_entropy.py", *sys.argv[1:]])
    lines = [
        "# Softmax cross-entropy: dense logits against the blocked loss (XLA's scan; on a GPU, fused kernels too)",
        "",
        f"`{command}`: one jitted value_and_grad of the family's own loss, vmapped over the slots as the engine "
        "runs it; 'step ms' is the median of the repeated calls after a warm-up, compile seconds apart. 'vs dense' "
        "is dense's step time over the path's (above 1: faster than dense). 'load' is the share of the machine's "
        "cores other processes used during the case (a shared machine).",
        "",
        *C.md_table(["", ""], [[k, v] for k, v in machine.items()]),
        *C.md_table(["case", "slots:", "loss", "step ms:", "vs dense:", "compile s:", "load:"], rows),
    ]
    args.out.write_text("\n".join(lines))
    print("\n".join(lines), flush=True)
    table = json.loads(args.table.read_text()) if args.table.is_file() else {}
    date = machine["date"].split(" ")[0]
    table[device_key(target_of(jax.devices()))] = {"date": date, "source": command, "cases": entries}
    args.table.write_text(json.dumps(table, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
