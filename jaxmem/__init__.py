"""jaxmem: whole capacity grids, threshold searches and trajectories of transformer-theory
experiments as a few jit-compiled, vmapped XLA programs."""

__version__ = "0.1.0"

from jaxmem.persistence.store import load_results  # noqa: E402

__all__ = ["__version__", "load_results"]
