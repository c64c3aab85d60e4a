"""Seed 003's JSON decision object, read tolerantly: ``{"thought", "action", "action_input"}``.

``action`` is a tool's name, or ``"final"`` with the answer as ``action_input``. Under a grammar
(the embedded model) or a JSON-schema ``response_format`` the reply is exactly that; anywhere else
models wrap it in a fence, use single quotes, add prose before or after it, send ``action_input``
as a string that holds the JSON object, or write the keys of a format they know better (``tool`` /
``arguments``). All of that is read. What is not - no object, invalid JSON, a list, an ``action``
that is not a string, no ``action`` at all, an unknown action, nesting past ``safe_json.MAX_DEPTH``
- is a ``ParseFailure`` whose reason keys ``prompts/json_protocol.toml``. Of two objects in one
reply the first is the decision (``Decision.extra`` counts the rest), as the text protocol runs
the first of two Actions.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..grammar import FINAL_ACTION
from ..safe_json import MAX_DEPTH, dumps, loads, raw_decode, too_deep
from .blocks import ToolParams
from .text_parser import (ParsedAction, ParsedFinal, ParseFailure, Parsed, _balanced, _canonical,
                          _python_literal, parse_arguments)

_KEYS = {  # the seed's key first, then the ones models bring from other formats
    "thought": ("thought", "thoughts", "reasoning"),
    "action": ("action", "tool", "name"),
    "action_input": ("action_input", "arguments", "args", "input", "parameters", "tool_input"),
}
_FINAL_NAMES = {FINAL_ACTION, "finish", "final_answer", "final answer", "answer"}
_JSON_TYPES = {dict: "object", list: "array", str: "string", int: "number", float: "number",
               bool: "boolean", type(None): "null"}
_MAX_STARTS = 8  # braces tried as the start of the object: prose with braces, not a quadratic scan


@dataclass(frozen=True, slots=True)
class Decision:
    parsed: Parsed
    extra: int = 0  # further objects after the one used


def parse_decision(text: str, params: Mapping[str, ToolParams]) -> Decision:
    text = (text or "").strip()
    if not text:
        return Decision(ParseFailure("empty"))
    found = _first_object(text)
    if isinstance(found, ParseFailure):
        return Decision(found)
    obj, end = found
    return Decision(_read(obj, params), _count_more(text, end))


def _first_object(text: str) -> tuple[dict[str, Any], int] | ParseFailure:
    first = next((i for i, ch in enumerate(text) if ch in "{["), -1)
    if first < 0:
        return ParseFailure("no_object")
    if text[first] == "[":
        try:
            value, _ = raw_decode(text, first)
            if isinstance(value, list) and value and isinstance(value[0], dict):
                return ParseFailure("a_list", {"n": str(len(value))})
        except json.JSONDecodeError:
            pass
    error = None
    start = text.find("{")
    for _ in range(_MAX_STARTS):
        if start < 0:
            break
        try:
            value, end = raw_decode(text, start)
        except json.JSONDecodeError as e:
            error = error or _where(e, start)
            value, end = _python_literal(_balanced(text[start:])), -1
            if isinstance(value, dict):
                end = start + len(_balanced(text[start:]))
        if isinstance(value, dict):
            if too_deep(value):
                return ParseFailure("not_json", {"error": f"nested more than {MAX_DEPTH} levels deep"})
            return value, end
        start = text.find("{", start + 1)
    return ParseFailure("not_json", {"error": error or "no JSON object found"})


def _where(e: json.JSONDecodeError, start: int) -> str:
    """``Expecting value at character 12``, counted from the object's first brace."""
    if e.msg.startswith("nested") or e.pos < start:
        return e.msg
    return f"{e.msg.removesuffix(' at')} at character {e.pos - start}"


def _count_more(text: str, end: int) -> int:
    start, n = text.find("{", end), 0
    while start >= 0 and n < _MAX_STARTS:
        try:
            value, end = raw_decode(text, start)
        except json.JSONDecodeError:
            break
        n += isinstance(value, dict)
        start = text.find("{", end)
    return n


def _get(obj: dict[str, Any], key: str) -> tuple[str | None, Any]:
    for k in _KEYS[key]:
        if k in obj:
            return k, obj[k]
    return None, None


def _read(obj: dict[str, Any], params: Mapping[str, ToolParams]) -> Parsed:
    _, thought = _get(obj, "thought")
    thought = thought.strip() if isinstance(thought, str) else "" if thought is None else dumps(thought)
    key, action = _get(obj, "action")
    input_key, value = _get(obj, "action_input")
    if key is None:
        if "final_answer" in obj or "answer" in obj:  # {"thought": ..., "final_answer": ...}
            return _final(obj.get("final_answer", obj.get("answer")), thought)
        return ParseFailure("missing_keys", {"keys": ", ".join(map(str, obj)) or "(none)"}, thought)
    if not isinstance(action, str):
        return ParseFailure("action_not_string", {"type": _JSON_TYPES.get(type(action), "?")}, thought)
    name = _canonical(action.strip(), params)
    if name not in params and name.lower() in _FINAL_NAMES:
        return _final(value if input_key else obj.get("final_answer", obj.get("answer")), thought)
    if name not in params:
        return ParseFailure("unknown_action", {"action": name}, thought)
    shape = params[name]
    arguments = _arguments(value, shape) if input_key else ({} if not shape.required else None)
    if isinstance(arguments, str):
        return ParseFailure("bad_input", {"error": arguments}, thought)
    if arguments is None:
        return ParseFailure("no_input", {"tool": name}, thought)
    return ParsedAction(name, arguments, thought)


def _arguments(value: Any, shape: ToolParams) -> dict[str, Any] | str | None:
    """The arguments, or a string saying why ``value`` is none."""
    if isinstance(value, str) and value.strip().startswith("{"):
        try:
            value = loads(value)  # an object sent as a JSON string
        except json.JSONDecodeError:
            value = _python_literal(_balanced(value.strip())) or value
    if isinstance(value, dict):
        return value
    if value is None:
        return None if shape.required else {}
    if len(shape.names) == 1:  # the seed's calculator: "action_input": "15 + 27"
        return {shape.names[0]: value}
    if isinstance(value, str):
        arguments, error = parse_arguments(value, list(shape.names))  # a=1, b=2
        return arguments if arguments is not None else (error or "it is empty")
    return f"expected an object of arguments, got {_JSON_TYPES.get(type(value), '?')}"


def _final(value: Any, thought: str) -> Parsed:
    if isinstance(value, dict):  # {"answer": "..."}, or the one value it holds
        inner = value.get("answer", value.get("final_answer"))
        value = inner if inner is not None else next(iter(value.values())) if len(value) == 1 else dumps(value)
    answer = value.strip() if isinstance(value, str) else "" if value is None else dumps(value)
    return ParsedFinal(answer, thought) if answer else ParseFailure("empty_answer", thought=thought)
