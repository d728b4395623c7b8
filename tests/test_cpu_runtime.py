"""The CPU intra-op pool jaxmem asks for (jaxmem/cpu_runtime.py), and the deadlock it prevents."""

from __future__ import annotations

import subprocess
import sys

import pytest

from jaxmem import cpu_runtime


@pytest.mark.parametrize(
    ("environ", "version", "expected"),
    [
        ({}, (0, 10), "1"),  # the affected jaxlib: one thread
        ({}, (0, 11), None),  # fixed upstream: XLA's default
        ({}, None, None),  # jaxlib's version unknown: leave XLA alone
        ({"PJRT_NPROC": "4"}, (0, 10), None),  # the user's own setting wins
        ({"NPROC": "3"}, (0, 10), None),
        ({"JAXMEM_CPU_THREADS": "0"}, (0, 10), None),  # 0: XLA's default
        ({"JAXMEM_CPU_THREADS": "2"}, (0, 11), "2"),
    ],
)
def test_pool_threads(environ, version, expected):
    assert cpu_runtime.pool_threads(environ, version) == expected


def test_a_thread_count_that_is_not_a_number_is_refused():
    with pytest.raises(ValueError, match="JAXMEM_CPU_THREADS must be a thread count"):
        cpu_runtime.pool_threads({"JAXMEM_CPU_THREADS": "many"}, (0, 10))


def test_configure_sets_pjrt_nproc_only_where_asked():
    environ = {"JAXMEM_CPU_THREADS": "3"}
    assert cpu_runtime.configure(environ) == "3" and environ["PJRT_NPROC"] == "3"
    environ = {"PJRT_NPROC": "5"}
    assert cpu_runtime.configure(environ) is None and environ == {"PJRT_NPROC": "5"}


# Two batched QRs that XLA runs at once (Haar frames at d = 64, as the chen_li24 teachers draw them):
# with jaxlib 0.10's default pool, 8 of 10 processes of 200 executions hung (benchmarks/RESULTS_cpu_threads.md).
QR_PROGRAM = """
import jaxmem, jax, jax.numpy as jnp
from jaxmem.experiments import draws
@jax.jit
def frames(key):
    g = draws.normal_matrices(key, [(2, 64, 64)] * 2)
    return jnp.einsum("mir,mjr->mij", draws.haar(g[0]) * (jnp.arange(64) < 8), draws.haar(g[1]))
for i in range(300):
    frames(jax.random.key(i)).block_until_ready()
print("done")
"""


def test_concurrent_batched_qr_programs_return():
    """Importing jaxmem before JAX creates its CPU backend is enough: the program returns every time."""
    env = {"PATH": "/usr/bin:/bin", "JAX_PLATFORMS": "cpu"}  # (with JAXMEM_CPU_THREADS=0 it hangs)
    result = subprocess.run([sys.executable, "-c", QR_PROGRAM], env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0 and result.stdout.strip() == "done", result.stderr[-2000:]
