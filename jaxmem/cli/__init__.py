"""The `jaxmem` command line: `main` parses and dispatches, `views` renders what it shows."""

from jaxmem.cli.main import main

__all__ = ["main"]
