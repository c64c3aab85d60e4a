"""OpenTelemetry spans from a run's event stream, named by the GenAI semantic conventions.

    invoke_agent {agent}            one per run (a plan's step agents and agents used as tools
      chat {model}                  nested under the step or tool call that started them)
      execute_tool {tool}           one per tool call, and one per plan step that calls a tool
      execute_tool python           one per code block CodeAct runs
      plan_step {id}                a plan step run by the step agent
        invoke_agent {agent}
      handoff {target}              the agent handed over (``handoffs=``): the run's span
        invoke_agent {target}       stays open until the target's answer ends the chain

Spans take their times from the events (``ts``), so steps that ran in parallel overlap, and a
recorded trace can be turned into spans after the fact. ``chat`` spans take their exact times
and token usage from the model door (``tao.tracing.traced_model``) when it recorded the call;
the usage of a run's ``chat`` spans adds up to its ``Result.usage``.

    from opentelemetry import trace
    agent.run(task, sinks=[OtelSink(trace.get_tracer("my-app"))])

or, for every run of the process, ``tao.instrument()``.
"""

from __future__ import annotations

import os
import time
from typing import Any

from ..events import (
    Action,
    ApprovalDecided,
    ApprovalRequested,
    Checklist,
    CodeExecution,
    Error,
    Event,
    ExecutionFinished,
    HandedOff,
    ModelRetry,
    Nested,
    Observation,
    Replanned,
    RunFinished,
    RunStarted,
    StepFailed,
    StepFinished,
    StepRetried,
    StepSkipped,
    StepStarted,
    TokenDelta,
    TurnStarted,
)
from ..safe_json import dumps

#: model calls recorded at the model door (``tao.tracing.traced_model``), per run id, until the
#: run's sink turns them into ``chat`` spans. Kept here, in the sink that reads them, so the
#: tracing wrapper above writes down into it and nothing here imports upwards.
CALLS: dict[str, list[tuple[int, int, str, str, int, int]]] = {}

CAPTURE = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"

_MARKS = {  # what the span event of these says (no model or tool text: see CAPTURE)
    ModelRetry: lambda e: {"tao.attempt": e.attempt, "tao.reason": e.reason[:200]},
    Error: lambda e: {"tao.recoverable": e.recoverable, "error.type": "agent_error"},
    ApprovalRequested: lambda e: {"gen_ai.tool.name": e.tool, "gen_ai.tool.call.id": e.call_id},
    ApprovalDecided: lambda e: {"gen_ai.tool.name": e.tool, "gen_ai.tool.call.id": e.call_id,
                                "tao.verdict": e.verdict, "tao.by": e.by},
    StepSkipped: lambda e: {"tao.plan.step.id": e.step_id},
    Replanned: lambda e: {"tao.plan.replan": e.replan},
}


def _ns(event: Event) -> int:
    ts = getattr(event, "ts", None)
    return int(ts * 1e9) if ts is not None else time.time_ns()


class _Run:
    __slots__ = ("chat_at", "ctx", "handoff", "model", "relay", "run_id", "span", "steps", "tools")

    def __init__(self, span: Any, ctx: Any, run_id: str | None, model: str):
        self.span, self.ctx, self.run_id, self.model = span, ctx, run_id, model
        self.chat_at: int | None = None  # a model call is under way since (ns)
        self.tools: dict[str, Any] = {}
        self.steps: dict[str, Any] = {}
        self.relay = False  # the run passes on another run's events as its own (Reflexion)
        self.handoff: Any = None  # the open ``handoff`` span, once the run handed over


class OtelSink:
    """A sink turning one run's events (its sub-agents' included) into spans of ``tracer``
    (default: the global provider's). ``context``: the OpenTelemetry context the run's root
    span is a child of (default: the current one). ``capture``: put tool arguments and results
    on the spans (``gen_ai.tool.call.arguments`` / ``.result``); off unless
    ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true``, as in the other GenAI
    instrumentations - what a tool read or returned may be private."""

    def __init__(self, tracer: Any = None, context: Any = None, *, capture: bool | None = None):
        from opentelemetry import context as otel_context
        from opentelemetry import trace

        if capture is None:
            capture = os.environ.get(CAPTURE, "").strip().lower() in ("1", "true")
        self.capture = capture
        self._trace = trace
        self.tracer = tracer or trace.get_tracer("tao")
        self.context = context if context is not None else otel_context.get_current()
        self.runs: dict[str, _Run] = {}
        self._claimed: set[int] = set()  # tool spans an AgentTool's run was nested under
        self._carried: set[str] = set()  # sub-runs whose events came nested or forwarded
        self._direct: dict[str, list[Event]] = {}  # sub-runs' events as they ran, meanwhile
        self._done: list[tuple[int, int, Any]] = []  # ended tool and step spans: start, end, id
        self._root: Any = None
        #: handoffs: the key of a run that handed over -> its target's, where the stream's
        #: next events go; and the target's parent span context and own run id, until it starts
        self._handed: dict[str, str] = {}
        self._targets: dict[str, tuple[Any, str | None]] = {}

    def __call__(self, event: Event) -> None:
        self._on("", event, None)

    def forward(self, tool: str, key: str, event: Event) -> None:
        """An event of a sub-agent that tool ``tool`` runs outside any plan (its events do not
        pass through the parent's stream); ``key`` tells that run apart from others."""
        parent = None
        if type(event) is RunStarted:
            parent = self._open_tool(tool)
        self._carry(event)
        self._on(f"tool:{getattr(event, 'run_id', None) or key}", event, parent)

    def direct(self, event: Event) -> None:
        """An event of a run started inside this one, as it leaves that run (``tracing``): kept
        until the run turns out to be carried (a plan step's, an ``AgentTool``'s), or else -
        an agent a tool function ran itself - traced at ``close`` under the tool call or step
        it ran in (by time), so that no run in the tree goes missing."""
        rid = getattr(event, "run_id", None)
        if rid is not None and rid not in self._carried:
            self._direct.setdefault(rid, []).append(event)

    def _carry(self, event: Event) -> None:
        self._carry_id(getattr(event, "run_id", None))

    def _carry_id(self, rid: str | None) -> None:
        if rid is not None and rid not in self._carried:
            self._carried.add(rid)
            self._direct.pop(rid, None)

    def close(self) -> None:
        """End what a run that stopped early left open (the consumer broke off), and trace
        the runs started inside this one that no stream carried (see ``direct``)."""
        now = time.time_ns()
        for run in list(self.runs.values()):
            self._end_run(run, now)
        self.runs.clear()
        orphans = sorted((events for rid, events in list(self._direct.items())
                          if rid not in self._carried and events), key=lambda es: _ns(es[0]))
        self._direct.clear()
        for events in orphans:  # in the order they started: one may have run inside another
            start = _ns(events[0])
            inside = [d for d in self._done if d[0] <= start <= d[1]]
            parent = (self._trace.set_span_in_context(self._trace.NonRecordingSpan(
                max(inside, key=lambda d: d[0])[2])) if inside else self._root)
            for event in events:
                self._on(f"direct:{events[0].run_id}", event, parent)
        for run in list(self.runs.values()):
            self._end_run(run, now)
        self.runs.clear()

    # -- one event ---------------------------------------------------------------------------
    def _on(self, key: str, event: Event, parent: Any, at: int | None = None) -> None:
        while key in self._handed:  # after a handoff the stream speaks for the target
            key = self._handed[key]
        if type(event) is Nested:
            self._nested(key, event)
            return
        at = at if at is not None else _ns(event)
        if type(event) is RunStarted:
            self._start_run(key, event, parent, at)
            return
        run = self.runs.get(key)
        if run is None:
            return  # events of a run whose start we never saw
        kind = type(event)
        if kind is TokenDelta or run.relay and kind is not RunFinished:
            return
        if kind is ModelRetry:  # the call goes on
            run.span.add_event(kind.kind, _MARKS[kind](event), timestamp=at)
            return
        if kind is Checklist:  # the checklist's own call, before turn 1 (Agent.checklist)
            self._chats(run, at, at)
            return
        if run.chat_at is not None:  # the first event after a model call: it has returned
            failed = kind is Error and not event.recoverable  # ...or failed, ending the run
            self._chats(run, run.chat_at, at, event.message if failed else None)
        if kind is TurnStarted:
            run.chat_at = at
        elif kind is Action:
            call = event.call
            attrs = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": call.name,
                     "gen_ai.tool.call.id": call.id, "gen_ai.tool.type": "function"}
            if self.capture:
                attrs["gen_ai.tool.call.arguments"] = dumps(call.arguments)
            run.tools[call.id] = self._span(f"execute_tool {call.name}", run.ctx, at,
                                            kind_="INTERNAL", attrs=attrs)
        elif kind is Observation:
            span = run.tools.pop(event.call_id, None)
            if span is not None:
                if event.is_error:
                    self._error(span, "tool_error", event.content)
                if self.capture:
                    span.set_attribute("gen_ai.tool.call.result", event.content)
                self._end(span, at)
        elif kind is CodeExecution:  # CodeAct's code block: the run's one tool, its sandbox
            run.tools[f"code:{event.turn}"] = self._span(
                "execute_tool python", run.ctx, at, kind_="INTERNAL",
                attrs={"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "python",
                       "gen_ai.tool.call.id": f"turn{event.turn}.{event.index}",
                       "gen_ai.tool.type": "extension"})
        elif kind is ExecutionFinished:
            span = run.tools.pop(f"code:{event.turn}", None)
            if span is not None:
                if event.error or event.killed_reason:
                    self._error(span, event.killed_reason or "python_error",
                                event.error or event.killed_reason or "")
                self._end(span, at)
        elif kind is StepStarted:
            self._start_step(run, event, at)
        elif kind is StepFinished or kind is StepFailed or kind is StepRetried:
            span = run.steps.pop(event.step_id, None)
            if span is not None:
                if kind is not StepFinished:
                    self._error(span, "step_failed", event.error)
                self._end(span, at)
        elif kind is RunFinished:
            self._finish_run(key, run, event, at)
        elif kind is HandedOff:
            self._hand_over(key, run, event, at)
        elif kind in _MARKS:  # moments of the run, not operations: events on its span
            run.span.add_event(kind.kind, _MARKS[kind](event), timestamp=at)

    def _nested(self, key: str, event: Nested) -> None:
        """A sub-agent's event, as its parent's stream carries it: the sub-run is keyed by its
        step path, and started under the step span of the run one level up. Its times are the
        parent's (when the parent's stream passed it on): one clock with the step's own."""
        *above, step = event.step_id.split("/")
        outer = "/".join([key, *above]) if above else key
        inner = f"{key}/{event.step_id}"
        parent = None
        self._carry(event.event)
        if type(event.event) is RunStarted:
            up = self.runs.get(outer)
            if up is not None:
                span = up.steps.get(step)
                parent = self._trace.set_span_in_context(span) if span is not None else up.ctx
        self._on(inner, event.event, parent, _ns(event))

    # -- spans ---------------------------------------------------------------------------------
    def _span(self, name: str, ctx: Any, start: int, kind_: str, attrs: dict[str, Any]) -> Any:
        return self.tracer.start_span(name, context=ctx, kind=getattr(self._trace.SpanKind, kind_),
                                      start_time=start, attributes=attrs)

    def _end(self, span: Any, at: int) -> None:
        start = getattr(span, "start_time", None)  # a recording span's (the no-op has none)
        if start is not None:
            self._done.append((start, at, span.get_span_context()))
        span.end(end_time=at)

    def _error(self, span: Any, type_: str, text: str) -> None:
        span.set_attribute("error.type", type_)
        span.set_status(self._trace.Status(self._trace.StatusCode.ERROR, text[:500]))

    def _start_run(self, key: str, event: RunStarted, parent: Any, at: int) -> None:
        attrs = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": event.agent,
                 "gen_ai.request.model": event.model}
        run_id = getattr(event, "run_id", None)
        target = self._targets.pop(key, None)
        if target is not None:  # a handoff's target: under the handoff span, its own run id
            parent, run_id = target
        if run_id:
            attrs["gen_ai.agent.id"] = attrs["tao.run.id"] = run_id
        if event.sandbox:
            attrs["tao.sandbox"] = event.sandbox
        old = self.runs.get(key)
        if target is None and old is not None and run_id is not None and old.run_id == run_id:
            old.relay = True  # an inner run's start, passed on: that run is traced directly
            return
        old = self.runs.pop(key, None)
        if old is not None:  # the same step run again (a retry): the old run is over
            self._end_run(old, at)
        span = self._span(f"invoke_agent {event.agent}", parent if parent is not None
                          else self.context, at, "INTERNAL", attrs)
        self.runs[key] = run = _Run(span, self._trace.set_span_in_context(span), run_id, event.model)
        if key == "":
            self._root = run.ctx

    def _start_step(self, run: _Run, event: StepStarted, at: int) -> None:
        attrs: dict[str, Any] = {"tao.plan.step.id": event.step_id,
                                 "tao.plan.step.attempt": event.attempt}
        if event.tool is not None:
            attrs.update({"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": event.tool,
                          "gen_ai.tool.call.id": event.step_id, "gen_ai.tool.type": "function"})
            name = f"execute_tool {event.tool}"
        else:
            name = f"plan_step {event.step_id}"
        run.steps[event.step_id] = self._span(name, run.ctx, at, "INTERNAL", attrs)

    def _chats(self, run: _Run, since: int, until: int, failed: str | None = None) -> None:
        """The ``chat`` span(s) of the model call that just returned: as the model door
        recorded them, or (no record) from the turn's start to the first event after it."""
        run.chat_at = None  # one turn is one call; a sub-agent's events may come late, its calls
        calls = CALLS.get(run.run_id) if run.run_id else None  # recorded ahead of them
        for start, end, model, provider, n_in, n_out in [
                calls.pop(0) if calls else (since, until, run.model, None, None, None)]:
            attrs: dict[str, Any] = {"gen_ai.operation.name": "chat",
                                     "gen_ai.request.model": model}
            if provider is not None:
                attrs["gen_ai.provider.name"] = provider
            if n_in is not None:
                attrs["gen_ai.usage.input_tokens"] = n_in
                attrs["gen_ai.usage.output_tokens"] = n_out
            span = self._span(f"chat {model}", run.ctx, start, "CLIENT", attrs)
            if failed and n_in is None:  # no reply came: the call itself failed
                self._error(span, "model_error", failed)
            span.end(end_time=end)

    def _finish_run(self, key: str, run: _Run, event: RunFinished, at: int) -> None:
        r = event.result
        span = run.span
        span.set_attribute("tao.run.status", r.status)
        span.set_attribute("gen_ai.usage.input_tokens", r.usage.prompt_tokens)
        span.set_attribute("gen_ai.usage.output_tokens", r.usage.completion_tokens)
        if r.status == "error":
            self._error(span, "agent_error", r.error or "error")
        self.runs.pop(key, None)
        self._end_run(run, at)
        source = next((k for k, v in self._handed.items() if v == key), None)
        if source is not None:  # the chain's answer: the runs that handed over end with it
            del self._handed[source]
            above = self.runs.get(source)
            if above is not None:
                self._finish_run(source, above, event, at)

    def _hand_over(self, key: str, run: _Run, event: HandedOff, at: int) -> None:
        """A ``handoff`` span under the run that handed over; the target's run (the stream's
        next ``RunStarted``, in the chain's numbering) starts under it, traced by its own id
        (``{run id}.h{depth}``: its model calls are recorded under that)."""
        span = self._span(f"handoff {event.target}", run.ctx, at, "INTERNAL",
                          {"tao.handoff.from": event.source, "tao.handoff.to": event.target,
                           "tao.handoff.depth": event.depth})
        run.handoff = span
        own = f"{run.run_id}.h{event.depth}" if run.run_id else None
        if own is not None:
            self._carry_id(own)  # its own stream hands it to ``direct`` too: traced once
        target = self._handed[key] = f"{key}/h{event.depth}"
        self._targets[target] = (self._trace.set_span_in_context(span), own)

    def _end_run(self, run: _Run, at: int) -> None:
        if run.chat_at is not None:
            self._chats(run, run.chat_at, at)
        for span in [*run.tools.values(), *run.steps.values()]:
            span.end(end_time=at)
        run.tools.clear()
        run.steps.clear()
        if run.handoff is not None:
            self._end(run.handoff, at)
            run.handoff = None
        if run.run_id:
            CALLS.pop(run.run_id, None)
        run.span.end(end_time=at)

    def _open_tool(self, tool: str) -> Any:
        """The context of the earliest open ``execute_tool {tool}`` span not yet taken by an
        agent run: where a sub-agent that tool started belongs."""
        for run in self.runs.values():
            for span in [*run.tools.values(), *run.steps.values()]:
                name = getattr(span, "name", None) or ""
                sid = span.get_span_context().span_id
                if name == f"execute_tool {tool}" and sid not in self._claimed:
                    self._claimed.add(sid)
                    return self._trace.set_span_in_context(span)
        return None
