"""How a tool's value (and its errors) read to a model: numbers without float noise, JSON for structures, cut
at ``MAX_OBSERVATION_CHARS`` (a model copies what it reads, and pays for every character)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from ..safe_json import dumps

if TYPE_CHECKING:
    from .base import Tool

MAX_OBSERVATION_CHARS = 8000


def to_text(value: Any) -> str:
    """How a tool's return value reads to a model: 36.0 reads as 36, dicts as JSON, and float
    noise is rounded away at 15 significant digits (``240 * 0.8 - 20`` reads as 172, not
    172.00000000000003; 1/3 keeps its digits), because a model copies what it reads. Never
    raises: an integer too long for ``str`` (over 4,300 digits) reads in scientific notation,
    a structure ``json`` cannot write has the part it cannot write replaced by a note."""
    if isinstance(value, str):
        text = value
    elif isinstance(value, bool) or value is None:
        text = str(value)
    elif isinstance(value, float):
        short = f"{value:.15g}"
        if math.isfinite(value) and len(short) < len(repr(value)) - 2:  # noise: 0000…3, 9999…86
            value = float(short)
        text = str(int(value)) if value.is_integer() and abs(value) < 1e16 else repr(value)
    elif isinstance(value, int):
        text = _int_text(value)
    elif isinstance(value, complex):
        text = str(value)
    else:
        text = dumps(value)
    if len(text) > MAX_OBSERVATION_CHARS:
        cut = len(text) - MAX_OBSERVATION_CHARS
        text = f"{text[:MAX_OBSERVATION_CHARS]}\n... [truncated {cut} characters]"
    return text


def _int_text(value: int) -> str:
    try:
        return str(value)
    except ValueError:  # more digits than sys.get_int_max_str_digits()
        from decimal import Decimal

        d = Decimal(value)
        return f"{d:.15e} (an integer of {d.adjusted() + 1} digits)"


def _type_name(prop: dict[str, Any]) -> str:
    if "enum" in prop:
        return " | ".join(repr(v) for v in prop["enum"])
    if "anyOf" in prop:
        return " | ".join(_type_name(p) for p in prop["anyOf"])
    return {"number": "float", "integer": "int", "string": "str", "boolean": "bool",
            "array": "list", "object": "dict", "null": "None"}.get(prop.get("type", ""), "Any")


def _explain(tool: Tool, error: Any) -> str:
    lines = []
    for err in error.errors():
        where = ".".join(str(p) for p in err["loc"]) or "arguments"
        got = err.get("input")
        lines.append(f"- {where}: {err['msg']}" + ("" if err["type"] == "missing" else f" (got {_shown(got)})"))
    return f"invalid arguments for {tool.signature()}:\n" + "\n".join(lines)


def _shown(value: Any, limit: int = 300) -> str:
    """``repr(value)``, cut to ``limit`` characters; a value ``repr`` cannot write (an integer
    of over 4,300 digits, nesting past the stack) as JSON with notes instead."""
    try:
        text = repr(value)
    except (ValueError, RecursionError):
        text = dumps(value)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


def error_text(e: BaseException) -> str:
    """``Error: ValueError: ...`` - how an exception from a tool reads to the model."""
    try:
        detail = str(e)
    except Exception:  # noqa: BLE001 - an exception whose own __str__ fails
        detail = "(its message cannot be read)"
    text = f"Error: {type(e).__name__}: {detail}" if detail else f"Error: {type(e).__name__}"
    if not isinstance(e, Exception):
        text += " (raised by the tool; the run goes on)"
    return text
