"""The embedded model's own tool-calling form: the chat template's tools section and
``<tool_call>`` blocks, as Qwen2.5 was trained on, instead of tao's JSON action object.

``LocalModel(tool_format="native")`` (or ``TAO_LOCAL_TOOLS=native``) sends the tools to the
GGUF's chat template (its ``# Tools`` system section), writes earlier calls back as the template
writes ``tool_calls``, and holds each reply by ``grammar.native_tools_grammar`` to calls or an
answer in plain text. Whether a question needs a tool at all is then the model's trained
decision, not a key in an object that always offers ``"tool"`` first.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from itertools import count
from typing import Any

from ..messages import Message, ToolCall
from ..safe_json import loads
from .base import ToolSpec

FORMATS = ("json", "native")
_CALL = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.DOTALL)
_ids = count(1)


def template_tools(tools: Sequence[ToolSpec]) -> list[dict[str, Any]]:
    """The tools as the chat template's ``tools`` variable (OpenAI's function form)."""
    return [{"type": "function", "function": {"name": t.name, "description": t.description,
                                              "parameters": t.parameters or {"type": "object"}}}
            for t in tools]


def wire(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """Messages in the template's terms: an assistant's calls as ``tool_calls`` (the template
    writes them as ``<tool_call>`` blocks), tool results as ``tool`` turns."""
    out: list[dict[str, Any]] = []
    for m in messages:
        if m.role == "assistant" and m.tool_calls:
            out.append({"role": "assistant", "content": m.content or "", "tool_calls": [
                {"type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                for c in m.tool_calls]})
        else:
            out.append({"role": m.role, "content": m.content})
    return out


def read(text: str) -> Message:
    """A reply under ``native_tools_grammar``: its calls, or its text as the answer. A call
    whose JSON was cut (``max_tokens``) or is not an object with a name is dropped; a reply of
    only such calls comes back empty, so the agent asks again."""
    blocks = _CALL.findall(text)
    if not blocks and not text.lstrip().startswith("<tool_call>"):
        return Message.assistant(text.strip())
    calls, seen = [], set()
    for block in blocks:
        try:
            obj = loads(block)
        except (json.JSONDecodeError, ValueError, RecursionError):
            continue
        if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
            continue
        args = obj["arguments"] if isinstance(obj.get("arguments"), dict) else {}
        same = json.dumps([obj["name"], args], sort_keys=True, default=str)
        if same not in seen:  # the same call twice in one reply would only run twice
            seen.add(same)
            calls.append(ToolCall(f"local_{next(_ids)}", obj["name"], args))
    return Message.assistant("", calls)
