"""The seeds' calculators.

``calculator`` is the four-operation tool of seed 000 §4.5. ``calculate`` evaluates an arithmetic
expression by walking its AST against a whitelist - never ``eval`` - and refuses anything else,
including powers and products whose result would be huge (``9**9**9``), before computing them.
Both refuse numbers that are not finite (``inf``, ``nan``), in their input or their result, with a
``CalculationError``: a model copies whatever a tool returns into its answer.
"""

from __future__ import annotations

import ast
import math
import operator
from typing import Literal

from .base import tool


class CalculationError(ValueError):
    """A calculation that is not allowed or cannot be computed: the same call fails again, so
    ``retryable = False`` (a plan step goes to re-planning at once instead of being retried)."""

    retryable = False


@tool(side_effects=False)  # pure: a resumed run simply runs it again
def calculator(operation: Literal["add", "subtract", "multiply", "divide"], a: float, b: float) -> float:
    """四则运算计算器 / Four-operation calculator: add, subtract, multiply or divide two numbers.

    Args:
        operation: add, subtract, multiply or divide
        a: the first number
        b: the second number
    """
    for name, x in (("a", a), ("b", b)):
        if not math.isfinite(x):  # JSON from a model can carry Infinity, NaN or 1e999
            raise CalculationError(f"{name} is not a finite number ({x})")
    if operation == "add":
        value = a + b
    elif operation == "subtract":
        value = a - b
    elif operation == "multiply":
        value = a * b
    elif b == 0:
        raise ZeroDivisionError("division by zero / 除数不能为 0")
    else:
        value = a / b
    if not math.isfinite(value):  # 1e308 * 10: an answer the model would copy as "inf"
        raise CalculationError("result is not finite")
    return value


MAX_EXPRESSION_CHARS = 1000
MAX_INT_BITS = 4096  # about 1233 decimal digits: more than any arithmetic question needs
MAX_NODES = 400

_BINOPS = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
    ast.Div: operator.truediv, ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY = {ast.UAdd: operator.pos, ast.USub: operator.neg}
_FUNCS = {
    "sqrt": math.sqrt, "abs": abs, "round": round, "min": min, "max": max, "floor": math.floor,
    "ceil": math.ceil, "log": math.log, "log10": math.log10, "exp": math.exp, "sin": math.sin,
    "cos": math.cos, "tan": math.tan, "sum": sum, "len": len,
    "avg": lambda xs: sum(xs) / len(xs), "mean": lambda xs: sum(xs) / len(xs),
}
#: Functions whose argument may be a list literal: ``sum([12, 24, 36])``, ``avg([2, 4, 9])``. A
#: model asked for a total or an average writes exactly this, and refusing it cost whole runs.
_LIST_FUNCS = {"sum", "len", "avg", "mean", "min", "max"}
MAX_LIST = 1000
_CONSTANTS = {"pi": math.pi, "e": math.e}
_NORMALISE = str.maketrans({"×": "*", "÷": "/", "（": "(", "）": ")", "＋": "+", "－": "-",
                            "−": "-", "＊": "*", "／": "/", "^": "**", "，": ","})


def _bits(x: int | float) -> float:
    if isinstance(x, int):
        return abs(x).bit_length()
    return math.log2(abs(x)) if x and math.isfinite(x) else 0.0


def _check_size(op: type, left: int | float, right: int | float) -> None:
    if op is ast.Pow:
        if isinstance(right, (int, float)) and abs(right) > 1 and abs(left) > 1:
            if _bits(left) * abs(right) > MAX_INT_BITS:
                raise CalculationError(f"result too large: {left} ** {right} is refused")
    elif op is ast.Mult and isinstance(left, int) and isinstance(right, int):
        if _bits(left) + _bits(right) > MAX_INT_BITS:
            raise CalculationError("result too large: product is refused")


def _list(node: ast.List | ast.Tuple) -> list[int | float]:
    if len(node.elts) > MAX_LIST:
        raise CalculationError(f"a list of more than {MAX_LIST} numbers")
    return [_eval(e) for e in node.elts]


def _eval(node: ast.AST) -> int | float:
    if isinstance(node, ast.Expression):
        return _eval(node.body)
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        left, right = _eval(node.left), _eval(node.right)
        _check_size(type(node.op), left, right)
        try:
            value = _BINOPS[type(node.op)](left, right)
        except ZeroDivisionError:
            raise CalculationError("division by zero / 除数不能为 0") from None
        except OverflowError:
            raise CalculationError("result too large (overflow)") from None
        if isinstance(value, complex):
            raise CalculationError("the result is not a real number")
        return value
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_eval(node.operand))
    if isinstance(node, ast.Name) and node.id in _CONSTANTS:
        return _CONSTANTS[node.id]
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _FUNCS:
        if node.keywords:
            raise CalculationError("keyword arguments are not allowed")
        name = node.func.id
        args = [_list(a) if name in _LIST_FUNCS and isinstance(a, (ast.List, ast.Tuple)) else _eval(a)
                for a in node.args]
        if name in ("avg", "mean") and (len(args) != 1 or not isinstance(args[0], list) or not args[0]):
            raise CalculationError(f"{name}() takes one non-empty list: {name}([2, 4, 9])")
        if name in ("sum", "len") and (len(args) != 1 or not isinstance(args[0], list)):
            raise CalculationError(f"{name}() takes one list: {name}([1, 2, 3])")
        if node.func.id == "round" and len(args) > 1 and isinstance(args[1], int) and abs(args[1]) > 1000:
            raise CalculationError("round(): ndigits out of range")  # round(1, -10**8) takes minutes
        try:
            return _FUNCS[node.func.id](*args)
        except (TypeError, ValueError, OverflowError) as e:
            raise CalculationError(f"{node.func.id}(): {e}") from None
    what = {ast.Name: "names", ast.Attribute: "attributes", ast.Call: "calls",
            ast.Subscript: "subscripts", ast.Lambda: "lambdas"}.get(type(node), type(node).__name__)
    allowed = ", ".join(_FUNCS)
    raise CalculationError(
        f"not allowed in an expression: {what} ({ast.unparse(node)[:60]}). Use numbers, "
        f"+ - * / // % **, parentheses and {allowed}, pi, e"
    )


def evaluate(expression: str) -> int | float:
    """Evaluate an arithmetic expression safely, or raise ``CalculationError``."""
    if not isinstance(expression, str):
        raise CalculationError("the expression must be a string")
    expression = expression.translate(_NORMALISE).strip().rstrip("=").strip()
    if len(expression) > MAX_EXPRESSION_CHARS:
        raise CalculationError(f"expression longer than {MAX_EXPRESSION_CHARS} characters")
    try:
        tree = ast.parse(expression, mode="eval")
    except SyntaxError as e:
        raise CalculationError(f"not a valid expression: {e.msg}") from None
    except ValueError as e:  # lone surrogates and other unencodable text
        raise CalculationError(f"not a valid expression: {e}") from None
    except (RecursionError, MemoryError):
        raise CalculationError("expression too deeply nested") from None
    if sum(1 for _ in ast.walk(tree)) > MAX_NODES:
        raise CalculationError("expression too complex")
    try:
        value = _eval(tree)
    except RecursionError:
        raise CalculationError("expression too deeply nested") from None
    if isinstance(value, float) and not math.isfinite(value):
        raise CalculationError("result is not finite")
    return value


@tool(side_effects=False)
def calculate(expression: str) -> float:
    """计算一个算术表达式 / Evaluate an arithmetic expression, e.g. "50 - 3*12 - 2*5".

    Args:
        expression: numbers, + - * / // % **, parentheses, sqrt abs round min max floor ceil log exp, sum([...]) avg([...]) len([...])
    """
    return evaluate(expression)
