"""Handoffs: one agent passes the conversation to another, whose answer ends the run.

``ReActAgent(model, tools, name="triage", handoffs=[analyst, planner])``: the model sees a tool
``transfer_to_analyst`` (and ``transfer_to_planner``) beside its own. When it calls one, its run
ends there (its own result, held back from the stream, names the target in ``handoff``), a
``HandedOff`` event says who takes over, and
the target agent runs the same task with the conversation so far before it - what
``input_filter`` leaves of it (by default all but the system prompt, the task and the transfer
call itself; ``remove_tools`` keeps only the words). The target may be of any architecture: a
ReAct triage agent hands to a CodeAct analyst or a Plan-and-Execute agent, and the last answer is
``arun``'s result, with the whole chain's turns, tool calls and usage. The run's ``deps`` and
typed ``output_type`` go along; each agent keeps its own guard and budgets, and spends against
the budgets of the agents before it in the chain too (their ``Meter`` is its parent): a run
started with ``max_cost=0.20`` costs at most that, whoever speaks. ``max_turns`` stays each
agent's own loop.

A chain of handoffs is bounded: after ``MAX_HANDOFFS`` a transfer tool answers with an error
and the agent must answer itself - two agents that keep passing the task back stop there.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from typing import Any

from ..events import Event, HandedOff, RunFinished, stamp
from ..messages import Message
from ..tools.base import Tool

#: handoffs in one chain; the next transfer is refused and the agent answers itself
MAX_HANDOFFS = 5


class Handoff:
    """``Handoff(agent, input_filter=None, description=None)``: how to hand over to ``agent``.
    An agent given in ``handoffs=`` is wrapped in one with the defaults."""

    def __init__(self, agent: Any, *, input_filter: Callable[[list[Message]], list[Message]]
                 | None = None, description: str | None = None):
        self.agent, self.input_filter = agent, input_filter
        self.description = description or (getattr(agent, "description", None) or "")
        self.tool_name = "transfer_to_" + (re.sub(r"\W+", "_", agent.name).strip("_") or "agent")

    def history(self, messages: Sequence[Message]) -> list[Message]:
        """The conversation the target starts from (before its task)."""
        kept = _conversation(messages)
        return self.input_filter(kept) if self.input_filter is not None else kept


def as_handoffs(items: Iterable[Any] | None) -> dict[str, Handoff]:
    """``handoffs=`` as a map of transfer tool name -> ``Handoff``; two targets may not share a
    name (their tools would)."""
    found: dict[str, Handoff] = {}
    for item in items or ():
        h = item if isinstance(item, Handoff) else Handoff(item)
        if h.tool_name in found:
            raise ValueError(f"two handoffs are called {h.tool_name!r}: give the agents "
                             "different name=")
        found[h.tool_name] = h
    return found


class TransferTool(Tool):
    """What the model calls to hand over. Its result is only what the model would read if the
    run went on; the run's context ends the run after it (``LoopContext``)."""

    side_effects = False

    def __init__(self, handoff: Handoff):
        from pydantic import BaseModel, Field

        self.handoff = handoff
        self.name = handoff.tool_name
        target = handoff.agent.name
        self.description = (f"Hand the conversation over to the agent {target!r}, which "
                            f"then answers the user. {handoff.description}").strip()

        class Args(BaseModel):
            reason: str = Field("", description="why this agent should take over")

        self.Args = Args

    def run(self, reason: str = "") -> str:
        return f"Handed over to {self.handoff.agent.name}."


def remove_tools(messages: list[Message]) -> list[Message]:
    """An ``input_filter``: only the words - no tool calls, no tool results."""
    return [m for m in messages if m.role != "tool" and not m.tool_calls]


def _conversation(messages: Sequence[Message]) -> list[Message]:
    """The source run's messages less its system prompt(s), its task (the first user message;
    the target gets the task itself) and the transfer call with its result."""
    rest = [m for m in messages if m.role != "system"]
    if rest and rest[0].role == "user":
        rest = rest[1:]
    for i in range(len(rest) - 1, -1, -1):  # the last turn that called a transfer tool
        calls = rest[i].tool_calls or ()
        if any(c.name.startswith("transfer_to_") for c in calls):
            ids = {c.id for c in calls}
            return [m for j, m in enumerate(rest)
                    if j != i and not (j > i and m.role == "tool" and m.tool_call_id in ids)]
    return rest


async def continued(agent: Any, task: str, run_id: str, events: AsyncIterator[Event],
                    options: Any) -> AsyncIterator[Event]:
    """The run's events, and - when it handed over - the target's run after them. One run to
    whoever watches: one ``RunFinished`` at the end (the handing agent's is held back, its
    spending kept), whose result is the target's answer with the turns, tool calls, usage and
    time of the whole chain."""
    last, held = 0, None
    async for event in events:
        if type(event) is RunFinished and event.result.handoff:
            held = event  # its number goes to the HandedOff that takes its place
            continue
        last = event.seq or last
        yield event
    handed = agent.__dict__.get("_handed", {}).pop(run_id, None)
    if handed is None:
        if held is not None:  # pragma: no cover - a handoff result always leaves its target
            yield held
        return
    handoff, reason, messages, meter = handed
    depth = options.depth + 1
    target = handoff.agent
    last += 1
    yield stamp(HandedOff(agent.name, target.name, reason, depth), run_id, last, _now())
    # the target's events go on in this run's numbering (the web page and a trace dedupe and
    # resume by it); its journal keeps an id of its own, made from this run's, so a resumed
    # chain resumes the target too (its side effects not done twice); the session's history
    # (options.history) goes before what this agent said
    async for event in target.stream(task, output_type=options.output_type, deps=options.deps,
                                     history=[*options.history, *handoff.history(messages)],
                                     run_id=f"{run_id}.h{depth}", _depth=depth, _meter=meter):
        last += 1
        if type(event) is RunFinished and held is not None:
            event = RunFinished(_chained(held.result, event.result))
        yield stamp(event, run_id, last, event.ts or _now())


def _chained(first: Any, then: Any) -> Any:
    """The target's result, counting what the agent that handed over spent before it."""
    from dataclasses import replace

    from ..messages import Usage

    usage = Usage()
    usage.add(first.usage)
    usage.add(then.usage)
    return replace(then, turns=first.turns + then.turns,
                   tool_calls=first.tool_calls + then.tool_calls, usage=usage,
                   duration_s=first.duration_s + then.duration_s)


def _now() -> float:
    import time

    return time.time()
