"""A user's experiment (`module:ATTRIBUTE`), guarded: what its functions raise, or return against the
interface's rules, comes out as an ExperimentError (the CLI's exit 2) whose first line names the experiment,
its module and attribute, and the function at fault, followed by the user's own frames only.

jaxmem's own bugs keep their full traceback: an exception is the user's only when the innermost of its
frames outside JAX, the other installed libraries and the standard library is the user's code (a frame of
jaxmem there makes it jaxmem's). The rules on what the functions return are checked as the engine traces
them, on one run's values (vmap shows a function its unbatched shapes): a broken rule surfaces before any
compile, named, instead of as an error deep in the engine.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import site
import sys
import sysconfig
import traceback
from pathlib import Path
from typing import Any, Callable, Mapping

import jax.numpy as jnp

from jaxmem.experiments.interface import Costs, Experiment, Reference

JAXMEM = Path(__file__).resolve().parents[1]
LIBRARY_PATHS = (*map(sysconfig.get_paths().get, ("stdlib", "purelib", "platlib")), site.USER_SITE)
LIBRARIES = tuple({Path(p).resolve() for p in LIBRARY_PATHS if p})  # the standard library, JAX, optax, ...
FRAMES_HEADER = "Traceback (most recent call last; the experiment's frames only, `jaxmem run --debug` shows all):"


class ExperimentError(ValueError):
    """A user's experiment failed: one of its functions raised, or returned what the engine cannot use. A
    ValueError, as a SpecError is: the report's reading of stored configs, which passes over those an
    experiment rejects (an older store's), goes on passing over them."""


@dataclasses.dataclass(frozen=True)
class UserCode:
    """Where a user's experiment lives: `label` names it in messages ("module:ATTRIBUTE"), `root` is its
    module's file or its top-level package's folder (None: only files outside jaxmem and the libraries)."""

    label: str
    root: Path | None = None

    def owns(self, filename: str) -> bool | None:
        """True for the user's file, False for jaxmem's, None for a library's (JAX, the standard library)."""
        if filename.startswith("<"):  # <frozen importlib._bootstrap>, code a library generated
            return None
        path = Path(filename).resolve()
        if self.root is not None and (path == self.root or self.root in path.parents):
            return True
        if JAXMEM in path.parents:
            return False
        return None if any(lib == path or lib in path.parents for lib in LIBRARIES) else True

    def raised(self, err: BaseException) -> bool:
        """Whether the user's code raised `err`: the innermost frame outside the libraries is the user's (for
        a SyntaxError, the file that does not parse)."""
        files = [frame.filename for frame in traceback.extract_tb(err.__traceback__)]
        if isinstance(err, SyntaxError) and err.filename:
            files.append(err.filename)
        owners = [self.owns(f) for f in files]
        return next((owner for owner in reversed(owners) if owner is not None), False)

    def frames(self, err: BaseException) -> list[str]:
        """The user's frames of `err`'s traceback, formatted as Python does (a SyntaxError: its file, line and
        caret)."""
        if isinstance(err, SyntaxError):
            return [line.rstrip("\n") for line in traceback.format_exception_only(err)[:-1]]
        mine = [frame for frame in traceback.extract_tb(err.__traceback__) if self.owns(frame.filename)]
        return [FRAMES_HEADER, *"".join(traceback.format_list(mine)).rstrip("\n").splitlines()] if mine else []

    def failure(self, what: str, err: BaseException) -> ExperimentError:
        """The ExperimentError telling that `what` (e.g. "experiment x (m:EXPERIMENT): init()") raised `err`."""
        first, *rest = str(err).splitlines() or [""]
        head = f"{what} raised {type(err).__name__}" + (f": {first}" if first else "")
        return ExperimentError("\n".join([head, *self.frames(err), *rest]))


def guarded(exp: Experiment, code: UserCode) -> Experiment:
    """`exp` with every function guarded (see the module doc); `init`, `loss` and `evaluate` also checked
    against the interface's rules on what they return."""
    metrics = tuple(dict.fromkeys(exp.metrics + exp.precondition))

    def guard(name: str, function: Callable | None, rule: Callable[[Any], str | None] = lambda out: None):
        if function is None:
            return None
        return _guard(function, f"experiment {exp.name} ({code.label}): {name}()", code, rule)

    costs = {f.name: guard(f"costs.{f.name}", getattr(exp.costs, f.name)) for f in dataclasses.fields(Costs)}
    reference = exp.reference
    if reference is not None:
        reference = Reference(guard("reference.check", reference.check), guard("reference.figure", reference.figure))
    return dataclasses.replace(
        exp,
        init=guard("init", exp.init, params_and_problem),
        evaluate=guard("evaluate", exp.evaluate, lambda out: scalar_metrics(out, metrics)),
        loss=guard("loss", exp.loss, scalar_loss),
        optimizer=guard("optimizer", exp.optimizer),
        resolve=guard("resolve", exp.resolve),
        check=guard("check", exp.check),
        costs=Costs(**costs),
        reference=reference,
    )


def _guard(function: Callable, what: str, code: UserCode, rule: Callable[[Any], str | None]) -> Callable:
    @functools.wraps(function)
    def call(*args, **kwargs):
        try:
            out = function(*args, **kwargs)
        except Exception as err:
            if not code.raised(err):
                raise
            raise code.failure(what, err) from err
        broken = rule(out)
        if broken:
            raise ExperimentError("\n".join([f"{what} {broken}", *defined_at(function)]))
        return out

    return call


def defined_at(function: Callable) -> list[str]:
    """Where `function` is defined, as a traceback line and its source line (none for a callable without code)."""
    code = getattr(inspect.unwrap(function), "__code__", None)
    if code is None:
        return []
    frame = traceback.FrameSummary(code.co_filename, code.co_firstlineno, code.co_name)
    return "".join(traceback.format_list([frame])).rstrip("\n").splitlines()


def params_and_problem(out) -> str | None:
    if isinstance(out, (tuple, list)) and len(out) == 2:
        return None
    return f"returned {described(out)}; init must return the pair (params, problem)"


def scalar_loss(out) -> str | None:
    if is_real_scalar(out, floating=True):
        return None
    return f"returned {described(out)}; the loss must be a floating-point scalar (shape ())"


def scalar_metrics(out, declared: tuple[str, ...]) -> str | None:
    """What is wrong with `evaluate`'s output: not a dict, a declared metric missing, or a metric that is not
    a real scalar; None when nothing is."""
    if not isinstance(out, Mapping):
        return f"returned {described(out)}; evaluate must return a dict {{metric: scalar}}"
    missing = [name for name in declared if name not in out]
    if missing:
        given = ", ".join(map(repr, out)) or "nothing"
        return f"returned no {', '.join(map(repr, missing))}, a declared metric (it returned {given})"
    for name, value in out.items():
        if not is_real_scalar(value):
            return f"returned {name!r} as {described(value)}; each metric must be a real scalar (shape ())"
    return None


def is_real_scalar(value, floating: bool = False) -> bool:
    """Whether `value` is one real number: a Python number or an array of shape () (a tracer, as traced)."""
    if isinstance(value, (bool, int, float)):
        return isinstance(value, float) or not floating
    dtype, shape = getattr(value, "dtype", None), getattr(value, "shape", None)
    if dtype is None or shape != ():
        return False
    kinds = (jnp.floating,) if floating else (jnp.floating, jnp.integer, jnp.bool_)
    return any(jnp.issubdtype(dtype, kind) for kind in kinds)


def described(value) -> str:
    """`value` in a message: an array by its shape and type, a string by itself, anything else by its type."""
    shape, dtype = getattr(value, "shape", None), getattr(value, "dtype", None)
    if shape is not None and dtype is not None:
        return f"a {dtype} scalar" if shape == () else f"an array of shape {tuple(shape)}"
    return f"the string {value!r}" if isinstance(value, str) else f"a {type(value).__name__}"


def package_root(module_name: str) -> Path | None:
    """The file or folder holding a user's module: the module's own file, or its top-level package's folder."""
    top = sys.modules.get(module_name.partition(".")[0])
    file = getattr(top, "__file__", None)
    if not file:
        return None
    path = Path(file).resolve()
    return path.parent if path.name == "__init__.py" else path
