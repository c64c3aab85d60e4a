"""The seeds' calculators: the four-operation tool and the AST expression calculator."""

from __future__ import annotations

import math
import re
import sys
import time

import pytest

from tao import ToolCall, Toolbox, calculate, calculator
from tao.tools.calculator import MAX_EXPRESSION_CHARS, CalculationError, evaluate


async def run(tool_, **arguments):
    return await Toolbox([tool_]).execute(ToolCall("c1", tool_.name, arguments))


# -- the four-operation calculator -----------------------------------------------------------

@pytest.mark.parametrize("operation, a, b, text", [
    ("add", 15, 27, "42"),
    ("subtract", 50, 46, "4"),
    ("multiply", 3, 12, "36"),
    ("divide", 100, 4, "25"),
    ("divide", 1, 3, "0.3333333333333333"),
    ("add", 0.1, 0.2, "0.3"),  # the observation drops float noise
    ("multiply", -2.5, 4, "-10"),
])
async def test_four_operations(operation, a, b, text):
    result = await run(calculator, operation=operation, a=a, b=b)
    assert (result.content, result.is_error) == (text, False)


def test_calculator_is_still_a_function():
    assert calculator("add", 15, 27) == 42
    assert calculator.spec.parameters["properties"]["operation"]["enum"] == ["add", "subtract", "multiply", "divide"]
    assert calculator.spec.parameters["required"] == ["operation", "a", "b"]


async def test_division_by_zero_is_an_observation_not_a_crash():
    result = await run(calculator, operation="divide", a=1, b=0)
    assert result.is_error
    assert result.content == "Error: ZeroDivisionError: division by zero / 除数不能为 0"


async def test_unknown_operation_is_an_observation():
    result = await run(calculator, operation="power", a=2, b=3)
    assert result.is_error and "- operation: Input should be 'add', 'subtract', 'multiply' or 'divide'" in result.content


@pytest.mark.parametrize("arguments, message", [
    ({"operation": "multiply", "a": 1e308, "b": 10}, "result is not finite"),
    ({"operation": "add", "a": 1.7e308, "b": 1.7e308}, "result is not finite"),
    ({"operation": "divide", "a": 1e308, "b": 1e-308}, "result is not finite"),
    ({"operation": "add", "a": float("inf"), "b": 1}, "a is not a finite number (inf)"),
    ({"operation": "subtract", "a": 1, "b": float("-inf")}, "b is not a finite number (-inf)"),
    ({"operation": "multiply", "a": float("nan"), "b": 0}, "a is not a finite number (nan)"),
    ({"operation": "add", "a": "inf", "b": 1}, "a is not a finite number (inf)"),  # lax validation
])
async def test_calculator_refuses_non_finite_numbers_like_calculate(arguments, message):
    """inf and nan are refused as calculate refuses them: a CalculationError observation that says
    retrying the same call is pointless (the plan executor re-plans at once)."""
    result = await run(calculator, **arguments)
    assert result.is_error and not result.retryable
    assert result.content == f"Error: CalculationError: {message}"
    same = await run(calculate, expression="1e308 * 10")
    assert same.content == "Error: CalculationError: result is not finite" and not same.retryable


async def test_calculator_refuses_infinity_sent_as_json_by_a_model():
    from tao.models.openai import parse_arguments

    for raw in ('{"operation": "add", "a": Infinity, "b": 1}', '{"operation": "add", "a": 1e999, "b": 1}',
                '{"operation": "add", "a": NaN, "b": 1}'):
        arguments, error = parse_arguments(raw)
        assert error is None
        result = await Toolbox([calculator]).execute(ToolCall("c1", "calculator", arguments))
        assert result.is_error and "CalculationError: a is not a finite number" in result.content


# -- the expression calculator: ordinary arithmetic ------------------------------------------

@pytest.mark.parametrize("expression, value", [
    ("15 + 27", 42),
    ("50 - 3*12 - 2*5", 4),
    ("100 / 4 + 30", 55.0),
    ("(17 * 23) - (144 / 12)", 379.0),
    ("7 // 2", 3),
    ("7 % 3", 1),
    ("2 ** 10", 1024),
    ("2 ^ 10", 1024),  # ^ is read as a power, as people write it
    ("-3 + +5", 2),
    ("1e3 + 0.5", 1000.5),
    ("15 + 27 =", 42),
    ("  15 + 27  ", 42),
    # full-width and typographic operators
    ("100 ÷ 4", 25.0),
    ("3 × 12", 36),
    ("（50 － 3×12）＋ 2＊5", 24),
    ("8 ／ 2 − 1", 3.0),
    ("max(3，4)", 4),
    # functions and constants
    ("sqrt(16)", 4.0),
    ("abs(-5) * max(2, 3) + min(1, 2)", 16),
    ("round(2.567, 2)", 2.57),
    ("floor(2.7) + ceil(2.1)", 5),
    ("log(e)", 1.0),
    ("log10(1000)", 3.0),
    ("exp(0)", 1.0),
    ("sin(0) + cos(0) + tan(0)", 1.0),
    ("2 * pi", 2 * math.pi),
    ("10**1000 // 10**999", 10),
    ("(" * 50 + "1" + ")" * 50, 1),
])
def test_evaluate(expression, value):
    assert evaluate(expression) == pytest.approx(value)


async def test_calculate_tool():
    result = await run(calculate, expression="50 - 3*12 - 2*5")
    assert (result.content, result.is_error) == ("4", False)
    result = await run(calculate, expression="100 ÷ 4")
    assert result.content == "25"


@pytest.mark.parametrize("expression, message", [
    ("1 / 0", "division by zero"),
    ("5 % 0", "division by zero"),
    ("0 ** -1", "division by zero"),
    ("sqrt(-1)", "sqrt(): math domain error"),
    ("log(0)", "log(): math domain error"),
    ("(-8) ** 0.5", "not a real number"),
    ("1e308 * 10", "not finite"),
    ("1e999 - 1e999", "not finite"),
    ("exp(1000)", "exp(): math range error"),
    ("10.0 ** 400", "overflow"),
    ("10**400 / 3.0", "overflow"),
    ("max(1)", "max():"),
    ("round(1, x=2)", "keyword arguments are not allowed"),
    ("", "not a valid expression"),
    ("1 +", "not a valid expression"),
    ("15 plus 27", "not a valid expression"),
    (42, "must be a string"),
])
def test_arithmetic_errors_are_calculation_errors(expression, message):
    with pytest.raises(CalculationError, match=message.replace("(", r"\(").replace(")", r"\)")):
        evaluate(expression)


# -- the expression calculator: hostile input ------------------------------------------------

HOSTILE = [
    ("import", "__import__('os').system('id')", "not allowed"),
    ("eval", "eval('1')", "not allowed in an expression: calls"),
    ("open", "open('/etc/passwd')", "not allowed in an expression: calls"),
    ("attribute", "(1).__class__", "not allowed in an expression: attributes"),
    ("dunder chain", "().__class__.__bases__[0].__subclasses__()", "not allowed"),
    ("method on a function", "sqrt.__globals__", "not allowed in an expression: attributes"),
    ("name", "x + 1", "not allowed in an expression: names"),
    ("builtins name", "__builtins__", "not allowed in an expression: names"),
    ("lambda", "(lambda: 1)()", "not allowed"),
    ("bare lambda", "lambda: 1", "not allowed in an expression: lambdas"),
    ("list comprehension", "[x for x in range(10)]", "not allowed in an expression: ListComp"),
    ("generator", "sum(x for x in range(10**9))", "not allowed"),
    ("dict comprehension", "{x: x for x in range(3)}", "not allowed"),
    ("subscript", "(1, 2)[0]", "not allowed in an expression: subscripts"),
    ("list", "[1, 2]", "not allowed in an expression: List"),
    ("tuple", "1, 2", "not allowed in an expression: Tuple"),
    ("starred", "max(*[1, 2])", "not allowed"),
    ("string constant", "'a'", "not allowed in an expression: Constant"),
    ("string times huge", "'a' * 10**9", "not allowed in an expression: Constant"),
    ("bytes constant", "b'a' * 10", "not allowed in an expression: Constant"),
    ("none", "None", "not allowed in an expression: Constant"),
    ("boolean", "True + 1", "not allowed in an expression: Constant"),
    ("complex literal", "1j * 1j", "not allowed in an expression: Constant"),
    ("f-string", "f'{1+1}'", "not allowed in an expression: JoinedStr"),
    ("f-string format leak", "f'{sqrt.__globals__}'", "not allowed"),
    ("walrus", "(y := 3)", "not allowed in an expression: NamedExpr"),
    ("shift", "1 << 10**9", "not allowed in an expression: BinOp"),
    ("bit not", "~1", "not allowed in an expression: UnaryOp"),
    ("matmul", "1 @ 2", "not allowed in an expression: BinOp"),
    ("keyword args", "round(1.5, ndigits=1)", "keyword arguments are not allowed"),
    ("statement", "import os", "not a valid expression"),
    ("assignment", "x = y = 1", "not a valid expression"),  # "x = 1" is an equation (1)
    ("two statements", "1; 2", "not a valid expression"),
    ("null byte", "1 +\x00 1", "not a valid expression"),
    ("lone surrogate", "1 + \ud800", "not a valid expression"),
    ("power tower 10", "10**10**10", "result too large"),
    ("power tower 9", "9**9**9", "result too large"),
    ("huge power", "2**10**8", "result too large"),
    ("huge negative power", "2**-10**10", "result too large"),
    ("float power", "1.0000001 ** 10**20", "result too large"),
    ("power of a product", "(10**1000 * 10**1000) ** 2", "result too large"),
    ("huge product", "*".join(["(10**1000)"] * 20), "result too large"),
    ("product via functions", "abs(-10**1000) * max(10**1000, 1) * 10**1000", "result too large"),
    ("product of negatives", "-(10**1000) * -(10**1000) * 10**1000", "result too large"),
    ("round to huge negative digits", "round(1, -10**8)", "ndigits out of range"),
    ("long expression", "1+" * 600 + "1", f"longer than {MAX_EXPRESSION_CHARS} characters"),
    ("many nodes", "+".join(["1"] * 450), "too complex"),
    ("deep unary minus", "-" * 999 + "1", "too complex"),
    ("deep parentheses", "(" * 300 + "1" + ")" * 300, "not a valid expression"),
    ("deep calls", "abs(" * 150 + "1" + ")" * 150, "too complex"),
    ("deep power chain", "2**" * 300 + "1", "too complex"),
]


@pytest.mark.parametrize("expression, message", [h[1:] for h in HOSTILE], ids=[h[0] for h in HOSTILE])
def test_hostile_expressions_are_refused_quickly(expression, message):
    start = time.thread_time()  # this thread's CPU: a busy machine does not make it fail
    with pytest.raises(CalculationError) as e:
        evaluate(expression)
    elapsed = time.thread_time() - start
    assert message in str(e.value)
    # refused before computing: 9**9**9 computed would take minutes, refused takes ~1 ms
    assert elapsed < 0.5, f"{elapsed * 1000:.1f} ms of CPU to refuse {expression[:40]!r}"


def call_at_depth(headroom: int, fn, *args):
    """Call ``fn`` with only about ``headroom`` frames left before the recursion limit."""
    depth = 0
    frame = sys._getframe()
    while frame is not None:
        depth += 1
        frame = frame.f_back

    def dive(n):
        return dive(n - 1) if n else fn(*args)

    return dive(max(0, sys.getrecursionlimit() - depth - headroom))


@pytest.mark.parametrize("expression", [
    "-" * 999 + "1",
    "+-" * 499 + "1",
    "-" * 150 + "1",
    "abs(" * 150 + "1" + ")" * 150,
    "(" * 199 + "1" + ")" * 199,
    "15 + 27",
], ids=["minus-999", "plus-minus-998", "minus-150", "abs-150", "parens-199", "plain"])
@pytest.mark.parametrize("headroom", [50, 200])
def test_recursion_error_never_escapes(expression, headroom):
    """Deep input evaluated with little stack left (a tool called deep in someone's program) is
    refused with a CalculationError - a RecursionError must not escape."""
    try:
        value = call_at_depth(headroom, evaluate, expression)
    except CalculationError:
        return
    assert value in (1, 42, -1)


@pytest.mark.parametrize("expression", [h[1] for h in HOSTILE[:12]] + ["9**9**9", "2**10**8"])
async def test_hostile_expressions_through_the_toolbox_are_observations(expression):
    result = await run(calculate, expression=expression)
    assert result.is_error and result.content.startswith("Error: ")


def test_calculate_takes_a_list_for_sum_avg_and_len():
    """A model asked for a total or a mean writes ``sum([...])``; refusing it cost whole runs."""
    assert evaluate("sum([12, 24, 36, 48, 60])") == 180
    assert evaluate("avg([12, 24, 36, 48, 60])") == 36
    assert evaluate("mean((2, 4, 9))") == 5
    assert evaluate("len([1, 2, 3]) * 2") == 6
    assert evaluate("max([3, 9, 2]) - min(3, 4)") == 6


@pytest.mark.parametrize("expression, message", [
    ("sum(1, 2)", "takes one list"), ("avg([])", "non-empty list"), ("[1, 2]", "not allowed"),
    ("sum([[1]])", "not allowed"), ("sum([1] * 3)", "not allowed"),
    ("sum([" + ",".join(["1"] * 1001) + "])", "expression"),
])
def test_calculate_refuses_lists_anywhere_else(expression, message):
    with pytest.raises(CalculationError, match=message):
        evaluate(expression)


@pytest.mark.parametrize(("equation", "value"), [
    ("3*x + 17 = 80", 21),  # "a number times 3 plus 17 is 80"
    ("x*3 + 17 == 80", 21),
    ("2*(n - 5) = 3*n + 1", -11),
    ("x/4 = 2.5", 10),
    ("0.1*x = 0.3", 3),
    ("（x＋2）×3＝21".replace("＝", "="), 5),  # full-width, as typed in Chinese
    ("一个数 * 4 = 36", 9),  # an unknown named in Chinese
    ("J + 3J = 96", 24),  # written as in a textbook: 3J is 3*J, not Python's complex 3j
    ("2(x + 1) = 10", 4),
    ("(x + 1)(2) = 10", 4),
    ("2.5x - 1e2 = 0", 40),  # 1e2 stays a number
])
def test_calculate_solves_a_linear_equation_in_one_unknown(equation, value):
    assert evaluate(equation) == value


@pytest.mark.parametrize(("equation", "message"), [
    ("60/x = 5", "only linear equations"),  # and it says how to rewrite it
    ("x*x = 9", "only linear equations"),
    ("2**x = 8", "only linear equations"),
    ("x + y = 3", r"found 2 unknowns \(x, y\)"),
    ("2 = 3", "found 0 unknowns"),
    ("x = x", "no single solution for x"),
    ("x = 1 = 2", "not a valid expression"),
    ("10**400*x = 1", "too large"),
    ("x = 9**9**9", "too large"),
    ("x = " + "(" * 300 + "1" + ")" * 300, "not a valid expression|too deeply nested"),
    ("x = " + "1+" * 600 + "1", "longer than"),
    ("x = __import__('os')", "not allowed"),
])
def test_an_equation_calculate_cannot_solve_is_said_in_words(equation, message):
    with pytest.raises(CalculationError, match=message):
        evaluate(equation)


async def test_an_equation_through_the_tool_door_is_its_solution():
    result = await run(calculate, expression="3*x + 17 = 80")
    assert (result.content, result.is_error) == ("21", False)


@pytest.mark.parametrize(("expression", "value"), [
    ("0.25 * $40", 10),  # "the jeans cost $40 and are 25% off": money as the task writes it
    ("$50 - $ 30", 20),
    ("¥12 * 3", 36),
    ("￥12 × 3", 36),
    ("€.5 * 4", 2),
    ("£3 + 2", 5),
])
def test_a_currency_sign_before_an_amount_is_the_amount(expression, value):
    assert evaluate(expression) == value


@pytest.mark.parametrize("expression", ["2 * $vanessa_speed", "${tank} / 5", "$速度 * 3"])
def test_a_named_placeholder_is_refused_in_words_not_as_a_syntax_error(expression):
    with pytest.raises(CalculationError, match=r"is not a number: calculate knows no named values"):
        evaluate(expression)


@pytest.mark.parametrize("expression, value", [
    ("5 + 1 if 102 % 18 != 0 else 5", 6),        # one more box for what is left over
    ("5 + 1 if 90 % 18 != 0 else 5", 5),
    ("3 < 4", 1), ("1 < 2 < 1", 0), ("not 0", 1),   # a condition is 1 or 0, as in a spreadsheet
    ("(2 > 1) and (3 > 4)", 0), ("(2 > 1) or (3 > 4)", 1),
    ("10 if 5 >= 5 else 1 / 0", 10),              # the branch not taken is not computed
])
def test_calculate_reads_conditions_as_a_spreadsheet_does(expression, value):
    assert evaluate(expression) == value


def test_an_equation_is_still_solved_not_compared():
    assert evaluate("3*x + 17 == 80") == 21


@pytest.mark.parametrize("expression, value", [
    ("sum(range(1, 51))", 1275),                  # "the sum of the whole numbers from 1 to 50"
    ("len(range(0, 100, 7))", 15), ("avg(range(1, 4))", 2), ("max(range(0, 100, 7))", 98),
])
def test_a_range_is_a_list_inside_the_list_functions(expression, value):
    assert evaluate(expression) == value


@pytest.mark.parametrize("expression, message", [
    ("sum(range(10**9))", "a range of more than 1000 numbers"),   # never built
    ("sum(range(1, 10, 0))", "range(): range() arg 3 must not be zero"),
    ("sum(range(1.5, 3))", "range() takes one to three whole numbers"),
    ("range(3)", "not allowed in an expression: calls"),            # a range is not a number
])
def test_a_range_too_long_or_malformed_is_refused_in_words(expression, message):
    with pytest.raises(CalculationError, match=re.escape(message)):
        evaluate(expression)
