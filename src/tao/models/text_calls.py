"""Tool calls a server returned as text: what a model's own format looks like in ``content``
when the server behind an OpenAI-compatible API has no parser for it (llama-cpp-python's
``python -m llama_cpp.server``, a plain vLLM without ``--tool-call-parser``, ...).

Read here, so the run goes on as with a server that parses them:

- Qwen / Hermes: ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` (one block a call);
- Llama 3.1+: ``<|python_tag|>{"name": ..., "parameters": {...}}`` (or ``arguments``), one or
  several objects separated by ``;``;
- Mistral: ``[TOOL_CALLS][{"name": ..., "arguments": {...}}, ...]``;
- no marker at all: a reply that is nothing but such an object or a list of them, bare or in
  a fenced block (what the Qwen 0.5B writes behind ``llama_cpp.server``).

A call counts only when its name is one of the request's tools, so prose that happens to look
like JSON stays prose. Arguments given as a JSON string are decoded; anything else that is not
an object becomes the call's ``parse_error``, which the tool layer answers precisely.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterable
from typing import Any

from ..messages import ToolCall
from ..safe_json import loads

_HERMES = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.S)
_FENCED = re.compile(r"\A```[a-zA-Z]*\s*\n(.*?)\n?```\Z", re.S)
_MARKERS = ("<tool_call>", "<|python_tag|>", "[TOOL_CALLS]")


def parse(content: str, tools: Iterable[str]) -> tuple[str, list[ToolCall]]:
    """``(text before the calls, calls)``; ``(content, [])`` when it holds none."""
    names = set(tools)
    start = min((i for i in (content.find(m) for m in _MARKERS) if i >= 0), default=-1)
    if not names:
        return content, []
    if start < 0:  # only a reply that is wholly a call (or calls): prose stays prose
        body = content.strip()
        fenced = _FENCED.match(body)
        found = _decode(fenced.group(1) if fenced else body) if fenced or body[:1] in "{[" \
            else None
        objects = found if isinstance(found, list) else [found]
        calls = [c for c in (_call(o, names, bare=True) for o in objects) if c is not None]
        return ("", calls) if calls and len(calls) == len(objects) else (content, [])
    head, rest = content[:start].strip(), content[start:]
    if rest.startswith("<tool_call>"):
        objects = [_decode(block) for block in _HERMES.findall(rest)]
    elif rest.startswith("<|python_tag|>"):
        body = rest[len("<|python_tag|>"):].replace("<|eom_id|>", "").replace("<|eot_id|>", "")
        objects = [_decode(part) for part in _split_objects(body)]
    else:
        found = _decode(rest[len("[TOOL_CALLS]"):])
        objects = found if isinstance(found, list) else [found]
    calls = [c for c in (_call(o, names) for o in objects) if c is not None]
    return (head, calls) if calls else (content, [])


def _decode(text: str) -> Any:
    try:
        return loads(text.strip())
    except (ValueError, RecursionError):
        return None


def _split_objects(text: str) -> list[str]:
    """``{...}; {...}`` into its objects, by brace depth outside strings."""
    parts, depth, begin, in_string, escaped = [], 0, None, False, False
    for i, ch in enumerate(text):
        if in_string:
            escaped, in_string = (not escaped and ch == "\\"), in_string and (escaped or ch != '"')
            continue
        if ch == '"':
            in_string = True
        elif ch == "{":
            depth += 1
            begin = i if depth == 1 else begin
        elif ch == "}" and depth:
            depth -= 1
            if depth == 0 and begin is not None:
                parts.append(text[begin:i + 1])
    return parts


def _call(obj: Any, names: set[str], bare: bool = False) -> ToolCall | None:
    """``bare``: with no marker, only an object of a tool's name and its arguments counts."""
    if not isinstance(obj, dict):
        return None
    if isinstance(obj.get("function"), dict):  # {"type": "function", "function": {...}}
        obj = obj["function"]
    name = obj.get("name")
    if name not in names:
        return None
    if bare and not ({"arguments", "parameters"} & set(obj) and set(obj) <= {
            "name", "arguments", "parameters", "type", "id"}):
        return None
    args = obj.get("arguments", obj.get("parameters", {}))
    error = None
    if isinstance(args, str):
        try:
            args = json.loads(args) if args.strip() else {}
        except ValueError as e:
            args, error = {}, f"arguments are not JSON: {e}"
    if not isinstance(args, dict):
        args, error = {}, f"arguments must be a JSON object, not {type(args).__name__}"
    return ToolCall(f"call_{uuid.uuid4().hex[:12]}", name, args, error)
