"""jaxmem: whole capacity grids, threshold searches and trajectories of transformer-theory
experiments as a few jit-compiled, vmapped XLA programs.

    jaxmem.run(spec, out_dir, experiment=None)   # a sweep from Python (jaxmem.driver.api)
    jaxmem.load_results(out_dir, table="runs")   # its results as a DataFrame
"""

from jaxmem.version import __version__

from jaxmem import cpu_runtime  # noqa: E402

cpu_runtime.configure()  # before JAX creates its CPU backend (see jaxmem.cpu_runtime)


def __getattr__(name: str):
    """`load_results`, imported on first use (it loads pandas: the command line starts without waiting for it)."""
    if name == "load_results":
        from jaxmem.persistence.store import load_results

        return load_results
    raise AttributeError(f"module 'jaxmem' has no attribute {name!r}")


def run(*args, **kwargs):
    """Run (or resume) a sweep; see jaxmem.driver.api.run (imported on first use: it loads JAX)."""
    from jaxmem.driver.api import run as run_sweep

    return run_sweep(*args, **kwargs)


__all__ = ["__version__", "load_results", "run"]
