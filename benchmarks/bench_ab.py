"""Before/after of an engine change: one `bench_suite` workload run by two jaxmem trees, alternately, in
one invocation (the same machine state for both).

The base tree is `git archive REV jaxmem` in a temporary folder, put first on the PYTHONPATH of its child
processes; the other is the working tree. Each child runs `run_sweep` once on the workload and reports its
compile, run and segment seconds, the segments and checkpoints, and a checksum of the runs' final metrics
(equal checksums: the change left the results alone). Prints a Markdown table.

    python benchmarks/bench_ab.py --base REV [--family ntp_linear] [--set seeds=1024] [--reps 2]
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


def child(family: str, changes: dict) -> None:
    """One engine run of the workload; prints one JSON line."""
    import bench_suite as S

    from jaxmem.executor import BucketRunner

    C.cold_compiles()
    base = S.FAMILIES[family] if family in S.FAMILIES else S.SCALING.base
    max_slots = changes.pop("max_slots", 0)
    fixed = {k: changes.pop(k) for k in list(changes) if k in base.fixed}
    spec = dataclasses.replace(base, fixed={**base.fixed, **fixed}, **changes).spec(max_slots=max_slots)
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


def run_child(tree: Path | None, family: str, changes: dict) -> dict:
    env = dict(os.environ, PYTHONPATH=str(tree)) if tree else {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    cmd = [sys.executable, __file__, "--child", "--family", family, "--changes", json.dumps(changes)]
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
    parser.add_argument("--reps", type=int, default=2)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--changes", default="{}", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(args.family, json.loads(args.changes))
    changes = parse_changes(args.set)
    with tempfile.TemporaryDirectory() as tmp:
        archive = subprocess.run(
            ["git", "archive", args.base, "jaxmem"], cwd=HERE.parent, capture_output=True, check=True
        )
        with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
            tar.extractall(tmp, filter="data")
        rows = []
        for rep in range(args.reps):
            for name, tree in ((f"before ({args.base})", Path(tmp)), ("after (working tree)", None)):
                C.log(f"rep {rep + 1}: {name} ...")
                rows.append((name, os.getloadavg()[0], run_child(tree, args.family, dict(changes))))
    settings = " ".join(args.set) or "as in bench_suite"
    print(f"\n{args.family} ({settings}), {time.strftime('%Y-%m-%d %H:%M')}, alternating, {args.reps} each:\n")
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
