"""Whole capacity searches: jaxmem against the authors' protocol, on one core, in one invocation.

The authors' protocol (Nichani et al.'s public code as the spec describes it, `000_factual_recall.md`
§4.2–4.3; written here from that description): for each d, a binary search over N in [d, N_max]
that probes ⌊(lo+hi)/2⌋ until hi/lo ≤ 1.01 or hi − lo ≤ 1, the lower end assumed feasible; each probe
draws a fresh memory from one random stream per seed, jits a full-batch Adam step for its shapes and
runs it in a Python loop, reading the accuracy every `steps // 128` steps and stopping once it is
above 0.99; the probe succeeds when its best accuracy reaches 0.99.

Both sides run in child processes pinned to the same core (`taskset -c CORE`), one after the other,
with a cold compile cache (jaxmem's persistent cache off; the protocol re-jits every probe as the
authors' loop does). Cases:

- `protocol`: the loop above, one seed;
- `jaxmem paper`: the same grid, seed and rate with `[search] mode = "paper"`;
- `jaxmem default`: the same grid with 5 seeds in jaxmem's default search mode.

`python benchmarks/bench_protocol.py` writes `RESULTS_protocol.md`; `--grids linear`, `--cases
jaxmem-paper` run a part; `--core K` picks the core.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent

GRIDS = {  # the issue's grids (spec §4.2, §4.3), the authors' rate and step budget of each
    "linear": {
        "model": "linear",
        "d": [8, 11, 16, 22, 32],
        "m_over_d": 0,
        "hi": "floor(0.5 * d**2)",
        "lr": 1.0,
        "steps": 2**12,
    },
    "mlp": {"model": "mlp", "d": [8, 11, 16], "m_over_d": 2, "hi": "m * d", "lr": 3e-2, "steps": 2**15},
}
SEEDS_DEFAULT = [0, 1, 11, 111, 42]
THRESHOLD = 0.99


# -- the authors' protocol (child) ----------------------------------------------------------------------------
def protocol_memory(model: str, d: int, m: int, n: int, key):
    """Frozen sphere embeddings E, U (N × d) and lecun-normal weights, as the authors' model draws them."""
    import jax
    import jax.numpy as jnp

    def sphere(k, rows):
        g = jax.random.normal(k, (rows, d))
        return g / jnp.linalg.norm(g, axis=1, keepdims=True)

    k_e, k_u, k_1, k_2 = jax.random.split(key, 4)
    problem = {"E": sphere(k_e, n), "U": sphere(k_u, n)}
    lecun = jax.nn.initializers.lecun_normal()
    if model == "linear":
        return {"W": lecun(k_1, (d, d))}, problem
    return {"W1": lecun(k_1, (d, m)), "W2": lecun(k_2, (m, d)), "b": jnp.zeros(m)}, problem


def protocol_logits(params, problem):
    import jax

    E = problem["E"]
    out = E @ params["W"].T if "W" in params else jax.nn.relu(E @ params["W1"] + params["b"]) @ params["W2"]
    return out @ problem["U"].T


def protocol_probe(model: str, d: int, m: int, n: int, lr: float, steps: int, key) -> tuple[bool, float, int]:
    """One probe: (success, best accuracy, steps run)."""
    import jax
    import jax.numpy as jnp
    import optax

    params, problem = protocol_memory(model, d, m, n, key)
    y = jnp.arange(n)
    opt = optax.adamw(lr, weight_decay=0.0)

    def loss(p):
        return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(protocol_logits(p, problem)), y[:, None], 1))

    @jax.jit
    def step(p, s):
        g = jax.grad(loss)(p)
        u, s = opt.update(g, s, p)
        return optax.apply_updates(p, u), s

    @jax.jit
    def accuracy(p):
        return jnp.mean(jnp.argmax(protocol_logits(p, problem), 1) == y)

    state, best, every = opt.init(params), 0.0, max(steps // 128, 1)
    for t in range(steps):
        params, state = step(params, state)
        if (t + 1) % every == 0:
            best = max(best, float(accuracy(params)))
            if best > THRESHOLD:
                return True, best, t + 1
    return best >= THRESHOLD, best, steps


def protocol_search(model: str, d: int, m: int, hi: int, lr: float, steps: int, keys) -> dict:
    """The authors' binary search (spec §4.2): returns the capacity and the probes."""
    lo, probes = d, []
    while hi / lo > 1.01 and hi - lo > 1:
        n = (lo + hi) // 2
        ok, best, ran = protocol_probe(model, d, m, n, lr, steps, next(keys))
        probes.append({"N": n, "success": ok, "best": best, "steps": ran})
        lo, hi = (n, hi) if ok else (lo, n)
    return {"capacity": lo, "probes": probes}


def run_protocol(grid: dict, seed: int) -> dict:
    import jax

    key = jax.random.PRNGKey(seed)

    def stream():  # one random stream per seed, shared across d and probes (authors)
        nonlocal key
        while True:
            key, sub = jax.random.split(key)
            yield sub

    keys, results = stream(), {}
    for d in grid["d"]:
        m = grid["m_over_d"] * d
        hi = math.floor(0.5 * d * d) if grid["model"] == "linear" else m * d
        results[d] = protocol_search(grid["model"], d, m, hi, grid["lr"], grid["steps"], keys)
    return results


# -- jaxmem (child) ----------------------------------------------------------------------------------------------
def jaxmem_spec(grid: dict, seeds: list[int], mode: str, give_up: int, probes: int | None = None) -> dict:
    """jaxmem's spec of the grid; `probes`: K probes per round pinned (None: the planner's)."""
    spec = {
        "experiment": "assoc_memory",
        "seeds": seeds,
        "fixed": {"model": grid["model"]},
        "grid": {"d": grid["d"]},
        "train": {
            "steps": grid["steps"],
            "eval_every": grid["steps"] // 128,
            "learning_rates": [grid["lr"]],
            "early_stop": THRESHOLD,
            "give_up": give_up,
        },
        "search": {"variable": "N", "lo": "d", "hi": grid["hi"], "resolution": 0.01, "mode": mode},
        "success": {"metric": "accuracy", "at_least": THRESHOLD},
    }
    if grid["m_over_d"]:
        spec["fixed"]["m_over_d"] = grid["m_over_d"]
        spec["derived"] = {"m": "m_over_d * d"}
    if probes:
        spec["search"]["probes"] = probes
    return spec


def run_jaxmem(grid: dict, seeds: list[int], mode: str, give_up: int, probes: int | None = None) -> dict:
    import jaxmem
    from jaxmem.persistence.store import load_results
    from jaxmem.persistence.timeline import summary

    with tempfile.TemporaryDirectory() as tmp:
        jaxmem.run(jaxmem_spec(grid, seeds, mode, give_up, probes), Path(tmp) / "out")
        searches = load_results(Path(tmp) / "out", "searches")
        compiles = load_results(Path(tmp) / "out", "compiles")
        runs = load_results(Path(tmp) / "out")
        logical = summary(load_results(Path(tmp) / "out", "timeline"), compiles, grid["steps"])
    capacity = {}
    for row in searches.itertuples():
        capacity.setdefault(int(row.d), {})[int(row.seed)] = float(row.capacity)
    return {
        "capacity": capacity,
        "compiles": len(compiles),
        "compile_s": float(compiles["seconds"].sum()),
        "runs": len(runs),
        "steps": int(runs["steps_run"].sum()),
        **({"critical_path": dataclasses.asdict(logical)} if logical else {}),
    }


def child(args) -> None:
    os.environ["JAXMEM_COMPILE_CACHE"] = "0"
    grid = GRIDS[args.grid]
    start = time.perf_counter()
    if args.child == "protocol":
        out = {"searches": run_protocol(grid, SEEDS_DEFAULT[0])}
    else:
        out = run_jaxmem(
            grid,
            [SEEDS_DEFAULT[0]] if args.child == "jaxmem-paper" else SEEDS_DEFAULT,
            "paper" if args.child == "jaxmem-paper" else "verified",
            args.give_up,
        )
    out["wall_s"] = time.perf_counter() - start
    print("RESULT " + json.dumps(out))


# -- parent ---------------------------------------------------------------------------------------------------
def measure(case: str, grid: str, core: int, give_up: int) -> dict:
    env = {**os.environ, "JAXMEM_COMPILE_CACHE": "0", "JAX_PLATFORMS": "cpu"}
    cmd = ["taskset", "-c", str(core), sys.executable, __file__, "--child", case, "--grid", grid]
    cmd += ["--give-up", str(give_up)]
    start = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"{case} on {grid} failed:\n{proc.stderr[-3000:]}")
    line = next(x for x in proc.stdout.splitlines() if x.startswith("RESULT "))
    return {**json.loads(line[len("RESULT ") :]), "process_s": wall}


def protocol_summary(r: dict) -> dict:
    """The protocol's measurements in jaxmem's terms: capacity per d (seed 0), probes, steps."""
    searches = r["searches"]
    return {
        "capacity": {d: {str(SEEDS_DEFAULT[0]): float(s["capacity"])} for d, s in searches.items()},
        "compiles": 2 * sum(len(s["probes"]) for s in searches.values()),  # a step and an accuracy per probe
        "runs": sum(len(s["probes"]) for s in searches.values()),
        "steps": sum(p["steps"] for s in searches.values() for p in s["probes"]),
        "process_s": r["process_s"],
    }


def capacities(r: dict, d: str) -> str:
    values = sorted(r["capacity"].get(d, {}).values())
    if len(values) == 1:
        return f"{values[0]:g}"
    return f"{np.median(values):g} ({values[0]:g}–{values[-1]:g})" if values else "—"


def markdown(results: dict, machine: dict, give_up: int) -> str:
    """The results file: per grid, every case's time, work and capacities, and the acceptance checks."""
    from common import md_table

    lines = [
        "# Whole capacity searches: jaxmem against the authors' protocol",
        "",
        "Written by `python benchmarks/bench_protocol.py` in one invocation: every case in its own child",
        "process, one after another, all pinned to the same core (`taskset`), with a cold compile cache",
        "(jaxmem's persistent cache off; the protocol jits every probe afresh, as the authors' loop does).",
        "Wall = the child process, start-up and imports included.",
        "",
        *md_table(["", ""], [[k, v] for k, v in machine.items()]),
        "Cases: **protocol** = the authors' protocol written from the spec (§4.2–4.3), seed 0; **jaxmem",
        'paper** = the same grid, seed and rate with `[search] mode = "paper"`; **jaxmem default** = 5 seeds',
        f"(0, 1, 11, 111, 42) in jaxmem's default `verified` mode. jaxmem's `[train] give_up` = {give_up}",
        "(0 = off: the rule is not validated, see RESULTS_give_up.md).",
        "",
    ]
    for grid, g in GRIDS.items():
        cases = {c: r for (gr, c), r in results.items() if gr == grid}
        if not cases:
            continue
        if "protocol" in cases:
            cases["protocol"] = protocol_summary(cases["protocol"])
        ds = [str(d) for d in g["d"]]
        lines += [
            f"## {g['model']} memory: d ∈ {g['d']}, N ∈ [d, {g['hi']}], lr {g['lr']:g}, {g['steps']} steps",
            "",
        ]
        base = cases.get("protocol", {}).get("process_s")
        rows = [
            [
                c,
                f"{r['process_s']:.1f}",
                f"{base / r['process_s']:.2f}" if base else "—",
                r["compiles"],
                f"{r['compile_s']:.1f}" if "compile_s" in r else "—",
                r["runs"],
                f"{r['steps']:,}",
                *(capacities(r, d) for d in ds),
            ]
            for c, r in cases.items()
        ]
        cols = ["case", "wall s:", "protocol ÷ case:", "compiles:", "compile s:", "runs:", "steps:"]
        lines += md_table(cols + [f"N* at d = {d}:" for d in ds], rows)
        lines += acceptance(cases, ds)
    return "\n".join(lines) + "\n"


def acceptance(cases: dict, ds: list[str]) -> list[str]:
    """The issue's three checks on one grid, where the cases ran."""
    out = []
    protocol, paper, default = (cases.get(c) for c in ("protocol", "jaxmem-paper", "jaxmem-default"))
    if protocol and paper:
        ratio = protocol["process_s"] / paper["process_s"]
        out.append(f"- jaxmem `paper` mode is {ratio:.2f}× the protocol's speed (target ≥ 3): **{_pass(ratio >= 3)}**.")
        gaps = [abs(paper["capacity"][d]["0"] / protocol["capacity"][d]["0"] - 1) for d in ds]
        out.append(
            f"- Capacities differ from the protocol's by at most {100 * max(gaps):.1f}% (target ≤ 10%): "
            f"**{_pass(max(gaps) <= 0.10)}**."
        )
    if protocol and default:
        ok = default["process_s"] <= protocol["process_s"]
        out.append(
            f"- 5 seeds in jaxmem's default mode took {default['process_s']:.1f} s against the protocol's "
            f"{protocol['process_s']:.1f} s for one seed (target ≤): **{_pass(ok)}**."
        )
    return out + [""]


def _pass(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--grid", help=argparse.SUPPRESS)
    parser.add_argument("--grids", default="linear,mlp")
    parser.add_argument("--cases", default="protocol,jaxmem-paper,jaxmem-default")
    parser.add_argument("--core", type=int, default=0)
    parser.add_argument("--give-up", type=int, default=0, help="jaxmem's [train] give_up (0 = off, the default)")
    parser.add_argument("--out", default=str(HERE / "RESULTS_protocol.md"))
    parser.add_argument("--json", default=None, help="also dump the raw measurements here")
    parser.add_argument("--render", default=None, help="write --out from a --json file of an earlier invocation")
    args = parser.parse_args()
    if args.child:
        child(args)
        return
    sys.path.insert(0, str(HERE))
    from common import machine

    if args.render:
        raw = json.loads(Path(args.render).read_text())
        results = {tuple(k.split("/")): v for k, v in raw["results"].items()}
        Path(args.out).write_text(markdown(results, raw["machine"], raw["give_up"]))
        return
    results, about = {}, {**machine(), "pinned to core": args.core}
    about["device"] = f"cpu (every case runs with JAX_PLATFORMS=cpu; the parent sees {about['device']})"
    for grid in args.grids.split(","):
        for case in args.cases.split(","):
            print(f"[bench {time.strftime('%H:%M:%S')}] {case} on {grid} ...", file=sys.stderr, flush=True)
            results[(grid, case)] = r = measure(case, grid, args.core, args.give_up)
            print(f"[bench] {case} on {grid}: {r['process_s']:.1f} s", file=sys.stderr, flush=True)
    if args.json:
        raw = {"machine": about, "give_up": args.give_up, "results": {f"{g}/{c}": r for (g, c), r in results.items()}}
        Path(args.json).write_text(json.dumps(raw, indent=1))
    Path(args.out).write_text(markdown(results, about, args.give_up))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
