"""Safe arithmetic expressions used in sweep specs (bounds, derived fields, report guides).

Only numbers, names bound by the caller, arithmetic operators and a fixed set of math
functions are allowed; anything else is rejected with a message naming the expression.
"""

from __future__ import annotations

import ast
import functools
import math
import operator
from typing import Mapping

FUNCTIONS = {
    f.__name__: f
    for f in (math.log, math.log2, math.log10, math.exp, math.sqrt, math.floor, math.ceil, round, min, max, abs, int)
}

_BINARY = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY = {ast.UAdd: operator.pos, ast.USub: operator.neg}
SYMBOLS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//", ast.Mod: "%", ast.Pow: "**"}
SYMBOLS |= {ast.UAdd: "+x", ast.USub: "-x"}  # how each operator is written (docs/spec.md lists them)


MAX_EXPONENT = 1024
MAX_BITS = 4096  # integer powers beyond 2**4096 are refused: no size needs them, and they can exhaust memory


class ExpressionError(ValueError):
    """An expression is malformed, uses a forbidden construct or an unknown name."""


def names_in(expression: str) -> set[str]:
    """The free variable names an expression refers to (function names excluded)."""
    tree = _parse(expression)
    called = {n.func.id for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} - called


def evaluate(expression: str | int | float, names: Mapping[str, float]) -> float:
    """Evaluate `expression` with the variables in `names`; numbers pass through unchanged."""
    if isinstance(expression, (int, float)) and not isinstance(expression, bool):
        return expression
    if not isinstance(expression, str):
        raise ExpressionError(f"expected a number or an expression string, got {expression!r}")
    return _eval(_parse(expression).body, expression, names)


@functools.lru_cache(maxsize=4096)
def _parse(expression: str) -> ast.Expression:
    """The expression's tree, every construct in it allowed (so a spec's check catches what evaluating
    it later would refuse); parsed once per expression (a paper-size plan evaluates a few thousand times)."""
    try:
        tree = ast.parse(expression, mode="eval")
    except SyntaxError as err:
        raise ExpressionError(f"cannot parse expression {expression!r}: {err.msg}") from None
    for node in ast.walk(tree.body):
        if problem := _disallowed(node):
            raise ExpressionError(f"expression {expression!r} {problem}")
    return tree


def _disallowed(node: ast.AST) -> str | None:
    """Why one node of an expression is not allowed, or None."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitXor):
        return "uses '^', a bitwise operator: write a power as '**'"
    if isinstance(node, ast.Call):
        if not isinstance(node.func, ast.Name) or node.func.id not in FUNCTIONS:
            return f"calls a function that is not allowed (allowed: {', '.join(FUNCTIONS)})"
        return "passes a keyword argument" if node.keywords else None
    if isinstance(node, ast.Constant):
        ok = isinstance(node.value, (int, float)) and not isinstance(node.value, bool)
        return None if ok else f"holds {node.value!r}, not a number"
    allowed = (ast.Name, ast.Load, ast.BinOp, ast.UnaryOp, *_BINARY, *_UNARY)
    return None if isinstance(node, allowed) else f"uses a construct that is not allowed: {ast.dump(node)[:60]}"


def _eval(node: ast.AST, source: str, names: Mapping[str, float]):
    """The value of a node of a tree that `_parse` allowed."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        if node.id not in names:
            known = ", ".join(sorted(names)) or "none"
            raise ExpressionError(f"unknown name {node.id!r} in expression {source!r} (known: {known})")
        value = names[node.id]
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            raise ExpressionError(f"{node.id} = {value!r} is not a number, in expression {source!r}")
        return value
    if isinstance(node, ast.UnaryOp):
        return _UNARY[type(node.op)](_eval(node.operand, source, names))
    if isinstance(node, ast.Call):
        function, args = FUNCTIONS[node.func.id], [_eval(a, source, names) for a in node.args]
    else:
        function, args = _BINARY[type(node.op)], [_eval(node.left, source, names), _eval(node.right, source, names)]
        if isinstance(node.op, ast.Pow) and abs(args[1]) > MAX_EXPONENT:
            raise ExpressionError(f"exponent too large in {source!r} (at most {MAX_EXPONENT})")
        if isinstance(node.op, ast.Pow) and isinstance(args[0], int) and args[0].bit_length() * args[1] > MAX_BITS:
            raise ExpressionError(f"{source!r} exceeds 2**{MAX_BITS}")
    try:
        return function(*args)
    except (ZeroDivisionError, OverflowError, ValueError, TypeError) as err:
        raise ExpressionError(f"cannot evaluate {source!r}: {err}") from None
