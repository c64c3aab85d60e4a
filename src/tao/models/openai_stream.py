"""One streamed chat-completions attempt as it arrives: text and tool-call deltas accumulated,
the body's first bytes kept so that an answer that is not an event stream can be shown, and the
errors that tell a cut stream from garbage.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from ..messages import Message, ToolCall, Usage, estimate_tokens
from .base import ModelResponse
from .openai_wire import _clip, parse_arguments

SAMPLE_BYTES = 2048  # of a bad answer's body, kept to say what it was


class _Turn:
    """Accumulates the chunks of one streamed attempt."""

    def __init__(self) -> None:
        self.text: list[str] = []
        self.calls: dict[int, list[str]] = {}  # index -> [id, name, arguments]
        self.finish_reason: str | None = None
        self.usage = Usage()
        self.got_usage = False  # llama-cpp-python's server, among others, never sends it
        self.whole = False  # the server answered whole, not as an event stream
        self.chunks = 0
        self.content_type = ""
        self.received = bytearray()  # the body's first bytes, to show what a bad answer was

    def record(self, content_type: str) -> None:
        self.content_type = content_type.split(";")[0].strip()

    def keep(self, part: bytes) -> None:
        """Called with each piece of the body as it is read: its first bytes are kept."""
        if len(self.received) < SAMPLE_BYTES:
            self.received += part[: SAMPLE_BYTES - len(self.received)]

    def garbage(self, e: Exception) -> str | None:
        """What was wrong with a body that is not a valid event stream, or None when it is one
        (that merely ended too soon)."""
        if isinstance(e, UnicodeDecodeError):
            at = max(0, e.start - 40)
            return (f"bytes that are not UTF-8 text (at byte {e.start} of a line): "
                    f"{'...' if at else ''}{_clip_bytes(bytes(e.object)[at:])}")
        if isinstance(e, json.JSONDecodeError):
            return f"a data: line that is not JSON ({e.msg}): {_clip(e.doc, 120)!r}"
        if isinstance(e, _NotAChunk):
            return f"a data: line that is not a chat.completion.chunk: {_clip(repr(e.args[0]), 120)}"
        if not self.chunks and bytes(self.received).strip():
            return (f"{self.content_type or 'no Content-Type'} without any data: events: "
                    f"{_clip_bytes(bytes(self.received))}")
        return None

    def feed(self, chunk: Any) -> str:
        """One ``chat.completion.chunk`` as the JSON object it arrived as (``openai_http``)."""
        if not isinstance(chunk, dict) or "choices" not in chunk:  # a string, a list, ...
            raise _NotAChunk(chunk)
        usage = chunk.get("usage")
        if isinstance(usage, dict):
            self.usage = Usage(usage.get("prompt_tokens") or 0, usage.get("completion_tokens") or 0)
            self.got_usage = True
        choices = chunk["choices"]
        if not choices:
            self.chunks += 1
            return ""
        choice = _object(choices[0] if isinstance(choices, list) else None, chunk)
        if choice.get("finish_reason"):
            self.finish_reason = choice["finish_reason"]
        delta = _object(choice.get("delta") or {}, chunk)
        calls = delta.get("tool_calls") or []
        if not isinstance(calls, list):
            raise _NotAChunk(chunk)
        for tc in calls:
            tc = _object(tc, chunk)
            index, call_id = tc.get("index"), tc.get("id")
            if not (index is None or isinstance(index, int)):
                raise _NotAChunk(chunk)
            if index is None:  # a server that leaves out the index: a new id starts a new call
                known = [i for i, c in self.calls.items() if c[0] == call_id]
                index = known[0] if known else (len(self.calls) if call_id or not self.calls
                                                else max(self.calls))
            acc = self.calls.setdefault(index, ["", "", ""])
            if call_id and not acc[0]:
                acc[0] = str(call_id)
            fn = _object(tc.get("function") or {}, chunk)
            name, arguments = fn.get("name"), fn.get("arguments")
            if name and name != acc[1]:
                acc[1] += str(name)
            if arguments:
                acc[2] += arguments if isinstance(arguments, str) else json.dumps(arguments)
        text = delta.get("content") or ""
        if not isinstance(text, str):
            raise _NotAChunk(chunk)
        if text:
            self.text.append(text)
        self.chunks += 1  # a valid one: its parts were of the right types
        return text

    def response(self, params: dict[str, Any] | None = None,
                 tool_names: list[str] | None = None) -> ModelResponse:
        """The call's reply; its usage as the server counted it, else estimated from ``params``
        (the request) and the reply, and marked so. Tool calls the server left in the text
        (``text_calls``) are read as calls."""
        calls = []
        for index in sorted(self.calls):
            call_id, name, raw = self.calls[index]
            arguments, error = parse_arguments(raw)
            calls.append(ToolCall(call_id or f"call_{uuid.uuid4().hex[:12]}", name, arguments,
                                  error))
        text = "".join(self.text)
        if tool_names is None:
            tool_names = [t["function"]["name"] for t in (params or {}).get("tools") or ()]
        if not calls and tool_names:  # a call the server left as text (or was asked for so)
            from .text_calls import parse

            text, calls = parse(text, tool_names)
        message = Message.assistant(text, calls)
        usage = self.usage if self.got_usage else Usage(
            estimate_prompt(params), estimate_tokens(message.content + "".join(
                c.name + json.dumps(c.arguments, ensure_ascii=False) for c in calls)), True)
        return ModelResponse(message, usage, self.finish_reason)


class _Incomplete(Exception):
    """The body ended cleanly but the model never finished (no finish_reason): a cut stream."""


class _NotAChunk(Exception):
    """A ``data:`` event that is JSON but not a chunk (not an object, or its parts of the
    wrong type)."""


def _object(value: Any, chunk: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _NotAChunk(chunk)
    return value


def _clip_bytes(data: bytes, n: int = 120) -> str:
    """Received bytes, shortened: as text when they are UTF-8, else as a bytes literal."""
    try:
        return repr(_clip(" ".join(data.decode("utf-8").split()), n))
    except UnicodeDecodeError:
        return _clip(repr(data[:n]), n)


def estimate_prompt(params: dict[str, Any] | None) -> int:
    """The request's tokens by ``estimate_tokens``: its messages' text and tool calls, the tool
    schemas, and a few tokens of the chat template per message."""
    if not params:
        return 0
    text = []
    for m in params.get("messages") or ():
        content = m.get("content")
        text.append(content if isinstance(content, str) else json.dumps(content, ensure_ascii=False))
        text += [json.dumps(c, ensure_ascii=False) for c in m.get("tool_calls") or ()]
    text += [json.dumps(t, ensure_ascii=False) for t in params.get("tools") or ()]
    return estimate_tokens("".join(text)) + 4 * len(params.get("messages") or ())
