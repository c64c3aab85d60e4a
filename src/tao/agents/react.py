"""ReAct: think, act, observe - until the model answers or the turn budget runs out."""

from __future__ import annotations

import time
from dataclasses import replace
from collections.abc import AsyncIterator, Callable, Iterable
from typing import Any, Literal

from .. import prompts
from ..events import (Action, Error, Event, FinalAnswer, ModelRetry, Observation, RunFinished,
                      RunStarted, Thought, TokenDelta, TurnStarted)
from ..messages import Message, Usage
from ..models.base import Model, ModelResponse
from ..tools.base import Tool, Toolbox
from .base import Agent, Result, detect_language, make_guard, make_memory
from .protocols import JsonProtocol, TextProtocol, ToolsProtocol

PROTOCOLS = {"tools": ToolsProtocol, "text": TextProtocol, "json": JsonProtocol}


class ReActAgent(Agent):
    """``ReActAgent(model, tools, protocol="tools"|"text"|"json", max_turns=10, system_prompt=None,
    **guard)``.

    One turn is one model call. ``protocol="tools"`` uses native function calling (several calls
    in a turn run concurrently); ``"text"`` uses the seed 001 Thought/Action/Observation text -
    and seed 002's ``Action: write_file【path】`` + fenced block when a tool takes a long text -
    parsed tolerantly; ``"json"`` seed 003's ``{"thought", "action", "action_input"}`` object.
    Replies the protocol cannot use get a corrective observation and the loop goes on. ``language``
    ("zh"/"en") picks the prompt; by default it follows the task. ``memory``: see
    ``tao.memory.Memory`` (by default each call is fitted to the model's context). ``guard``: the guardrails'
    keywords (``allow= deny= approve= audit= max_tokens= max_cost= max_seconds= max_tool_calls=
    max_repeats=`` ..., see ``tao.guard``).
    """

    name = "react"

    def __init__(self, model: Model, tools: Iterable[Tool | Callable[..., Any]] = (), *,
                 protocol: Literal["tools", "text", "json"] = "tools", max_turns: int = 10,
                 system_prompt: str | None = None, language: str | None = None,
                 memory: Any = None, **guard: Any):
        if protocol not in PROTOCOLS:
            raise ValueError(f"protocol must be 'tools', 'text' or 'json', not {protocol!r}")
        if max_turns < 1:
            raise ValueError("max_turns must be at least 1")
        self.model = model
        self.memory = make_memory(memory)
        self.toolbox = self.memory.with_tools(tools if isinstance(tools, Toolbox) else Toolbox(tools))
        self.protocol = PROTOCOLS[protocol]()
        self.max_turns = max_turns
        self.system_prompt = system_prompt
        self.language = language
        self.guard = make_guard(guard)
        if protocol != "tools":
            self.name = f"react-{protocol}"

    async def stream(self, task: str) -> AsyncIterator[Event]:
        start = time.perf_counter()
        lang = self.language or detect_language(task)
        proto, toolbox = self.protocol, self.toolbox
        guard = self.guard.start(task, self.name, self.model.name, lang, toolbox)
        mem = self.memory.start(task, lang)  # recalled memories, history, context fitting
        model, door = guard.wrap(mem.wrap(self.model)), toolbox.bind(guard)  # both doors, guarded
        system = (self.system_prompt or proto.system_prompt(lang, toolbox)) + guard.system_note()
        messages = [Message.system(system), Message.user(task)]
        kwargs = proto.model_kwargs(self.model, toolbox, lang)
        usage, n_calls, turn = Usage(), 0, 0
        seen: set[tuple[str, str]] = set()
        notes = prompts.table("text_protocol")
        answer, status, error = None, "max_turns", None
        yield RunStarted(task, self.name, self.model.name)
        try:
            while turn < self.max_turns:
                turn += 1
                yield TurnStarted(turn)
                response = None
                async for chunk in proto.stream(model, messages, kwargs):
                    if type(chunk) is str:
                        yield TokenDelta(chunk, turn)
                    elif type(chunk) is ModelResponse:
                        response = chunk
                    else:
                        yield ModelRetry(turn, chunk.attempt, chunk.reason, chunk.delay_s)
                usage.add(response.usage)
                step = proto.read(response.message, lang, toolbox)
                messages.append(step.message)
                if step.thought:
                    yield Thought(step.thought, turn)
                if step.final is not None:
                    answer, status = step.final, "done"
                    yield FinalAnswer(answer, turn)
                    break
                if step.error is not None:
                    messages.append(step.correction)
                    yield Error(step.error, turn, recoverable=True)
                    continue
                async for event in guard.gate(step.calls, toolbox):  # approvals before Actions
                    yield event
                for call in step.calls:
                    yield Action(guard.shown(call), turn)
                results = await door.execute_all(step.calls)
                n_calls += len(step.calls)
                for call, res in zip(step.calls, results):
                    try:
                        key = (call.name, repr(sorted(call.arguments.items())))
                    except (RecursionError, ValueError):  # nested past the stack, a huge int
                        key = (call.name, call.id)
                    if key in seen:  # same call again: small models loop here; nudge them on
                        res = replace(res, content=res.content + notes[lang]["repeated"])
                    seen.add(key)
                    messages.append(proto.observation(call, res, lang))
                    yield Observation(call.id, call.name, res.content, res.is_error, turn, res.duration_s)
        except Exception as e:  # noqa: BLE001 - the run ends with status "error", history kept
            status, error = "error", f"{type(e).__name__}: {e}"
            yield Error(error, turn)
        result = Result(answer, status, turn, n_calls, usage, time.perf_counter() - start,
                        messages, error)
        yield RunFinished(guard.finish(await mem.finish(result, self.model)))
