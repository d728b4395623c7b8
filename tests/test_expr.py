"""Tests for jaxmem.expr: the safe arithmetic used for bounds, derived fields and report guides."""

import math

import pytest

from jaxmem.spec.expr import FUNCTIONS, ExpressionError, evaluate, names_in


@pytest.mark.parametrize(
    "source, names, expected",
    [
        ("1 + 2 * 3", {}, 7),
        ("(1 + 2) * 3", {}, 9),
        ("7 / 2", {}, 3.5),
        ("7 // 2", {}, 3),
        ("7 % 3", {}, 1),
        ("2 ** 10", {}, 1024),
        ("-d + +d - d", {"d": 5}, -5),
        ("m * d", {"m": 3, "d": 8}, 24),
        ("m_over_d * d", {"m_over_d": 0.5, "d": 16}, 8.0),
        ("0.7 * N * log(N)", {"N": math.e}, 0.7 * math.e),
        ("floor(d / 3)", {"d": 8}, 2),
        ("ceil(d / 3)", {"d": 8}, 3),
        ("round(2.6)", {}, 3),
        ("sqrt(d) + log2(d) + log10(100)", {"d": 16}, 4 + 4 + 2),
        ("exp(0)", {}, 1.0),
        ("min(a, b, 4) + max(a, b)", {"a": 2, "b": 9}, 2 + 9),
        ("abs(-3) + int(2.9)", {}, 5),
    ],
)
def test_arithmetic_and_functions(source, names, expected):
    assert evaluate(source, names) == pytest.approx(expected)


def test_integer_arithmetic_stays_exact():
    # bounds like "m * d" must not pick up float rounding
    value = evaluate("m * d", {"m": 3**30, "d": 7})
    assert value == 7 * 3**30 and isinstance(value, int)


@pytest.mark.parametrize("number", [0, 12, -3, 2.5])
def test_numbers_pass_through(number):
    assert evaluate(number, {}) == number


@pytest.mark.parametrize("bad", [True, None, [1], {"x": 1}])
def test_non_numbers_rejected(bad):
    with pytest.raises(ExpressionError, match="expected a number or an expression string"):
        evaluate(bad, {})


def test_unknown_name_is_named_with_the_known_ones():
    with pytest.raises(ExpressionError) as err:
        evaluate("m * q", {"m": 2, "d": 3})
    message = str(err.value)
    assert "'q'" in message and "'m * q'" in message and "d, m" in message


@pytest.mark.parametrize(
    "source",
    [
        "d.__class__",  # attribute access
        "().__class__.__bases__",  # attribute access on a literal
        "open('x')",  # call of a non-whitelisted name
        "__import__('os')",
        "eval('1')",
        "(lambda: 1)()",  # lambda
        "lambda x: x",
        "d[0]",  # subscript
        "[1, 2][0]",
        "d > 1",  # comparison
        "d if d else 1",  # conditional
        "True",  # booleans are not numbers
        "'text'",  # strings
        "round(d, ndigits=1)",  # keyword arguments
        "FUNCTIONS",  # never resolves module globals
    ],
)
def test_forbidden_constructs_rejected(source):
    with pytest.raises(ExpressionError) as err:
        evaluate(source, {"d": 3})
    assert source in str(err.value)
    if not source.isidentifier():  # a construct (not a name) is refused when a spec is checked, before anything runs
        with pytest.raises(ExpressionError):
            names_in(source)


def test_a_caret_is_refused_with_the_power_operator_named():
    with pytest.raises(ExpressionError, match=r"uses '\^', a bitwise operator: write a power as '\*\*'"):
        names_in("alpha^-2")


@pytest.mark.parametrize(
    "source", ["1 / 0", "d // 0", "log(0)", "sqrt(-1)", "10.0 ** 1000", "exp(1000)", "log()", "min()"]
)
def test_evaluation_errors_become_expression_errors(source):
    with pytest.raises(ExpressionError, match="cannot evaluate"):
        evaluate(source, {"d": 3})


@pytest.mark.parametrize("source", ["1 +", "(d", "d d", ""])
def test_syntax_errors(source):
    with pytest.raises(ExpressionError, match="cannot parse"):
        evaluate(source, {"d": 1})
    with pytest.raises(ExpressionError, match="cannot parse"):
        names_in(source)


@pytest.mark.parametrize(
    "source, expected",
    [
        ("m_over_d * d", {"m_over_d", "d"}),
        ("0.7 * N * log(N)", {"N"}),
        ("min(a, max(b, 3)) + sqrt(c)", {"a", "b", "c"}),
        ("42", set()),
        ("floor(2.5)", set()),
    ],
)
def test_names_in(source, expected):
    assert names_in(source) == expected


@pytest.mark.parametrize("name", ["eval", "exec", "open", "getattr", "__import__", "compile", "globals", "type"])
def test_dangerous_builtins_never_whitelisted(name):
    assert name not in FUNCTIONS
    with pytest.raises(ExpressionError, match="not allowed"):
        evaluate(f"{name}(1)", {})
