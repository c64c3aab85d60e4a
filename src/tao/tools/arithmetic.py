"""The seed's arithmetic helpers ``add subtract multiply divide sum avg`` as ordinary tao tools.

They are real tools - not helpers pasted into the sandbox - so one definition serves every agent:
a ReAct agent can call them as tools, and a CodeAct agent lists them in its prompt like any other
tool and the sandbox reaches them through the tool bridge. They therefore survive a sandbox
restart (the bridge re-creates its stubs in the new worker), which a preamble cell would not.

Results that are whole numbers come back as ``int`` (``subtract(50, 46)`` is ``4``, not ``4.0``)
and float noise is rounded away (``add(0.1, 0.2)`` is ``0.3``), because a small model copies
whatever it prints into its answer. ``sum`` and ``avg`` take a list, so inside the sandbox
``sum([1, 2, 3])`` behaves as Python's own ``sum`` does.

They are pure (``side_effects=False``): a resumed run simply runs them again, and ``tao.Vote``
may repeat them - CodeAct carries them, so without it ``Vote(CodeActAgent(...))`` (``--votes``)
was refused.
"""

from __future__ import annotations

import math

from .base import tool


def _tidy(x: float) -> int | float:
    if isinstance(x, float) and math.isfinite(x):
        x = float(f"{x:.12g}")
        if x.is_integer() and abs(x) < 2**53:
            return int(x)
    return x


@tool(side_effects=False)
def add(a: float, b: float) -> float:
    """Add two numbers: a + b.

    Args:
        a: the first number
        b: the second number
    """
    return _tidy(a + b)


@tool(side_effects=False)
def subtract(a: float, b: float) -> float:
    """Subtract b from a: a - b.

    Args:
        a: the number to subtract from
        b: the number to subtract
    """
    return _tidy(a - b)


@tool(side_effects=False)
def multiply(a: float, b: float) -> float:
    """Multiply two numbers: a * b.

    Args:
        a: the first factor
        b: the second factor
    """
    return _tidy(a * b)


@tool(side_effects=False)
def divide(a: float, b: float) -> float:
    """Divide a by b: a / b (b must not be 0).

    Args:
        a: the dividend
        b: the divisor
    """
    if b == 0:
        raise ZeroDivisionError("division by zero / 除数不能为 0")
    return _tidy(a / b)


@tool(name="sum", side_effects=False)
def sum_(numbers: list[float]) -> float:
    """The sum of a list of numbers: sum([1, 2, 3]) == 6.

    Args:
        numbers: the numbers to add up
    """
    total = 0.0
    for n in numbers:
        total += n
    return _tidy(total)


@tool(side_effects=False)
def avg(numbers: list[float]) -> float:
    """The average (arithmetic mean) of a list of numbers: avg([2, 4, 9]) == 5.

    Args:
        numbers: the numbers to average (at least one)
    """
    if not numbers:
        raise ValueError("avg() of an empty list")
    return _tidy(sum(numbers) / len(numbers))


#: The seed's helpers, in the order prompts list them.
ARITHMETIC = [add, subtract, multiply, divide, sum_, avg]
