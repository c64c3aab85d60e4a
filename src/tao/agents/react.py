"""ReAct: think, act, observe - until the model answers or the turn budget runs out."""

from __future__ import annotations

from dataclasses import replace
from collections.abc import AsyncIterator, Callable, Iterable
from typing import Any, Literal

from .. import prompts
from ..events import Error, Event, FinalAnswer, Observation, RunStarted, Thought, TurnStarted
from ..messages import Message
from ..models.base import Model
from ..tools.base import Tool, Toolbox
from .base import Agent, detect_language, make_guard, make_memory
from .context import LoopContext
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
    max_repeats=`` ..., see ``tao.guard``). ``output_type``: the run's answer as a validated value
    in ``Result.output`` (``tao.output``; ``run(..., output_type=)`` for one run), an answer that
    does not validate sent back ``output_retries`` times.
    """

    name = "react"

    def __init__(self, model: Model, tools: Iterable[Tool | Callable[..., Any]] = (), *,
                 protocol: Literal["tools", "text", "json"] = "tools", max_turns: int = 10,
                 system_prompt: str | None = None, language: str | None = None,
                 memory: Any = None, output_type: Any = None, output_retries: int = 1,
                 name: str | None = None, handoffs: Iterable[Any] | None = None, **guard: Any):
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
        self.guard = make_guard(guard, type(self))
        self.typed(output_type, output_retries)
        if protocol != "tools":
            self.name = f"react-{protocol}"
        self.named(name, handoffs)

    async def loop(self, task: str, run_id: str) -> AsyncIterator[Event]:
        lang = self.language or detect_language(task)
        proto, toolbox = self.protocol, self.toolbox
        run = LoopContext(self, task, lang, toolbox, run_id)
        system = ((self.system_prompt or proto.system_prompt(lang, toolbox))
                  + run.guard.system_note() + run.output_note())
        messages = [Message.system(system), Message.user(task)]
        kwargs = proto.model_kwargs(self.model, toolbox, lang)
        if run.output is not None and isinstance(proto, ToolsProtocol):  # the answer's schema
            kwargs["response_format"] = run.output.response_format()
        n_calls, turn, seen = 0, 0, Repeats(lang)
        answer, status, error = None, "max_turns", None
        yield RunStarted(task, self.name, self.model.name)
        try:
            async for event in run.opening(messages):  # a checklist, where one is asked for
                yield event
            while turn < self.max_turns:
                turn += 1
                yield TurnStarted(turn)
                asked = proto.answer_only(kwargs, self.model) if run.answer_now else kwargs
                async for event in run.model_turn(proto.stream(run.model, messages, asked), turn):
                    yield event
                step = proto.read(run.response.message, lang, toolbox)
                messages.append(step.message)
                if step.thought:
                    yield Thought(step.thought, turn)
                if step.final is not None and (fix := run.checked(step.final)) is not None:
                    messages.append(Message.user(fix))  # not the type asked for: once more
                    yield Error(fix, turn, recoverable=True)
                    continue
                if step.final is not None:
                    answer, status = step.final, "done"
                    yield FinalAnswer(answer, turn)
                    break
                if step.error is not None:
                    messages.append(step.correction)
                    yield Error(step.error, turn, recoverable=True)
                    continue
                async for event in run.tool_turn(step.calls, turn):
                    yield event
                n_calls += len(step.calls)
                for call, res in zip(step.calls, run.results):
                    res = seen.nudged(call, res)  # the same call again: small models loop here
                    messages.append(proto.observation(call, res, lang))
                    yield Observation(call.id, call.name, res.content, res.is_error, turn, res.duration_s)
                if run.ended:  # handed over: the target's answer ends the run
                    status = "done"
                    break
        except Exception as e:  # noqa: BLE001 - the run ends with status "error", history kept
            status, error = "error", f"{type(e).__name__}: {e}"
            yield Error(error, turn)
        yield await run.finish(answer, status, turn, n_calls, messages, error)


class Repeats:
    """The calls a run made, so a call made again with the same arguments and the same result
    gets a nudge in its observation: small models loop on one call. A call whose result
    changed (a command run again after its file was fixed) is news, not a loop."""

    def __init__(self, lang: str):
        self.seen: dict[tuple[str, str], str] = {}
        self.note = prompts.table("text_protocol")[lang]["repeated"]

    def nudged(self, call: Any, result: Any) -> Any:
        try:
            key = (call.name, repr(sorted(call.arguments.items())))
        except (RecursionError, ValueError):  # nested past the stack, a huge int
            key = (call.name, call.id)
        if result.is_error:  # a failure again is the run context's (``tao.agents.streak``)
            return result
        repeated = self.seen.get(key) == result.content
        self.seen[key] = result.content
        return replace(result, content=result.content + self.note) if repeated else result
