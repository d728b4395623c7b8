"""`python -m jaxmem.cli ...`: the `jaxmem` command."""

import sys

from jaxmem.cli.main import main

sys.exit(main())
