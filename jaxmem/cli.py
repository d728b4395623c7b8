"""The `jaxmem` command: run, status, report, list."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from jaxmem import catalog


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="jaxmem", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run or resume a sweep spec (TOML file or shipped sweep name)")
    run.add_argument("spec")
    run.add_argument("--preset", default=None, help="preset from the spec (default: quick, if the spec has one)")
    run.add_argument("--out", default=None, help="output folder (default: results/<spec>-<preset>)")
    run.add_argument("--quiet", action="store_true", help="plain log lines instead of a live progress bar")
    run.add_argument("--dry-run", action="store_true", help="plan only: buckets, slots, FLOPs and memory; no compile")
    status = sub.add_parser("status", help="progress of a sweep in an output folder")
    status.add_argument("out")
    rep = sub.add_parser("report", help="write tables, plot and report.md for an output folder")
    rep.add_argument("out")
    sub.add_parser("list", help="experiments and shipped sweeps")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="[jaxmem] %(message)s")
    try:
        return COMMANDS[args.command](args)
    except catalog.USER_ERRORS as err:
        print(f"jaxmem: error: {err}", file=sys.stderr)
        return catalog.exit_code(err)
    except BrokenPipeError:  # output piped into `head` and the like
        return 0


def _run(args) -> int:
    from jaxmem import driver

    spec = catalog.load_spec(args.spec, args.preset)
    if args.dry_run:
        print(catalog.dry_run(spec))
        return 0
    out = Path(args.out or Path("results") / f"{spec.name}-{spec.preset or 'base'}")
    try:
        report = driver.run_sweep(spec, out, quiet=args.quiet)
    except driver.Interrupted as err:
        print(f"jaxmem: {err}", file=sys.stderr)
        return driver.EXIT_TERMINATED if err.signum == 15 else driver.EXIT_INTERRUPTED
    print(f"results: {out}/results.sqlite\nreport:  {report}")
    return 0


def _status(args) -> int:
    print(catalog.status(Path(args.out)))
    return 0


def _report(args) -> int:
    from jaxmem.reporting import report

    print(report(catalog.existing_output(Path(args.out))))
    return 0


def _list(args) -> int:
    print(catalog.listing())
    return 0


COMMANDS = {"run": _run, "status": _status, "report": _report, "list": _list}

if __name__ == "__main__":
    sys.exit(main())
