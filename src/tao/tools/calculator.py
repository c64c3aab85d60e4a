"""The seeds' calculators.

``calculator`` is the four-operation tool of seed 000 §4.5. ``calculate`` evaluates an arithmetic
expression by walking its AST against a whitelist - never ``eval`` - and refuses anything else,
including powers and products whose result would be huge (``9**9**9``), before computing them.
Both refuse numbers that are not finite (``inf``, ``nan``), in their input or their result, with a
``CalculationError``: a model copies whatever a tool returns into its answer. ``calculate`` also
solves a linear equation in one unknown (``3*x + 17 = 80`` gives 21), the form a model writes
for "a number times 3 plus 17 is 80". A condition reads as a spreadsheet's IF: ``n + 1 if left > 0
else n``, with a comparison 1 or 0 (a plan written as code turns its ``if`` into one).
"""

from __future__ import annotations

import ast
import math
import operator
import re
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
_COMPARE = {ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt, ast.GtE: operator.ge,
            ast.Eq: operator.eq, ast.NotEq: operator.ne}
_FUNCS = {
    "sqrt": math.sqrt, "abs": abs, "round": round, "min": min, "max": max, "floor": math.floor,
    "ceil": math.ceil, "log": math.log, "log10": math.log10, "exp": math.exp, "sin": math.sin,
    "cos": math.cos, "tan": math.tan, "sum": sum, "len": len, "int": math.trunc, "float": float,
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


def _range(node: ast.Call) -> list[int]:
    """``range(1, 51)`` inside ``sum``/``len``/...: "the sum of the whole numbers from 1 to 50"
    is written so, and it stays a list of at most ``MAX_LIST`` numbers."""
    bounds = [_eval(a) for a in node.args]
    if node.keywords or not 1 <= len(bounds) <= 3 or any(type(b) is not int for b in bounds):
        raise CalculationError("range() takes one to three whole numbers: range(1, 51)")
    try:
        numbers = range(*bounds)  # type: ignore[arg-type]
    except ValueError as e:  # a step of 0
        raise CalculationError(f"range(): {e}") from None
    if len(numbers) > MAX_LIST:
        raise CalculationError(f"a range of more than {MAX_LIST} numbers")
    return list(numbers)


def _listed(name: str, node: ast.expr) -> list[int | float] | list[int] | int | float:
    """An argument of ``name``: a list where the function takes one."""
    if name in _LIST_FUNCS and isinstance(node, (ast.List, ast.Tuple)):
        return _list(node)
    if name in _LIST_FUNCS and isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
            and node.func.id == "range":
        return _range(node)
    return _eval(node)


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
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        return int(not _eval(node.operand))
    # a condition, as a spreadsheet's IF: "one more box if any are left" (1 for true, 0 for false)
    if isinstance(node, ast.IfExp):
        return _eval(node.body) if _eval(node.test) else _eval(node.orelse)
    if isinstance(node, ast.Compare) and all(type(op) in _COMPARE for op in node.ops):
        left = _eval(node.left)
        for op, comparator in zip(node.ops, node.comparators):
            right = _eval(comparator)
            if not _COMPARE[type(op)](left, right):
                return 0
            left = right
        return 1
    if isinstance(node, ast.BoolOp):
        values = [_eval(v) for v in node.values]
        return int(all(values) if isinstance(node.op, ast.And) else any(values))
    if isinstance(node, ast.Name) and node.id in _CONSTANTS:
        return _CONSTANTS[node.id]
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _FUNCS:
        if node.keywords:
            raise CalculationError("keyword arguments are not allowed")
        name = node.func.id
        args = [_listed(name, a) for a in node.args]
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


#: a currency sign written against an amount, as word problems (and models) write money:
#: ``0.25 * $40`` is ``0.25 * 40``
_CURRENCY = re.compile(r"[$¥￥€£](?=\s?\.?\d)\s?")
#: a ``$name`` left in an expression: a placeholder the model meant to fill (``2 * $speed``)
_NAMED = re.compile(r"\$\{?[^\W\d]\w*\}?")


def evaluate(expression: str) -> int | float:
    """Evaluate an arithmetic expression safely, or solve a linear equation in one unknown
    (``solve``); raise ``CalculationError`` otherwise."""
    if not isinstance(expression, str):
        raise CalculationError("the expression must be a string")
    expression = expression.translate(_NORMALISE).strip().rstrip("=").strip()
    if len(expression) > MAX_EXPRESSION_CHARS:
        raise CalculationError(f"expression longer than {MAX_EXPRESSION_CHARS} characters")
    expression = _CURRENCY.sub("", expression)
    if named := _NAMED.search(expression):
        raise CalculationError(f"{named.group(0)} is not a number: calculate knows no named "
                               f"values; write the number itself in its place")
    sides = _equation(expression)
    return solve(*sides) if sides else _value(expression)


def _equation(text: str) -> tuple[str, str] | None:
    """The two sides of ``text`` when it is an equation: ``a == b``, or ``a = b`` (which does not
    parse as Python). Keyword arguments and ``:=`` parse, so they are not taken for one."""
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError:
        plain = text.replace("==", "").replace("<=", "").replace(">=", "").replace("!=", "")
        if plain.count("=") != 1 or ":=" in text:
            return None
        left, right = text.split("=")  # ``text`` had no "==": its one "=" divides it
        return left.strip(), right.strip()
    except (ValueError, RecursionError, MemoryError):
        return None  # said by ``_value``
    body = tree.body
    if isinstance(body, ast.Compare) and len(body.ops) == 1 and isinstance(body.ops[0], ast.Eq):
        return ast.get_source_segment(text, body.left) or "", \
            ast.get_source_segment(text, body.comparators[0]) or ""
    return None


_EQUATION = "an equation in one unknown"


def solve(left: str, right: str) -> int | float:
    """The unknown of a linear equation such as ``3*x + 17 = 80`` (21). A model asked "a number
    times 3 plus 17 is 80" writes exactly this, and a calculator that only said "invalid syntax"
    got the same call five times. Both sides are evaluated with the unknown at 1 and 2, and the
    line through them checked at 3 and -2, by the same whitelist; a non-linear one (``60/x = 5``, ``x*x = 9``) is refused with words."""
    sides = (implicit_products(left), implicit_products(right))
    equation = f"{left} = {right}"
    if not all(sides):
        raise CalculationError(f"{_EQUATION} has two sides, e.g. 3*x + 17 = 80")
    names = set()
    for side in sides:
        try:
            tree = ast.parse(side, mode="eval")
        except (RecursionError, MemoryError):
            raise CalculationError("expression too deeply nested") from None
        except (SyntaxError, ValueError):
            raise CalculationError(f"not a valid expression: {side[:60]}") from None
        called = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
        names |= {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and id(n) not in called
                  and n.id not in _CONSTANTS and n.id not in _FUNCS}
    if len(names) != 1:
        raise CalculationError(f"{_EQUATION}: found {len(names)} unknowns "
                               f"({', '.join(sorted(names)) or 'none'}); an equation needs one "
                               "unknown and numbers for the rest")
    unknown = names.pop()

    def residual(v: int) -> int | float:
        left, right = (_value(side, {unknown: v}) for side in sides)
        return left - right

    try:  # at 1 and 2, then checked at 3 and -2 (0 would divide 60/x by zero)
        r1 = residual(1)
        a = residual(2) - r1
        b = r1 - a
        linear = all(math.isclose(residual(v), a * v + b, rel_tol=1e-9, abs_tol=1e-9)
                     for v in (3, -2))
    except CalculationError as e:
        if "division by zero" not in str(e):  # too large, not finite: said as it is
            raise
        linear = False  # 60/x: x divides, at one of the trial values
    except OverflowError:
        raise CalculationError("numbers too large for an equation") from None
    if not linear:
        raise CalculationError(f"calculate solves only linear equations in one unknown; rewrite "
                               f"{equation[:60]} so that {unknown} is not multiplied or divided "
                               f"by itself (e.g. 60/{unknown} = 5 as {unknown} = 60/5)")
    if a == 0:
        raise CalculationError(f"{equation[:60]} has no single solution for {unknown}")
    try:
        x = float(f"{-b / a:.12g}")  # 0.1*x = 0.3 is 3, not 2.9999999999999996
    except OverflowError:
        raise CalculationError("result too large (overflow)") from None
    if not math.isfinite(x):
        raise CalculationError("result is not finite")
    return int(x) if x.is_integer() and abs(x) < 2**53 else x


# A number or a closing parenthesis written against a name or an opening parenthesis: ``3J``,
# ``2(x + 1)``, ``(x + 1)(2)``. Not ``1e5`` or ``2E-3``, which are numbers.
_IMPLICIT = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?)(?![eE][+-]?\d)(?=[^\W\d]|\()|(\))(?=[^\W\d]|\(|\d)")


def implicit_products(side: str) -> str:
    """``side`` with the products a person writes without ``*`` made explicit: an equation from
    a model is written the way it is in a textbook (``J + 3J = 96``), and Python reads ``3J`` as
    a complex number and ``2x`` as a syntax error."""
    return _IMPLICIT.sub(lambda m: (m.group(1) or m.group(2)) + "*", side)


def _value(expression: str, names: dict[str, int] | None = None) -> int | float:
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
    if names:  # an equation's unknown, set to one trial value
        tree = _Bind(names).visit(tree)
    try:
        value = _eval(tree)
    except RecursionError:
        raise CalculationError("expression too deeply nested") from None
    if isinstance(value, float) and not math.isfinite(value):
        raise CalculationError("result is not finite")
    return value


class _Bind(ast.NodeTransformer):
    def __init__(self, names: dict[str, int]):
        self.names = names

    def visit_Name(self, node: ast.Name) -> ast.AST:
        return ast.Constant(self.names[node.id]) if node.id in self.names else node


# The description stays as it was measured: an equation the model writes of its own accord is
# solved (``solve``) instead of failing, and nothing else the model reads changes.
@tool(side_effects=False)
def calculate(expression: str) -> float:
    """计算一个算术表达式 / Evaluate an arithmetic expression, e.g. "50 - 3*12 - 2*5".

    Args:
        expression: numbers, + - * / // % **, parentheses, sqrt abs round min max floor ceil log exp, sum([...]) avg([...]) len([...])
    """
    return evaluate(expression)
