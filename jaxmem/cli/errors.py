"""The user errors the CLI reports (one line, no traceback) and their exit codes, found without importing
the modules that define them: a class whose module was never imported cannot have raised."""

from __future__ import annotations

import errno
import sys


class UsageError(ValueError):
    """A command-line argument that cannot work (e.g. an output folder that is a file): exit 2."""


EXIT_CODES = (  # (module, class, exit code), most specific first
    ("jaxmem.spec.sweep", "SpecError", 2),
    ("jaxmem.experiments.user_errors", "ExperimentError", 2),  # a user's experiment raised or broke a rule
    ("jaxmem.cli.errors", "UsageError", 2),
    ("builtins", "FileNotFoundError", 2),
    ("jaxmem.persistence.lock", "LockError", 3),
    ("jaxmem.persistence.store", "StoreError", 4),
    ("builtins", "PermissionError", 4),  # a file of the output folder that may not be written (its message names it)
    ("jaxmem.driver.distributed", "DistributedError", 5),
    ("jaxmem.engine.device_memory", "OutOfMemory", 6),
)


def exit_code(err: BaseException) -> int | None:
    """The exit code of a user error, or None for anything else (a bug: its traceback is shown)."""
    for module, name, code in EXIT_CODES:
        cls = getattr(sys.modules.get(module), name, None)
        if cls is not None and isinstance(err, cls):
            return code
    if isinstance(err, OSError) and err.errno in (errno.ENOSPC, errno.EDQUOT):
        return 4  # a full disk under a file written outside the store and report tables (e.g. a plot)
    return None


def message(err: BaseException) -> str:
    """A user error's text, each problem of a spec error listed once: a problem repeated for every grid
    point it hits (e.g. after a typo in search.variable) is shown once with the count."""
    problems = getattr(err, "problems", None)
    if not isinstance(problems, list) or len(set(problems)) == len(problems):
        return str(err)
    counts: dict[str, int] = {}
    for problem in problems:
        counts[problem] = counts.get(problem, 0) + 1
    head = str(err).split("\n", 1)[0]
    lines = [f"  - {p}" + (f" ({n} times)" if n > 1 else "") for p, n in counts.items()]
    return "\n".join([head, *lines])
