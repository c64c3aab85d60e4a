"""ScriptedModel: the public test double. Replays replies in order, instantly and exactly.

Use it to test your own agents and tools without a network or a model file::

    model = ScriptedModel([tool_call("add", a=15, b=27), "15 + 27 = 42"])
    result = ReActAgent(model, tools=[add]).run("15+27?")
    assert result.answer == "15 + 27 = 42" and result.turns == 2
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

from ..errors import ScriptExhausted
from ..messages import Message, ToolCall, Usage
from .base import Chunk, Model, ModelResponse, ToolSpec

_ids = itertools.count(1)

Reply = str | ToolCall | list[ToolCall] | Message | Callable[[list[Message]], Any]


def tool_call(name: str, /, **arguments: Any) -> ToolCall:
    """A tool call for a script: ``tool_call("calculator", operation="add", a=15, b=27)``."""
    return ToolCall(f"call_{next(_ids)}", name, arguments)


def _as_message(reply: Any) -> Message:
    if isinstance(reply, Message):
        return reply
    if isinstance(reply, str):
        return Message.assistant(reply)
    if isinstance(reply, ToolCall):
        return Message.assistant("", [reply])
    if isinstance(reply, (list, tuple)) and all(isinstance(c, ToolCall) for c in reply):
        return Message.assistant("", list(reply))
    if isinstance(reply, (list, tuple)) and reply and isinstance(reply[0], str):
        thought, *calls = reply  # ("I should add", tool_call(...)) - a thought with calls
        return Message.assistant(thought, list(calls))
    raise TypeError(f"ScriptedModel cannot replay {type(reply).__name__}: {reply!r}")


class ScriptedModel(Model):
    """Replays ``replies`` one per call. A reply is a ``str`` (text), a ``ToolCall`` or list of
    them, a ``(thought, call, ...)`` tuple, a ``Message``, or a callable that receives the
    messages sent and returns one of those. Running out raises ``ScriptExhausted``.

    ``chunk_size`` > 0 streams text in pieces of that many characters so streaming sinks can be
    tested. Usage is an estimate (4 characters a token) so token accounting is exercised too.
    Every call's messages are kept in ``calls`` for assertions.
    """

    def __init__(self, replies: Sequence[Reply], *, chunk_size: int = 0, name: str = "scripted"):
        self.replies = list(replies)
        self.chunk_size = chunk_size
        self.name = name
        self.calls: list[list[Message]] = []
        self._next = 0
        self._counted: tuple[Any, int, int] = (None, 0, 0)

    def _prompt_chars(self, messages: Sequence[Message]) -> int:
        """Characters sent, counted incrementally: an agent resends one growing list, and a
        test double must not make every turn cost O(history)."""
        key, seen, chars = self._counted
        if key is not messages or len(messages) < seen:
            seen, chars = 0, 0
        chars += sum(len(m.content) for m in messages[seen:])
        self._counted = (messages, len(messages), chars)
        return chars

    @property
    def remaining(self) -> int:
        return len(self.replies) - self._next

    async def stream(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[ToolSpec] | None = None,
        response_format: dict[str, Any] | None = None,
        grammar: str | None = None,
        stop: Sequence[str] | None = None,
        max_tokens: int | None = None,
        tool_choice: str | None = None,
    ) -> AsyncIterator[Chunk]:
        prompt_chars = self._prompt_chars(messages)
        messages = list(messages)
        self.calls.append(messages)
        if self._next >= len(self.replies):
            raise ScriptExhausted(
                f"ScriptedModel ran out of replies: call {self._next + 1} but only "
                f"{len(self.replies)} scripted"
            )
        reply = self.replies[self._next]
        self._next += 1
        if callable(reply) and not isinstance(reply, (ToolCall, Message)):
            reply = reply(messages)
        message = _as_message(reply)
        text = message.content
        if self.chunk_size and text:
            for i in range(0, len(text), self.chunk_size):
                yield text[i : i + self.chunk_size]
        elif text:
            yield text
        out_chars = len(text) + sum(len(str(c.arguments)) + len(c.name) for c in message.tool_calls)
        usage = Usage(prompt_chars // 4 + 1, out_chars // 4 + 1)
        yield ModelResponse(message, usage, "tool_calls" if message.tool_calls else "stop")
