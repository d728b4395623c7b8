import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))


@pytest.fixture(scope="session", autouse=True)
def compile_cache_in_tmp(tmp_path_factory):
    """`jaxmem run` subprocesses cache compiled programs in a temporary folder, never in the user's home."""
    os.environ["JAXMEM_CACHE_DIR"] = str(tmp_path_factory.mktemp("xla_cache"))
