"""The OpenAI wire format, both ways: endpoint settings from the environment, tao ``Message``s
and ``ToolSpec``s as chat-completions JSON (UTF-8-safe), and tool-call arguments read back from it
(never raising: deep nesting and huge numbers are an error for the model). No I/O here; the
``openai`` package is not needed.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence
from typing import Any

from ..errors import ModelConfigError
from ..messages import Message
from .base import ToolSpec

OPENAI_BASE_URL = "https://api.openai.com/v1"
DEEPSEEK_BASE_URL = "https://api.deepseek.com"
DEFAULT_MODEL = "gpt-4o-mini"
DEEPSEEK_MODEL = "deepseek-chat"
NO_KEY = "not-needed"  # sent to servers that take any key (vLLM, Ollama, llama.cpp server)
#: Deeper tool arguments are refused (an observation for the model): no tool needs them, and
#: Python's recursion limit (json, validation, the trace) would otherwise end the run somewhere.
MAX_ARGUMENT_DEPTH = 100
_SURROGATE = re.compile("[\ud800-\udfff]")


def _env(*names: str) -> str | None:
    for name in names:
        value = os.environ.get(name)
        if value:
            return value
    return None


def resolve_settings(model: str | None = None, base_url: str | None = None,
                     api_key: str | None = None) -> tuple[str, str, str]:
    """``(model, base_url, api_key)`` from the arguments, then TAO_*, then OPENAI_*, then the
    DeepSeek fallback (DEEPSEEK_API_KEY, with DEEPSEEK_BASE_URL/DEEPSEEK_MODEL or DeepSeek's
    defaults). The DeepSeek key is only used when no base URL is configured or the URL is
    DeepSeek's, so it is never sent to another server. A configured base URL without any key
    gets ``"not-needed"`` (local servers); no key at all for a hosted API is a ModelConfigError.
    """
    base_url = base_url or _env("TAO_BASE_URL", "OPENAI_BASE_URL")
    model = model or _env("TAO_MODEL", "OPENAI_MODEL")
    if api_key is None:
        api_key = _env("TAO_API_KEY", "OPENAI_API_KEY")
    if api_key is None:
        deepseek_key = _env("DEEPSEEK_API_KEY")
        if deepseek_key and (base_url is None or "deepseek" in base_url):
            api_key = deepseek_key
            base_url = base_url or _env("DEEPSEEK_BASE_URL") or DEEPSEEK_BASE_URL
            model = model or _env("DEEPSEEK_MODEL") or DEEPSEEK_MODEL
        elif base_url is not None:
            api_key = NO_KEY
        else:
            raise ModelConfigError(
                "no API key for the OpenAI-compatible model: set TAO_API_KEY (with TAO_BASE_URL "
                "and TAO_MODEL for a non-OpenAI endpoint), OPENAI_API_KEY or DEEPSEEK_API_KEY, "
                "or pass api_key=... (any string for a local server that needs none)"
            )
    return model or DEFAULT_MODEL, (base_url or OPENAI_BASE_URL).rstrip("/"), api_key


# -- wire format ------------------------------------------------------------------------------
def wire_messages(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """tao messages -> OpenAI chat-completions ``messages`` (strings made ``wire_safe``)."""
    out: list[dict[str, Any]] = []
    for m in messages:
        content = wire_safe(m.content)
        if m.role == "tool":
            out.append({"role": "tool", "tool_call_id": wire_safe(m.tool_call_id) or "",
                        "content": content})
        elif m.role == "assistant" and m.tool_calls:
            out.append({"role": "assistant", "content": content or None, "tool_calls": [
                {"id": wire_safe(c.id), "type": "function",
                 "function": {"name": wire_safe(c.name),
                              "arguments": wire_safe(json.dumps(c.arguments, ensure_ascii=False))}}
                for c in m.tool_calls]})
        else:
            out.append({"role": m.role, "content": content})
    return out


def wire_tools(tools: Sequence[ToolSpec]) -> list[dict[str, Any]]:
    return [{"type": "function", "function": {"name": t.name, "description": t.description,
                                              "parameters": t.parameters}} for t in tools]


def wire_safe(text: str | None) -> str | None:
    """``text`` with each lone surrogate replaced by U+FFFD: a model's ``"\\udcff"`` escape, or
    undecodable bytes of a command line, must not make the next request unencodable."""
    return _SURROGATE.sub("\ufffd", text) if text else text


def parse_arguments(raw: str) -> tuple[dict[str, Any], str | None]:
    """The arguments string of a tool call -> ``(dict, None)`` or ``({}, why)``; never raises,
    whatever the model sent (the why becomes the model's observation)."""
    if not raw.strip():
        return {}, None
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as e:
        return {}, f"{e.msg} at character {e.pos} of {_shown(raw)}"
    except RecursionError:
        return {}, f"nested deeper than {MAX_ARGUMENT_DEPTH} levels: {_shown(raw, 80)}"
    except ValueError as e:  # e.g. an integer of more than 4300 digits
        return {}, f"{e} in {_shown(raw, 80)}"
    if not isinstance(value, dict):
        return {}, f"expected a JSON object, got {type(value).__name__} {_shown(raw)}"
    if _too_deep(value, MAX_ARGUMENT_DEPTH):
        return {}, f"nested deeper than {MAX_ARGUMENT_DEPTH} levels: {_shown(raw, 80)}"
    return value, None


def _too_deep(value: Any, limit: int) -> bool:
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (dict, list)):
            if depth > limit:
                return True
            stack.extend((v, depth + 1) for v in (item.values() if isinstance(item, dict) else item))
    return False


def _clip(s: str, n: int = 200) -> str:
    return s if len(s) <= n else s[:n] + "..."


def _shown(raw: str, n: int = 200) -> str:
    """``raw`` quoted and shortened to about ``n`` characters, escapes counted (a model's control
    characters and astral text must not make the observation ten times longer)."""
    return _clip(repr(raw), n)


def tools_as_text(params: dict[str, Any]) -> list[str]:
    """Rewrite a request for an endpoint that takes no ``tools``: the tool list goes into the
    system prompt with the ``<tool_call>`` form to answer in (``prompts/text_tools``), earlier
    calls and results become that text, and ``tools`` / ``tool_choice`` leave the request.
    Returns the tool names, whose calls ``text_calls`` then reads from the replies."""
    from .. import prompts
    from ..lang import detect_language

    specs = [t["function"] for t in params.pop("tools", None) or ()]
    params.pop("tool_choice", None)
    params.pop("parallel_tool_calls", None)
    messages = params["messages"]
    task = next((m.get("content") or "" for m in messages if m.get("role") == "user"), "")
    section = prompts.render(prompts.template("text_tools", detect_language(str(task))),
                             tools="\n".join(json.dumps(s, ensure_ascii=False) for s in specs))
    out: list[dict[str, Any]] = []
    for m in messages:
        if m.get("role") == "assistant" and m.get("tool_calls"):
            calls = "\n".join(
                "<tool_call>\n" + json.dumps({"name": c["function"]["name"],
                                              "arguments": _loads_or_text(c["function"]["arguments"])},
                                             ensure_ascii=False) + "\n</tool_call>"
                for c in m["tool_calls"])
            out.append({"role": "assistant", "content": "\n".join(
                p for p in (m.get("content") or "", calls) if p)})
        elif m.get("role") == "tool":
            out.append({"role": "user",
                        "content": f"<tool_response>\n{m.get('content') or ''}\n</tool_response>"})
        else:
            out.append(m)
    if out and out[0].get("role") == "system":
        out[0] = {**out[0], "content": f"{out[0].get('content') or ''}\n\n{section}"}
    else:
        out.insert(0, {"role": "system", "content": section})
    params["messages"] = out
    return [s["name"] for s in specs]


def _loads_or_text(raw: str) -> Any:
    try:
        return json.loads(raw)
    except (TypeError, ValueError):
        return raw
