"""The `jaxmem` command: run, status, report, list."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path

from jaxmem.cli import views
from jaxmem.engine import compile_cache
from jaxmem.driver import distributed
from jaxmem.engine import device_memory


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="jaxmem", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run or resume a sweep spec (TOML file or shipped sweep name)")
    run.add_argument("spec")
    run.add_argument("--preset", default=None, help="preset from the spec (default: quick, if the spec has one)")
    run.add_argument("--out", default=None, help="output folder (default: results/<spec>-<preset>)")
    run.add_argument("--quiet", action="store_true", help="plain log lines instead of a live progress bar")
    run.add_argument(
        "--dry-run",
        action="store_true",
        help="plan only: buckets, chunks, slots, compiles, FLOPs and memory; no compile",
    )
    run.add_argument(
        "--compile", action="store_true", help="with --dry-run: compile each bucket for XLA's memory analysis"
    )
    run.add_argument(
        "--memory-cap",
        type=_memory_cap,
        default=os.environ.get(device_memory.CAP_ENV, str(device_memory.DEFAULT_CAP)),
        help=f"memory a program may use per device: a fraction of the device's (default "
        f"{device_memory.DEFAULT_CAP}) or a size such as 12GiB; env {device_memory.CAP_ENV}",
    )
    run.add_argument(
        "--no-compile-cache",
        action="store_true",
        help=f"do not use the persistent compilation cache (default location ~/.cache/jaxmem/xla or "
        f"${compile_cache.DIR_ENV}; also off with {compile_cache.SWITCH_ENV}=0)",
    )
    multi = run.add_argument_group(
        "multi-process runs", "the same command on every process; flags fall back to the JAXMEM_* variables"
    )
    multi.add_argument(
        "--coordinator",
        help=f"HOST:PORT of process 0's coordinator, or 'auto' to detect Slurm, Open MPI or a TPU pod; "
        f"env {distributed.COORDINATOR_ENV}",
    )
    multi.add_argument("--num-processes", type=int, help=f"processes in the job; env {distributed.COUNT_ENV}")
    multi.add_argument("--process-id", type=int, help=f"this process, 0 to N-1; env {distributed.INDEX_ENV}")
    multi.add_argument(
        "--coordinator-timeout",
        type=float,
        default=300.0,
        help="seconds to wait for the coordinator and for every process to join (default 300)",
    )
    status = sub.add_parser("status", help="progress of a sweep in an output folder")
    status.add_argument("out")
    rep = sub.add_parser("report", help="write tables, plot and report.md for an output folder")
    rep.add_argument("out")
    sub.add_parser("list", help="experiments and shipped sweeps")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="[jaxmem] %(message)s")
    try:
        return COMMANDS[args.command](args)
    except views.USER_ERRORS as err:
        print(f"jaxmem: error: {err}", file=sys.stderr)
        return views.exit_code(err)
    except BrokenPipeError:  # output piped into `head` and the like
        return 0


def _run(args) -> int:
    from jaxmem.driver import sweep as driver

    cluster = distributed.cluster_from(args.coordinator, args.num_processes, args.process_id)
    process_id, count = (
        (0, 1) if cluster is None or args.dry_run else distributed.initialize(cluster, args.coordinator_timeout)
    )
    spec = views.load_spec(args.spec, args.preset)
    if args.dry_run:
        print(views.dry_run(spec, args.memory_cap, compile=args.compile))
        return 0
    cache = None if args.no_compile_cache else compile_cache.cache_dir()
    if cache is not None:
        compile_cache.enable(cache)
    out = Path(args.out or Path("results") / f"{spec.name}-{spec.preset or 'base'}")
    try:
        if count > 1:
            from jaxmem.driver.multihost import run_process

            report = run_process(spec, out, process_id, count, quiet=args.quiet, memory_cap=args.memory_cap)
        else:
            report = driver.run_sweep(spec, out, quiet=args.quiet, memory_cap=args.memory_cap)
    except driver.Interrupted as err:
        print(f"jaxmem: {err}", file=sys.stderr)
        return driver.EXIT_TERMINATED if err.signum == 15 else driver.EXIT_INTERRUPTED
    if report is None:
        print(f"process {process_id} of {count}: done; process 0 merged the results into {out}/results.sqlite")
    else:
        print(f"results: {out}/results.sqlite\nreport:  {report}")
    return 0


def _memory_cap(text: str) -> float | int:
    try:
        return device_memory.parse_cap(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def _status(args) -> int:
    print(views.status(Path(args.out)))
    return 0


def _report(args) -> int:
    from jaxmem.report.from_store import report

    print(report(views.existing_output(Path(args.out))))
    return 0


def _list(args) -> int:
    print(views.listing())
    return 0


COMMANDS = {"run": _run, "status": _status, "report": _report, "list": _list}

if __name__ == "__main__":
    sys.exit(main())
