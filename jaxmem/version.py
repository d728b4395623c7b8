"""jaxmem's version, on its own so that every layer may read it (pyproject.toml states the same)."""

__version__ = "0.1.0"
