"""The `jaxmem` command line: `main` parses and dispatches; `views` (list, dry run), `status`, `compare`
render what it shows; `estimate` costs a sweep, `overrides` reads `--set`, `errors` maps errors to exit codes."""

from jaxmem.cli.main import main

__all__ = ["main"]
