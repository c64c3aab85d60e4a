"""Any agent as a tool of another agent: ``agent_as_tool(agent, "researcher", "Looks things up")``.

The tool takes one argument, ``task`` (text), runs the agent on it and returns its answer; a run
that ends without an answer is a tool error the calling model reads. ``PlanExecuteAgent`` runs an
``AgentTool`` step itself so that the sub-agent's events reach its stream as ``Nested`` events;
other callers (a ``ReActAgent``) just see the tool's result - pass ``sinks=`` to watch the inner run.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from ..agents.base import Agent, Result
from ..events import Event, Nested, RunFinished
from ..tools.base import Tool

Sink = Callable[[Event], Any]


def nest(step_id: str, event: Event) -> Nested:
    """``event`` of a sub-agent that runs ``step_id``, as its parent emits it (flat nesting)."""
    if type(event) is Nested:
        return Nested(f"{step_id}/{event.step_id}", event.depth + 1, event.event)
    return Nested(step_id, 1, event)


class AgentTool(Tool):
    """A tool that runs an agent. ``agent`` is an ``Agent`` or a factory returning a fresh one
    per call (safer when calls may run concurrently and the agent keeps state)."""

    def __init__(self, agent: Agent | Callable[[], Agent], name: str, description: str,
                 sinks: Iterable[Sink] = ()):
        if not name:
            raise ValueError("an agent tool needs a name")
        self.agent = agent
        self.name = name
        self.description = description
        self.sinks = list(sinks)
        self._args: Any = None

    #: the calling run's ``tao.RunContext`` comes in as ``ctx`` (never in the schema): its
    #: ``deps`` go on to the inner run, as a user of ``agent.run(task, deps=...)`` expects
    context_param = "ctx"

    def args_model(self) -> Any:
        if self._args is None:
            from pydantic import ConfigDict, Field, create_model

            self._args = create_model(
                f"{self.name}_args", __config__=ConfigDict(extra="forbid"),
                task=(str, Field(..., description="what the agent should do, in full sentences")))
        return self._args

    def make_agent(self) -> Agent:
        return self.agent if isinstance(self.agent, Agent) else self.agent()

    async def stream(self, task: str, step_id: str | None = None, deps: Any = None):
        """The inner run's events (wrapped in ``Nested`` when ``step_id`` is given); ``deps``:
        the calling run's, handed on."""
        from .. import (
            tracing,  # outside a plan the parent's stream does not carry our events
        )

        report, key = (tracing.SINK.get() if step_id is None else None), str(id(task))
        async for event in self.make_agent().stream(task, deps=deps):
            for sink in self.sinks:
                sink(event)
            if report is not None:
                report.forward(self.name, key, event)
            yield nest(step_id, event) if step_id is not None else event

    async def run(self, task: str, ctx: Any = None) -> str:
        result = None
        async for event in self.stream(task, deps=getattr(ctx, "deps", None)):
            if type(event) is RunFinished:
                result = event.result
        return answer_of(result, self.name)

    def is_async(self) -> bool:
        return True


def answer_of(result: Result | None, name: str) -> str:
    """The answer of a sub-agent's run, or an exception saying why there is none."""
    if result is None:
        raise RuntimeError(f"agent {name!r} ended without a result")
    if result.ok and result.answer:
        return result.answer
    why = result.error or ("it stopped at its turn limit" if result.status == "max_turns"
                           else "it gave no answer")
    raise RuntimeError(f"agent {name!r} did not finish ({result.status}): {why}")


def agent_as_tool(agent: Agent | Callable[[], Agent], name: str, description: str, *,
                  sinks: Iterable[Sink] = ()) -> AgentTool:
    """Make ``agent`` a tool named ``name`` that another agent can call with ``{"task": ...}``."""
    return AgentTool(agent, name, description, sinks)
