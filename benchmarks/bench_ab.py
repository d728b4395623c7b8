"""Before/after of an engine change: one `bench_suite` workload run by two jaxmem trees, alternately, in
one invocation (the same machine state for both; the tree that runs first changes every rep).

The base tree is `git archive REV jaxmem` in a temporary folder, put first on the PYTHONPATH of its child
processes; the other is the working tree. Each child runs `run_sweep` once on the workload and reports its
compile, run and segment seconds, the segments and checkpoints, and a checksum of the runs' final metrics
(equal checksums: the change left the results alone). Prints a Markdown table.

    python benchmarks/bench_ab.py --base REV [--family ntp_linear] [--set seeds=1024] [--reps 2]
    python benchmarks/bench_ab.py --base REV --sweep sweeps/nichani24/fig1_mlp.toml [--preset quick]
"""

from __future__ import annotations

import argparse
import dataclasses
import io
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import common as C  # noqa: E402


def workload(family: str, changes: dict, sweep: str | None, preset: str | None):
    """The spec to run: a shipped sweep file, or a bench_suite family (or its scaling MLP) with changes."""
    if sweep:
        from jaxmem.spec.sweep import load

        return load(sweep, preset)
    import bench_suite as S

    base = S.FAMILIES[family] if family in S.FAMILIES else S.SCALING.base
    max_slots = changes.pop("max_slots", 0)
    fixed = {k: changes.pop(k) for k in list(changes) if k in base.fixed}
    return dataclasses.replace(base, fixed={**base.fixed, **fixed}, **changes).spec(max_slots=max_slots)


def child(spec) -> None:
    """One engine run of the workload; prints one JSON line."""
    from jaxmem.engine.executor import BucketRunner

    C.cold_compiles()
    segments = {"n": 0}

    def count(step):
        def counted(runner):
            segments["n"] += 1
            return step(runner)

        return counted

    with C.patched(BucketRunner, "step", count), C.CpuShare() as cpu:
        a = C.run_engine(spec)
    print(
        json.dumps(
            {
                "compile_s": a.compile_s,
                "run_s": a.run_s,
                "segments_s": a.parts[C.SEGMENTS],
                "segments": segments["n"],
                "checkpoints_s": a.parts.get("checkpoints", 0.0),
                "cpu_s": cpu.mine_s,
                "others": cpu.share,
                "slots": int(a.compiles.slots.max()),
                "checksum": float(a.runs.final_metric.astype(float).sum()),
            }
        )
    )


def run_child(tree: Path | None, args: list[str]) -> dict:
    env = dict(os.environ, PYTHONPATH=str(tree)) if tree else {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    cmd = [sys.executable, __file__, "--child", *args]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def parse_changes(items: list[str]) -> dict:
    """`key=value` pairs, values read as JSON where they parse (numbers, lists), else strings."""
    out = {}
    for item in items:
        key, _, value = item.partition("=")
        try:
            out[key] = json.loads(value)
        except json.JSONDecodeError:
            out[key] = value
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", default="HEAD", help="git revision of the 'before' tree")
    parser.add_argument("--family", default="ntp_linear", help="a bench_suite family, or 'scaling' (its MLP)")
    parser.add_argument("--set", nargs="*", default=[], help="workload changes: seeds=1024 steps=256 N=64 ...")
    parser.add_argument("--sweep", help="a sweep file instead of a family (its preset: --preset)")
    parser.add_argument("--preset")
    parser.add_argument("--reps", type=int, default=2)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--changes", default="{}", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(workload(args.family, json.loads(args.changes), args.sweep, args.preset))
    changes = parse_changes(args.set)
    forwarded = ["--family", args.family, "--changes", json.dumps(changes)]
    if args.sweep:
        forwarded += ["--sweep", args.sweep, *(["--preset", args.preset] if args.preset else [])]
    with tempfile.TemporaryDirectory() as tmp:
        archive = subprocess.run(
            ["git", "archive", args.base, "jaxmem"], cwd=HERE.parent, capture_output=True, check=True
        )
        with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
            tar.extractall(tmp, filter="data")
        rows = []
        trees = [(f"before ({args.base})", Path(tmp)), ("after (working tree)", None)]
        for rep in range(args.reps):
            for name, tree in trees if rep % 2 == 0 else trees[::-1]:  # each tree goes first in every other rep
                C.log(f"rep {rep + 1}: {name} ...")
                rows.append((name, os.getloadavg()[0], run_child(tree, forwarded)))
    what = (
        f"{args.sweep} [{args.preset or 'base'}]"
        if args.sweep
        else f"{args.family} ({' '.join(args.set) or 'as in bench_suite'})"
    )
    print(f"\n{what}, {time.strftime('%Y-%m-%d %H:%M')}, alternating, {args.reps} each:\n")
    columns = [
        "tree",
        "load:",
        "slots:",
        "compile s:",
        "run s:",
        "segments s:",
        "segments:",
        "checkpoints s:",
        "CPU s:",
        "others' CPU:",
        "checksum of final metrics:",
    ]
    body = [
        [
            name,
            f"{load:.2f}",
            r["slots"],
            f"{r['compile_s']:.2f}",
            f"{r['run_s']:.2f}",
            f"{r['segments_s']:.2f}",
            r["segments"],
            f"{r['checkpoints_s']:.2f}",
            f"{r['cpu_s']:.1f}",
            f"{100 * r['others']:.0f}%",
            f"{r['checksum']:.6g}",
        ]
        for name, load, r in rows
    ]
    print("\n".join(C.md_table(columns, body)))


if __name__ == "__main__":
    main()
