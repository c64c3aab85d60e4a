"""ReplayModel: a recorded run's model, offline. It serves the model outputs of a JSONL trace
(``--trace``), so the run can be executed again - same tools, same decisions - without the
model, a network or an API key: to debug a tool, to test a fix against a run that went wrong.

    model = ReplayModel("run.jsonl")
    again = ReActAgent(model, tools).run(task)     # the recorded run's replies, in its order

Each reply is matched by the conversation it answered (the ``messages`` the run's ``Result``
kept), and else served in the recorded order; past the last one it raises ``ScriptExhausted``.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import AsyncIterator, Sequence
from typing import IO, Any

from ..errors import ScriptExhausted
from ..messages import Message, Usage, model_key
from .base import Chunk, Model, ModelResponse, ToolSpec


def _key(messages: Sequence[Message]) -> str:
    return model_key(messages)


class ReplayModel(Model):
    """``ReplayModel(trace)``: ``trace`` is a JSONL trace's path or open file, or its events."""

    def __init__(self, trace: str | os.PathLike[str] | IO[str] | Sequence[Any], *,
                 name: str | None = None):
        from ..events import Nested, RunFinished, RunStarted

        if isinstance(trace, (str, os.PathLike)) or hasattr(trace, "read"):
            from ..sinks.jsonl import read_trace

            trace = read_trace(trace)  # type: ignore[arg-type]
        events = list(trace)
        started = next((e for e in events if type(e) is RunStarted), None)
        finished = [e for e in events if type(e) is RunFinished]
        if not finished:
            raise ValueError("the trace has no run_finished event: its model outputs are in the "
                             "Result it ends with (was the run cut off? resume it: tao resume)")
        self.name = name or (started.model if started else "replay")
        self._by_key: dict[str, deque[Message]] = {}
        self._order: deque[Message] = deque()
        results = [finished[-1].result] + [e.event.result for e in events if type(e) is Nested
                                            and type(e.event) is RunFinished]
        for result in results:  # the run's own conversation, then its step agents'
            messages = result.messages
            for i, m in enumerate(messages):
                if m.role == "assistant":
                    self._by_key.setdefault(_key(messages[:i]), deque()).append(m)
                    self._order.append(m)
        self.calls: list[list[Message]] = []

    @property
    def remaining(self) -> int:
        return len(self._order)

    async def stream(self, messages: Sequence[Message], *, tools: Sequence[ToolSpec] | None = None,
                     response_format: dict[str, Any] | None = None, grammar: str | None = None,
                     stop: Sequence[str] | None = None, max_tokens: int | None = None,
                     tool_choice: str | None = None) -> AsyncIterator[Chunk]:
        self.calls.append(list(messages))
        same = self._by_key.get(_key(messages))
        if same:
            message = same.popleft()
            self._order.remove(message)
        elif self._order:
            message = self._order.popleft()
        else:
            raise ScriptExhausted(f"ReplayModel: the trace has no reply left for call "
                                  f"{len(self.calls)}")
        if message.content:
            yield message.content
        yield ModelResponse(message, Usage(), "tool_calls" if message.tool_calls else "stop")
