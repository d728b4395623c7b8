"""The `jaxmem` command: run, status, report, list, compare."""

from __future__ import annotations

import argparse
import atexit
import functools
import json
import logging
import os
import signal
import sys
import threading
import traceback
from pathlib import Path

from jaxmem.version import __version__
from jaxmem.cli import supervise
from jaxmem.cli.errors import UsageError, exit_code, message

INTERRUPTED = "stopped by SIGINT; stored results are kept, rerun the same command to finish"
# commands that never import JAX: the run options (which do) are not built
LIGHT = ("status", "compare", "schema", "export", "import")


def main(argv: list[str] | None = None) -> int:
    """The command's exit code. A Ctrl-C outside a sweep's own handler (starting: imports, the spec, the plan;
    writing the report) ends it at once with one line and exit 130 (stop_at_once). As the command (no `argv`),
    a multi-process run works in a supervised child (jaxmem.cli.supervise)."""
    if threading.current_thread() is not threading.main_thread():  # (signal handlers are the main thread's)
        return command(argv)
    previous = signal.signal(signal.SIGINT, stop_at_once)
    if argv is None:  # the command: stop_at_once stays through Python's exit, the last of it ignores Ctrl-C
        atexit.register(signal.signal, signal.SIGINT, signal.SIG_IGN)  # (first registered, so run last)
        return supervise.as_command(sys.argv[1:], command)
    try:
        return command(argv)
    finally:
        signal.signal(signal.SIGINT, previous)


def stop_at_once(signum, frame) -> None:
    """The SIGINT handler outside a sweep: one line, exit 130, at once. As safe as kill -9 (what is stored stays,
    a lease left behind names a dead process: the next run takes it over); a KeyboardInterrupt instead could
    be raised inside JAX's import, through native code (an abort) or in a gc callback (a traceback)."""
    os.write(sys.stderr.fileno(), f"jaxmem: {INTERRUPTED}\n".encode())  # (print could be mid-print: reentrant)
    os._exit(130)


def command(argv: list[str] | None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(run_options=not argv or argv[0] not in LIGHT)
    args = parser.parse_args(argv)
    handler = logging.StreamHandler()
    handler.setFormatter((logging.Formatter if getattr(args, "debug", False) else BriefLog)("[jaxmem] %(message)s"))
    logging.basicConfig(level=logging.WARNING, handlers=[handler])
    try:
        return COMMANDS[args.command](args)
    except BrokenPipeError:  # output piped into `head` and the like
        return 0
    except Exception as err:
        code = exit_code(err)
        if code is None:
            raise
        if getattr(args, "debug", False):
            traceback.print_exception(err)
        else:
            print(f"jaxmem: error: {message(err)}", file=sys.stderr)
        return code


class BriefLog(logging.Formatter):
    """Log lines without the tracebacks libraries attach (orbax's writer threads on a full disk, say): the
    exception's last line only; --debug shows them whole. The record keeps no brief text for other handlers."""

    def format(self, record: logging.LogRecord) -> str:
        cached, record.exc_text = record.exc_text, None
        try:
            return super().format(record)
        finally:
            record.exc_text = cached

    def formatException(self, exc_info) -> str:
        return "  " + traceback.format_exception_only(exc_info[1])[-1].strip()


def build_parser(run_options: bool = True) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="jaxmem", description=__doc__)
    parser.add_argument("--version", action="version", version=f"jaxmem {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run or resume a sweep spec (TOML file or shipped sweep name)")
    if run_options:
        add_run_options(run)
    status = sub.add_parser("status", help="finished, interrupted or running, with counts (reads only)")
    status.add_argument("out")
    rep = sub.add_parser("report", help="write tables, plot and report.md for an output folder")
    rep.add_argument("out")
    rep.add_argument(
        "--spec",
        help="re-render with this spec file's [report] table (same sweep otherwise; the store keeps its own)",
    )
    rep.add_argument("--preset", default=None, help="with --spec: its preset (default: the folder's)")
    export = sub.add_parser("export", help="an output folder's results as Parquet files and a manifest, to commit")
    export.add_argument("out")
    export.add_argument("--to", required=True, help="the export's folder (e.g. sweeps/<family>/data/<sweep>-<preset>)")
    imported = sub.add_parser("import", help="rebuild an output folder's results.sqlite from an export")
    imported.add_argument("export")
    imported.add_argument("--out", required=True, help="the output folder to create (`jaxmem report` it next)")
    listing = sub.add_parser("list", help="experiments and shipped sweeps, or with --columns the tables' columns")
    listing.add_argument("--columns", action="store_true", help="every column of every table, explained")
    listing.add_argument("--spec", action="store_true", help="every table and key of a sweep spec, explained")
    schema = sub.add_parser("schema", help="the JSON Schema of sweep specs (TOML editors check specs against it)")
    schema.add_argument("--out", help="write it to this file (default: print it)")
    schema.add_argument("--docs", action="store_true", help="instead, the spec's reference (docs/spec.md)")
    compare = sub.add_parser("compare", help="where two sweeps' results differ")
    compare.add_argument("first")
    compare.add_argument("second")
    compare.add_argument(
        "--tolerance", type=float, default=1e-6, help="metrics differing by more (relative) are shown (default 1e-6)"
    )
    return parser


def add_run_options(run: argparse.ArgumentParser) -> None:
    from jaxmem.driver import distributed
    from jaxmem.engine import compile_cache, device_memory

    run.add_argument("spec")
    run.add_argument("--preset", default=None, help="preset from the spec (default: quick, if the spec has one)")
    run.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="PATH=VALUE",
        help="override a spec value, e.g. --set grid.d=[8,16] --set seeds=5 (TOML values; wins over the preset; "
        "stored with the results; the default --out gets a suffix)",
    )
    run.add_argument("--out", default=None, help="output folder (default: results/<spec>-<preset>)")
    run.add_argument("--quiet", action="store_true", help="plain log lines instead of a live progress bar")
    run.add_argument(
        "--restart",
        action="store_true",
        help="discard the results the output folder holds (e.g. made by an experiment's earlier code) and start over",
    )
    run.add_argument(
        "--debug",
        action="store_true",
        help="on an error, the full traceback (JAX's frames too) instead of one message and the experiment's frames",
    )
    run.add_argument(
        "--dry-run",
        action="store_true",
        help="plan only: buckets, chunks, slots, compiles, FLOPs, memory, time estimate; no compile",
    )
    run.add_argument(
        "--compile", action="store_true", help="with --dry-run: compile each bucket for XLA's memory analysis"
    )
    run.add_argument(
        "--verbose", action="store_true", help="with --dry-run: a line per program besides the plan's table"
    )
    run.add_argument(
        "--plan-for",
        metavar="KIND",
        help="with --dry-run: the plan another device kind would get (h100, h200, tpu-v5e; KINDxN for N of them)",
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


def output_folder(args, spec) -> Path:
    """--out, or results/<spec>-<preset>, with a tag of the --set overrides (another sweep, another folder);
    UsageError for a name that cannot be a folder (jaxmem.cli.paths.checked_folder)."""
    from jaxmem.cli.overrides import tag
    from jaxmem.cli.paths import checked_folder

    if args.out is not None:
        return checked_folder(args.out, "--out")
    suffix = f"-set-{tag(args.overrides)}" if args.overrides else ""
    return checked_folder(str(Path("results") / f"{spec.name}-{spec.preset or 'base'}{suffix}"))


def _run(args) -> int:
    refuse_an_unusable_lock_file(args)
    from jaxmem.cli import views
    from jaxmem.cli.status import ORIGIN, resume_command
    from jaxmem.driver import distributed
    from jaxmem.driver import sweep as driver
    from jaxmem.engine import compile_cache

    if args.debug:
        import jax

        jax.config.update("jax_traceback_filtering", "off")
    cluster = distributed.cluster_from(args.coordinator, args.num_processes, args.process_id)
    process_id, count = (
        (0, 1) if cluster is None or args.dry_run else distributed.initialize(cluster, args.coordinator_timeout)
    )
    spec = views.load_spec(args.spec, args.preset, args.overrides)
    out = output_folder(args, spec)
    if args.plan_for and not args.dry_run:
        raise UsageError("--plan-for shows a plan: use it with --dry-run")
    if args.dry_run:
        target = planned_target(args.plan_for) if args.plan_for else None
        print(views.dry_run(spec, args.memory_cap, args.compile, out, target, args.verbose))
        return 0
    if args.restart and count > 1:
        raise UsageError(f"--restart is for a single-process run; to start a multi-process job over, delete {out}")
    noted = {ORIGIN: views.origin(args.spec, args.overrides)}  # for `jaxmem status` to suggest resuming it
    cache = None if args.no_compile_cache else compile_cache.cache_dir()
    if cache is not None:
        compile_cache.enable(cache)
    try:
        if count > 1:
            from jaxmem.driver.multihost import peers_lost, run_process

            resume = resume_command({ORIGIN: json.dumps(noted[ORIGIN]), "preset": spec.preset or ""}, out)
            if process_id:  # should process 0, the runtime's service, die, the runtime aborts this process
                coordinator = peers_lost(out, process_id, count, [0], distributed.DISCONNECTED)
                supervise.bequeath(lost_message(resume, coordinator))
            lost = functools.partial(peer_lost, resume)
            report = run_process(
                spec, out, process_id, count, lost, quiet=args.quiet, memory_cap=args.memory_cap, noted=noted
            )
        else:
            report = driver.run_sweep(
                spec,
                out,
                quiet=args.quiet,
                memory_cap=args.memory_cap,
                noted=noted,
                hard_exit=True,
                restart=args.restart,
            )
    except driver.Interrupted as err:
        print(f"jaxmem: {err}", file=sys.stderr)
        code = driver.EXIT_TERMINATED if err.signum == 15 else driver.EXIT_INTERRUPTED
        if err.abandoned:  # the abandoned program or compile still runs: Python's exit would wait for it
            sys.stdout.flush()
            sys.stderr.flush()
            if count > 1:
                distributed.leave()
            os._exit(code)
        return code
    if report is None:
        print(f"process {process_id} of {count}: done; process 0 merged the results into {out}/results.sqlite")
    else:
        print(f"results: {out}/results.sqlite\nreport:  {report}")
    return 0


def peer_lost(resume: str, what: str) -> None:
    """End this process of a multi-process job that lost a peer (`what` happened), from the thread that
    saw it: one line, DistributedError's exit code, at once (the runtime would abort it, with a C++ trace)."""
    from jaxmem.driver.distributed import DistributedError

    print(lost_message(resume, what), file=sys.stderr)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(exit_code(DistributedError()))


def lost_message(resume: str, what: str) -> str:
    """The line of a process of a multi-process job that stops because it lost a peer (`what` happened)."""
    return f"jaxmem: error: {what}; resume with `{resume}` (one process, or the whole job again)"


def refuse_an_unusable_lock_file(args) -> None:
    """Refuse a run whose --out holds something other than a regular file as its lock file (a FIFO, a
    directory, a symbolic link) before loading the engine: in about a second instead of four."""
    from jaxmem.persistence.lock import lock_path, odd_lock_file

    if not args.out or args.dry_run:
        return
    try:
        unusable = odd_lock_file(lock_path(Path(args.out)))
    except OSError:  # no folder there to hold one (a file, a name too long): --out's own check says so
        return
    if unusable is not None:
        raise unusable


def planned_target(name: str):
    from jaxmem.plan.target import named

    try:
        return named(name)
    except ValueError as err:
        raise UsageError(f"--plan-for: {err}") from None


def _memory_cap(text: str) -> float | int:
    from jaxmem.engine import device_memory

    try:
        return device_memory.parse_cap(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def _status(args) -> int:
    from jaxmem.cli.paths import checked_folder
    from jaxmem.cli.status import status

    print(status(checked_folder(args.out)))
    return 0


def _report(args) -> int:
    from jaxmem.cli.paths import checked_folder
    from jaxmem.cli.views import edited_report_table, existing_output
    from jaxmem.report.from_store import report

    out = existing_output(checked_folder(args.out))
    table = edited_report_table(args.spec, args.preset, out) if args.spec else None
    print(report(out, table))
    return 0


def _export(args) -> int:
    from jaxmem.cli.paths import checked_folder
    from jaxmem.cli.status import holds_results
    from jaxmem.persistence.shipped import export_results

    manifest = export_results(holds_results(checked_folder(args.out)), checked_folder(args.to, "--to"))
    print(f"exported {sum(f['rows'] for f in manifest['files'].values())} rows to {args.to}")
    return 0


def _import(args) -> int:
    from jaxmem.cli.paths import checked_folder
    from jaxmem.persistence.shipped import import_results

    print(f"results: {import_results(args.export, checked_folder(args.out, '--out'))}")
    return 0


def _list(args) -> int:
    if args.spec:
        from jaxmem.spec.document import reference

        print(reference())
        return 0
    if args.columns:
        from jaxmem.report.columns import describe

        print(describe())
        return 0
    from jaxmem.cli.views import listing

    print(listing())
    return 0


def _compare(args) -> int:
    from jaxmem.cli.compare import compare
    from jaxmem.cli.paths import checked_folder

    text, differ = compare(checked_folder(args.first), checked_folder(args.second), args.tolerance)
    print(text)
    return 1 if differ else 0


def _schema(args) -> int:
    from jaxmem.spec.document import reference, schema_text

    text = reference() + "\n" if args.docs else schema_text()
    if args.out is None:
        print(text, end="")
    else:
        Path(args.out).write_text(text)
    return 0


COMMANDS = {
    "run": _run,
    "status": _status,
    "report": _report,
    "export": _export,
    "import": _import,
    "list": _list,
    "compare": _compare,
    "schema": _schema,
}

if __name__ == "__main__":
    sys.exit(main())
