"""``$stepN`` references: finding them in a step's arguments and putting results in their place.

A reference is ``$step3`` or ``${step3}`` (the braces let text follow it directly: ``${step3}kg``).
It may sit anywhere in the arguments - in nested dicts and lists, alone or inside a string:

- an argument that is exactly one reference gets the referenced value itself, type kept
  (``{"a": "$step1"}`` with step1 = 36.0 gives ``{"a": 36.0}``, a list stays a list);
- a reference inside a longer string is replaced by the value as a model reads it
  (``"total: $step1 yuan"`` gives ``"total: 36 yuan"``).

One regular expression scans each string once, left to right, and every match takes all the digits
that follow, so ``$step10`` is never read as ``$step1`` followed by ``0``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ..tools.base import to_text

REFERENCE = re.compile(r"\$\{(step\d+)\}|\$(step\d+)")


def _id(match: re.Match[str]) -> str:
    return match.group(1) or match.group(2)


def references(value: Any) -> list[str]:
    """The step ids referenced anywhere in ``value``, in order of first appearance."""
    found: dict[str, None] = {}
    _collect(value, found)
    return list(found)


def _collect(value: Any, found: dict[str, None]) -> None:
    if isinstance(value, str):
        for m in REFERENCE.finditer(value):
            found.setdefault(_id(m), None)
    elif isinstance(value, Mapping):
        for v in value.values():
            _collect(v, found)
    elif isinstance(value, (list, tuple)):
        for v in value:
            _collect(v, found)


def resolve(value: Any, results: Mapping[str, Any]) -> Any:
    """``value`` with every reference replaced by its step's result (a new structure; the input
    is not modified). A reference to a step missing from ``results`` raises ``KeyError`` - the
    plan validator makes sure that never happens at run time."""
    if isinstance(value, str):
        whole = REFERENCE.fullmatch(value.strip())
        if whole is not None:
            return results[_id(whole)]
        if "$" not in value:
            return value
        return REFERENCE.sub(lambda m: to_text(results[_id(m)]), value)
    if isinstance(value, Mapping):
        return {k: resolve(v, results) for k, v in value.items()}
    if isinstance(value, list):
        return [resolve(v, results) for v in value]
    if isinstance(value, tuple):
        return tuple(resolve(v, results) for v in value)
    return value
