"""Experiment families, one folder per paper; `interface` is what a family writes, `registry` finds them.
`from_flax` and `from_equinox` (jaxmem.experiments.adapters) make one from a flax or equinox module."""

import importlib

ADAPTERS = {
    "from_flax": "jaxmem.experiments.adapters.flax_modules",
    "from_equinox": "jaxmem.experiments.adapters.equinox_modules",
}


def __getattr__(name: str):
    """The adapters, imported on first use: jaxmem needs neither flax nor equinox until one is used."""
    if name not in ADAPTERS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    try:
        return getattr(importlib.import_module(ADAPTERS[name]), name)
    except ModuleNotFoundError as err:
        raise ImportError(f"jaxmem.experiments.{name} needs {err.name}: pip install {err.name}") from err
