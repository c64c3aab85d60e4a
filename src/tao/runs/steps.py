"""Each model call and each tool call of a run as a DBOS step, when the run executes as a DBOS
workflow (``tao.durable``: ``tao worker`` calls ``enable()``); nothing anywhere else.

Why both a step and the journal record. DBOS numbers a workflow's steps in the order they are
called and, when it recovers the workflow on another worker, serves the recorded output of each
step already done in that order - the engine's own replay, its step list (``DBOS.
list_workflow_steps``, the Conductor) and its queue limits see every call. Two things it does
not do, which tao's journal does, so the step carries the journal inside it:

- a step that started and never finished is run again (at least once). Inside the tool step the
  journal's committed start and the tool's idempotency key decide what a cut-short call may do
  (run again, reuse its key, or ask), as on one machine;
- the order of calls is the step's identity. A plan's parallel steps may finish in another order
  on the second run, so a recorded output can belong to another call. Each step records the
  call's key (the journal's key of the messages, or the tool and its arguments); a served output
  whose key is not this call's is not used, and the call goes to the journal, which looks it up
  by content.

Outputs are plain data (the reply's message, usage and finish reason; the tool result's text,
error flag and JSON value), never the Python objects, so a worker of another version reads them.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from ..messages import Message, Usage
from ..models.base import ModelResponse
from ..models.wrapped import WrappedModel

#: the steps' names in DBOS
MODEL_STEP, TOOL_STEP = "tao.model", "tao.tool"
ENABLED = False
_steps: dict[str, Any] = {}


def enable() -> None:
    """Register the two steps with DBOS (before ``DBOS.launch``); runs started from then on in
    a workflow record their calls as steps."""
    global ENABLED
    from dbos import DBOS

    if not _steps:
        _steps[MODEL_STEP] = DBOS.step(name=MODEL_STEP)(_produced)
        _steps[TOOL_STEP] = DBOS.step(name=TOOL_STEP)(_produced)
    ENABLED = True


def active() -> bool:
    """In a DBOS workflow, and not inside one of its steps (a step a tool starts - a sub-agent's
    calls - is part of that step, as DBOS has it)."""
    if not ENABLED:
        return False
    from dbos import DBOS

    return DBOS.workflow_id is not None and DBOS.step_id is None


async def _produced(key: str, produce: Callable[[], Awaitable[dict[str, Any]]]) -> dict[str, Any]:
    return {"key": key, **(await produce())}


class Stepped(WrappedModel):
    """The run's model door with each call a DBOS step (outside the journal's wrapper). The
    reply still streams: the step's body forwards each chunk as it comes; a step DBOS serves
    gives the recorded reply whole."""

    def __init__(self, model: Any):
        from .resume import ModelKeys

        super().__init__(model)
        self.keys = ModelKeys()

    async def stream(self, messages: Any, **kwargs: Any) -> AsyncIterator[Any]:
        key = self.keys(messages)
        chunks: asyncio.Queue[Any] = asyncio.Queue()
        ran = False

        async def produce() -> dict[str, Any]:
            nonlocal ran
            ran = True
            response = None
            async for chunk in self.inner.stream(messages, **kwargs):
                if type(chunk) is ModelResponse:
                    response = chunk
                else:
                    chunks.put_nowait(chunk)
            assert response is not None, "a model stream ends with its ModelResponse"
            return {"message": response.message.to_dict(), "usage": response.usage.to_dict(),
                    "finish_reason": response.finish_reason}

        step = asyncio.ensure_future(_steps[MODEL_STEP](key, produce))
        try:
            while True:
                getter = asyncio.ensure_future(chunks.get())
                await asyncio.wait({getter, step}, return_when=asyncio.FIRST_COMPLETED)
                if getter.done():
                    yield getter.result()
                    continue
                getter.cancel()
                while not chunks.empty():
                    yield chunks.get_nowait()
                break
            out = await step
        finally:
            if not step.done():
                step.cancel()
        if out.get("key") != key:  # another call's output (parallel steps, another order)
            async for chunk in self.inner.stream(messages, **kwargs):
                yield chunk
            return
        message = Message.from_dict(out["message"])
        if not ran and message.content:
            yield message.content
        yield ModelResponse(message, Usage.from_dict(out.get("usage") or {}),
                            out.get("finish_reason"))


def tool_key(call: Any) -> str:
    return json.dumps([call.name, call.arguments], sort_keys=True, ensure_ascii=False,
                      default=str)


async def tool_call(call: Any, run: Callable[[], Awaitable[Any]], tainted: Callable[[], bool],
                    taint: Callable[[], None]) -> Any:
    """``run()`` (the tool door's run side, journal included) as a DBOS step; its result."""
    from ..tools.base import ToolResult

    result: Any = None

    async def produce() -> dict[str, Any]:
        nonlocal result
        result = await run()
        value = result.value
        try:
            json.dumps(value)
        except (TypeError, ValueError):
            value = None
        return {"content": result.content, "is_error": result.is_error,
                "duration_s": result.duration_s, "value": value,
                "retryable": result.retryable, "tainted": tainted()}

    key = tool_key(call)
    out = await _steps[TOOL_STEP](key, produce)
    if result is not None:
        return result
    if out.get("key") != key:  # served for another call: the journal knows this one
        return await run()
    if out.get("tainted"):
        taint()
    return ToolResult(out["content"], out["is_error"], out.get("duration_s", 0.0),
                      out.get("value"), out.get("retryable", True))
