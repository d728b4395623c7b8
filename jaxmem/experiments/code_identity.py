"""The code behind an experiment, as a fingerprint kept with its results: one hash per source file of the
module that defines it and of the local modules it imports, found by reading their `import` statements
(never by importing them: `jaxmem status` computes it without JAX).

Local means: a user's module and the modules of its own package, or any other file outside the standard
library, the installed packages and jaxmem; for a shipped family, its module and the modules of
jaxmem.experiments it imports (the engine's code is not the experiment's). A file is hashed as its syntax
tree, so comments and formatting do not change the fingerprint; a docstring or any code does.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.machinery
import json
import site
import sys
import sysconfig
from pathlib import Path

from jaxmem.version import __version__

RECORD = "experiment_code"  # meta key of a results store: {module: hash} of the code that made its results
MODULE = "experiment_module"  # meta key: the module defining the experiment (what RECORD fingerprints)
JAXMEM = Path(__file__).resolve().parents[1]
SHIPPED_ROOT = JAXMEM / "experiments"  # a shipped family's local modules live here
LIBRARY_PATHS = (*map(sysconfig.get_paths().get, ("stdlib", "purelib", "platlib")), site.USER_SITE)
LIBRARIES = tuple({Path(p).resolve() for p in LIBRARY_PATHS if p})  # the standard library, JAX, optax, ...


def owner(path: Path, root: Path | None) -> bool | None:
    """True for a file of the user's (inside `root`, or outside jaxmem and the libraries), False for
    jaxmem's, None for a library's."""
    if root is not None and (path == root or root in path.parents):
        return True
    if JAXMEM in path.parents:
        return False
    return None if any(lib == path or lib in path.parents for lib in LIBRARIES) else True


def of_experiment(module: str | None, folder: str = "") -> dict[str, str]:
    """The code fingerprint of the experiment defined in `module` (see `fingerprint`); a shipped family's
    also holds jaxmem's version. {} for an experiment of no known module (one registered by Python code)."""
    code = fingerprint(module, folder) if module else {}
    return {**code, "jaxmem": __version__} if code and module.partition(".")[0] == "jaxmem" else code


def fingerprint(module: str, folder: str = "") -> dict[str, str]:
    """{module name: hash of its syntax tree} for `module` and the local modules it imports, transitively,
    looked up in `folder` first, then on the Python path; {} when `module` cannot be found."""
    search = [folder, *sys.path] if folder else list(sys.path)
    first = source_file(module, search) or loaded_file(module)
    if first is None:
        return {}
    root = SHIPPED_ROOT if module.partition(".")[0] == "jaxmem" else package_root(module, first)
    found, queue = {}, [(module, first)]
    while queue:
        name, file = queue.pop()
        if name in found:
            continue
        tree = parsed(file)
        found[name] = tree_hash(tree, file)
        for imported in imported_names(tree, name, file.name == "__init__.py") if tree is not None else ():
            path = source_file(imported, search) or loaded_file(imported)
            if path is not None and imported not in found and owner(path, root):
                queue.append((imported, path))
    return dict(sorted(found.items()))


def changed_modules(recorded: dict[str, str], current: dict[str, str]) -> list[str]:
    """The modules whose code differs between two fingerprints (added, removed or edited), sorted."""
    return sorted(name for name in recorded.keys() | current.keys() if recorded.get(name) != current.get(name))


UNRECORDED, NOT_FOUND, UNCHANGED, CHANGED = "not recorded", "not found", "unchanged", "changed"


def compared(meta: dict) -> tuple[str, list[str]]:
    """The experiment code of a store with `meta` against the code as it is now: (UNRECORDED, []) for a
    store that never recorded it, (NOT_FOUND, []) when its module cannot be found from here, (UNCHANGED,
    []) or (CHANGED, the entries that changed: see `changed_modules`)."""
    if RECORD not in meta:
        return UNRECORDED, []
    recorded = json.loads(meta[RECORD])
    current = of_experiment(meta.get(MODULE) or None, meta.get("experiment_folder", ""))
    if recorded and not current:
        return NOT_FOUND, []
    changed = changed_modules(recorded, current)
    return (CHANGED, changed) if changed else (UNCHANGED, [])


def state(meta: dict) -> str:
    """The experiment code of a store with `meta`, in words (see `compared`)."""
    outcome, changed = compared(meta)
    return {
        UNRECORDED: "not recorded (results stored before jaxmem recorded it); taken as unchanged",
        NOT_FOUND: f"module {meta.get(MODULE)} not found from here; cannot tell whether it changed",
        UNCHANGED: "unchanged since the results were made",
        CHANGED: f"CHANGED since the results were made: {describe_changes(changed)}",
    }[outcome]


def describe_changes(changed: list[str]) -> str:
    """The changed entries of a fingerprint in words: "module relu_teacher", "modules a, b", "jaxmem's
    version"."""
    modules = [name for name in changed if name != "jaxmem"]
    words = [f"module{'s' if len(modules) > 1 else ''} {', '.join(modules)}"] if modules else []
    return " and ".join(words + (["jaxmem's version"] if "jaxmem" in changed else []))


def package_root(module: str, file: Path) -> Path:
    """The folder of `module`'s top-level package, or its own file for a top-level module."""
    depth = module.count(".") + (file.name == "__init__.py")
    return file.parents[depth - 1] if depth else file


def source_file(module: str, search: list[str]) -> Path | None:
    """The .py file of `module` on `search` (packages: their __init__.py), found without importing anything;
    jaxmem's own modules where this jaxmem lives (an editable install is on no search path)."""
    spec, locations = None, [str(JAXMEM.parent)] if module.partition(".")[0] == "jaxmem" else search
    for part in module.split("."):
        spec = importlib.machinery.PathFinder.find_spec(part, locations) if locations is not None else None
        if spec is None:
            return None
        locations = list(spec.submodule_search_locations) if spec.submodule_search_locations is not None else None
    origin = getattr(spec, "origin", None)
    return Path(origin).resolve() if origin and origin.endswith(".py") else None


def loaded_file(module: str) -> Path | None:
    """The .py file `module` was imported from in this process, if it was (e.g. from an editable install)."""
    origin = getattr(sys.modules.get(module), "__file__", None)
    return Path(origin).resolve() if origin and origin.endswith(".py") else None


def parsed(file: Path) -> ast.Module | None:
    try:
        return ast.parse(file.read_bytes(), filename=str(file))
    except (OSError, SyntaxError, ValueError):
        return None


def tree_hash(tree: ast.Module | None, file: Path) -> str:
    """The hash of a parsed file's syntax tree; of its bytes when it does not parse ("" when unreadable)."""
    if tree is not None:
        blob = ast.dump(tree, annotate_fields=False).encode()
    else:
        try:
            blob = file.read_bytes()
        except OSError:
            return ""
    return hashlib.sha256(blob).hexdigest()[:16]


def imported_names(tree: ast.Module, module: str, is_package: bool) -> list[str]:
    """Every module name `tree` imports (anywhere in it), relative imports resolved against `module`; for
    `from a import b`, both `a` and `a.b` (b may be a submodule)."""
    package = module if is_package else module.rpartition(".")[0]
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = absolute(node.module or "", node.level, package)
            if base is None:
                continue
            if base:
                names.append(base)
            names += [f"{base}.{alias.name}" if base else alias.name for alias in node.names if alias.name != "*"]
    return names


def absolute(name: str, level: int, package: str) -> str | None:
    """The absolute name of `from {'.' * level}{name} import …` inside `package` (None: beyond its top)."""
    if level == 0:
        return name
    parts = package.split(".") if package else []
    if level - 1 > len(parts) or (level - 1 == len(parts) and not name):
        return None
    base = parts[: len(parts) - (level - 1)]
    return ".".join([*base, name] if name else base)
