"""What every agent shares: the Result, the sync/async/stream facade, sinks, language choice."""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from dataclasses import replace
from types import MappingProxyType
from typing import Any

from ..events import Event, RunFinished, stamp
from ..lang import detect_language  # noqa: F401 - re-exported for the loops
from ..messages import Message, ToolCall
from ..result import Result, Status  # noqa: F401 - the loops and users import them from here
from .checks import Answering
from .options import RunOptions

Sink = Callable[[Event], Any]
#: ``check(answering)``: a reminder for the model, or ``None`` (``Agent.answer_check``)
AnswerCheck = Callable[["Answering"], "str | None"]


def make_guard(options: dict[str, Any], agent: type | None = None) -> Any:
    """The agent's ``tao.guard`` settings from its keyword arguments (``allow=``, ``deny=``,
    ``approve=``, ``audit=``, ``max_tokens=``...; see ``tao.guard.run.Guard``). Imported here, at
    construction, so that ``import tao`` stays cheap. ``agent``: the agent's class
    (``type(self)``), so that a keyword neither it nor the guard knows (``max_turn=``) is an
    error naming the agent and the closest keyword it does take (``max_turns``)."""
    from ..guard.run import Guard

    try:
        return Guard(**options)
    except TypeError:
        import difflib
        import inspect

        def named(call: Any) -> list[str]:
            try:
                params = inspect.signature(call).parameters.values()
            except (TypeError, ValueError):  # pragma: no cover - a builtin without a signature
                return []
            return [p.name for p in params if p.name != "self" and p.kind not in (
                inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)]

        guard_keys = named(Guard)
        unknown = [k for k in options if k not in guard_keys]
        if not unknown:  # a bad value (approve=...), not a bad name
            raise
        own = list(dict.fromkeys(n for c in (agent.__mro__ if agent else ())
                                 if "__init__" in c.__dict__ and c is not object
                                 for n in named(c.__dict__["__init__"])))
        known = list(dict.fromkeys([*own, *guard_keys]))
        who = agent.__name__ if agent is not None else "Guard"
        message = f"{who}() got " + ("unexpected keyword arguments " if len(unknown) > 1 else
                                     "an unexpected keyword argument ") + \
            ", ".join(repr(k) for k in unknown)
        near = [f"{m!r} for {k!r}" if len(unknown) > 1 else repr(m) for k in unknown
                for m in difflib.get_close_matches(k, known, 1)]
        if near:
            message += f"; did you mean {', '.join(near)}?"
        else:
            message += (f"; it takes {', '.join(own)}" if own else "; the guard takes") + \
                (" and the guard's " if own else " ") + ", ".join(guard_keys)
        raise TypeError(message) from None


def make_memory(memory: Any) -> Any:
    """The agent's ``memory=`` (``tao.memory.inject.as_memory``: None fits each call to the
    model's context, a store or ``Memory`` adds recall, ``remember`` and extraction)."""
    from ..memory.inject import as_memory

    return as_memory(memory)


async def _numbered(events: AsyncIterator[Event], run_id: str,
                    hide: Callable[[Event], Event]) -> AsyncIterator[Event]:
    """Every event of the run with its secrets hidden (``hide``), stamped with the run's id,
    its number and the time."""
    import time

    seq = 0
    try:
        async for event in events:
            seq += 1
            yield stamp(hide(event), run_id, seq, time.time())
    finally:
        await events.aclose()  # type: ignore[attr-defined]


_PLAIN = (int, float, bool, type(None))


def _hider(agent: Any) -> Callable[[Event], Event]:
    """What a run's events show of a call's arguments: a secret's value never (the keys that
    name one, a tool's ``secret=`` and the guard's, secret environment values, key-shaped
    strings; ``tao.guard.redact``), so no sink - console, trace, web page, span - gets it.
    The tool itself, the approver and the journal get the real arguments."""
    from dataclasses import replace

    from ..events import Action, ApprovalDecided, ApprovalRequested

    kinds = (Action, ApprovalRequested, ApprovalDecided)
    state: dict[str, Any] = {}

    def hide(event: Event) -> Event:
        if type(event) not in kinds:
            return event
        if not state:
            from ..guard.redact import is_secret_key, redact

            toolbox = getattr(agent, "toolbox", None) or ()
            names = {t.name: tuple(getattr(t, "secret", ())) for t in toolbox}
            extra = tuple(getattr(getattr(agent, "guard", None), "secret", ()))
            state.update(redact=redact, names=names, extra=extra, secret_key=is_secret_key)

        def clean(tool: str, arguments: Any) -> Any:
            secret = (*state["names"].get(tool, ()), *state["extra"])
            if not secret and not any(map(state["secret_key"], arguments)) and all(
                    type(v) in _PLAIN or (type(v) is str and len(v) <= 6)
                    for v in arguments.values()):
                return dict(arguments)  # numbers and short words: nothing can hide in them
            if "env" not in state:
                from ..guard.redact import env_secrets

                state["env"] = env_secrets()
            return state["redact"](arguments, secret, state["env"])

        stamps = {"run_id": event.run_id, "seq": event.seq, "ts": event.ts}
        if type(event) is Action:  # built directly: dataclasses.replace costs a turn's worth
            call = event.call
            return Action(ToolCall(call.id, call.name, clean(call.name, call.arguments),
                                   call.parse_error), event.turn, **stamps)
        if type(event) is ApprovalRequested:
            return ApprovalRequested(event.call_id, event.tool, clean(event.tool, event.arguments),
                                     event.reason, event.digest, **stamps)
        decided: Any = event
        if decided.arguments is None:
            return event
        return replace(decided, arguments=clean(decided.tool, decided.arguments))

    return hide


async def _given(agent: Any, run_id: str, options: RunOptions,
                 events: AsyncIterator[Event]) -> AsyncIterator[Event]:
    """The loop's events, with ``options`` waiting for the run's context (``run_options``) once
    the run starts - not before: a stream never iterated leaves nothing behind on the agent."""
    per_run = agent.__dict__.setdefault("_per_run", {})
    per_run[run_id] = options
    try:
        async for event in events:
            yield event
    finally:
        per_run.pop(run_id, None)
        await events.aclose()  # type: ignore[attr-defined]


async def _kept(events: AsyncIterator[Event], session: Any, task: str) -> AsyncIterator[Event]:
    """The run's events; then its task and final answer appended to ``session`` (after a
    handoff, the answer of the agent that ended it)."""
    async for event in events:  # kept before the last RunFinished goes out: a consumer may stop there
        if type(event) is RunFinished and not event.result.handoff:
            session.add_turn(task, event.result.answer)
        yield event


class Agent:
    """Base class: subclasses implement ``loop(task, run_id)``, an async generator of events
    that ends with ``RunFinished``. ``stream`` gives the run its identity (every event stamped
    with the run's id, its sequence number and a timestamp) and its trace; ``arun``/``run``
    drive it and hand every event to the sinks."""

    name = "agent"
    output_type: Any = None  # the agent's typed result (``tao.output``); None: the text
    output: Any = None  # its ``tao.output.Output`` (schema and validation)
    output_retries: int = 1

    def typed(self, output_type: Any, output_retries: int) -> None:
        """Set the agent's ``output_type`` (checked now: a type pydantic cannot validate is an
        error here, not at the end of a run) and ``output_retries``."""
        from ..output import Output

        if output_retries < 0:
            raise ValueError(f"output_retries must be 0 or more, not {output_retries!r}")
        self.output = Output.of(output_type)
        self.output_type, self.output_retries = output_type, output_retries

    answer_checks: tuple[AnswerCheck, ...] = ()

    def answer_check(self, check: AnswerCheck) -> AnswerCheck:
        """Register ``check(answering)``, run when the model gives its final answer
        (``tao.agents.checks.Answering``: the answer, the task, the language, the model's
        replies): what it returns (a reminder: "you wrote tests but never ran them") goes back
        to the model and the run goes on; ``None`` lets the answer stand. Each check speaks at
        most once a run, so a model that answers the same again is not held forever. Usable as
        a decorator."""
        self.answer_checks = (*self.answer_checks, check)
        return check

    #: language -> the instruction that asks for a checklist (``checklist``); empty: none
    checklist_prompts: Mapping[str, str] = MappingProxyType({})
    #: whether the loop asks for the checklist (it calls ``LoopContext.opening``)
    takes_checklist = True

    def checklist(self, prompts: Mapping[str, str] | str | None = None) -> None:
        """Before its first turn, the run asks the model - in a call of its own, no tools, the
        instruction as the system prompt and the task as the message - for the behaviours a
        user will check (``prompts``: one instruction, or one per language, "zh"/"en"; by
        default ``prompts/checklist.toml``'s, for a project a user tries). Its items become a
        ``Checklist`` event, follow the task in a message of their own asking to check each
        before answering, and reach the answer checks (``Answering.checklist``). That call
        goes through the model door like a turn: budgets, journal and tracing see it.
        ReAct, CodeAct and Plan-and-Execute take one; an agent that runs another (``Vote``,
        ``Reflexion``) refuses it: give it to the agent inside."""
        if not self.takes_checklist:
            raise TypeError(f"{type(self).__name__} runs another agent: give the checklist to "
                            "that agent (agent.checklist()), which writes one each run")
        if prompts is None:
            from .. import prompts as texts

            prompts = {lang: texts.table("checklist")[lang]["ask"] for lang in ("zh", "en")}
        given = {"zh": prompts, "en": prompts} if isinstance(prompts, str) else dict(prompts)
        if not all(isinstance(v, str) and v.strip() for v in given.values()) or not given:
            raise ValueError("checklist prompts must be non-empty text")
        self.checklist_prompts = MappingProxyType(given)

    #: the temperature of the reply that follows a failed action, where the model is greedy
    #: (``LoopContext.model_turn``); None: that reply is greedy too
    repair_temperature: float | None = None

    handoffs: Mapping[str, Any] = MappingProxyType({})  # transfer tool name -> Handoff

    def named(self, name: str | None, handoffs: Iterable[Any] | None) -> None:
        """The agent's ``name`` (what events and a handoff's tool call it) and its ``handoffs``,
        whose transfer tools join its toolbox."""
        if name is not None:
            if not str(name).strip():
                raise ValueError("name must not be empty")
            self.name = str(name)
        if handoffs:
            from ..tools.base import Toolbox
            from .handoffs import TransferTool, as_handoffs

            self.handoffs = as_handoffs(handoffs)
            clash = [n for n in self.handoffs if n in self.toolbox]
            if clash:
                raise ValueError(f"a tool is already called {clash[0]!r}")
            self.toolbox = Toolbox([*self.toolbox, *map(TransferTool, self.handoffs.values())])

    def run_options(self, run_id: str) -> RunOptions:
        """What ``stream`` was given for this run; taken once, by the run's context."""
        per_run = self.__dict__.get("_per_run")
        found = per_run.pop(run_id, None) if per_run else None
        return found if found is not None else RunOptions(self.output)

    def stream(self, task: str, *, run_id: str | None = None, output_type: Any = ...,
               deps: Any = None, history: Iterable[Message] = (), session: Any = None,
               _depth: int = 0, _meter: Any = None) -> AsyncIterator[Event]:
        """The run of ``task`` as events. ``run_id``: continue that journaled run (what
        ``resume`` does); else a new id. The id is handed to the loop, which hands it to the
        run's context: nothing else carries it. ``output_type``: this run's typed result,
        instead of the agent's (``str`` or None: the text). ``deps``: what the run's tools
        that take a ``tao.RunContext`` find in its ``.deps`` (never shown to the model).
        ``history``: messages before the task (what a handoff passes on). ``session``: a
        ``tao.Session`` - the run starts from its conversation and is appended to it."""
        import uuid

        from .. import tracing  # no OpenTelemetry until a traced run starts

        rid = run_id or uuid.uuid4().hex
        if session is not None:
            history = [*session.messages(), *history]
        options = RunOptions(self.output, deps, tuple(history), _depth, output_type, _meter)
        if output_type is not ...:
            from ..output import Output

            options = replace(options, output=Output.of(output_type))
        loop = self.loop(task, rid)
        if deps is not None or options.history or _depth or output_type is not ... or _meter:
            loop = _given(self, rid, options, loop)
        events = _numbered(loop, rid, _hider(self))
        if self.handoffs:
            from .handoffs import continued

            events = continued(self, task, rid, events, options)
        events = tracing.traced(events) if tracing.enabled() else events  # a chain: one trace
        return events if session is None else _kept(events, session, task)

    def loop(self, task: str, run_id: str) -> AsyncIterator[Event]:  # pragma: no cover - abstract
        raise NotImplementedError

    async def arun(self, task: str, sinks: Iterable[Sink] = (), *,
                   run_id: str | None = None, output_type: Any = ...,
                   deps: Any = None, session: Any = None) -> Result:
        sinks = list(sinks)
        result = None
        async for event in self.stream(task, run_id=run_id, output_type=output_type, deps=deps,
                                       session=session):
            for sink in sinks:
                sink(event)
            if type(event) is RunFinished:
                result = event.result
        if result is None:  # pragma: no cover - every agent ends with RunFinished
            raise RuntimeError(f"{type(self).__name__}.stream() ended without RunFinished")
        return result

    def run(self, task: str, sinks: Iterable[Sink] = (), *, run_id: str | None = None,
            output_type: Any = ..., deps: Any = None, session: Any = None) -> Result:
        """Blocking facade. Works inside a running event loop too (Jupyter) by using a thread.
        ``run_id``: continue that journaled run (what ``resume`` does)."""
        import asyncio  # here, not at import: `import tao` stays cheap

        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(self.arun(task, sinks, run_id=run_id, output_type=output_type,
                                         deps=deps, session=session))
        box: list[Any] = []

        def target() -> None:
            try:
                box.append(asyncio.run(self.arun(task, sinks, run_id=run_id,
                                                 output_type=output_type, deps=deps,
                                                 session=session)))
            except BaseException as e:  # noqa: BLE001 - re-raised in the caller's thread below
                box.append(e)

        thread = threading.Thread(target=target)
        thread.start()
        thread.join()
        if isinstance(box[0], BaseException):
            raise box[0]
        return box[0]

    def _journaled(self, run_id: str, output_type: Any) -> tuple[str, str]:
        """The journaled run's whole id and task, once its typed output is known to be the one
        this resume gives (``output_type``, else the agent's own): a run journaled as ``Person``
        resumed as text - or as another type - would ask the model anew instead of replaying."""
        from ..runs.journal import Journal

        guard = getattr(self, "guard", None)
        journal = getattr(guard, "journal", None)
        if journal is None:
            raise ValueError(f"{type(self).__name__} has no journal to resume {run_id!r} from: "
                             "make it with journal=PATH (or journal=True for the default one)")
        assert isinstance(journal, Journal)
        row = journal.find(run_id)
        meta = row.get("meta") or {}
        if output_type is ...:
            output = self.output
        else:
            from ..output import Output

            output = Output.of(output_type)
        had, now = meta.get("output_schema"), (output.digest() if output is not None else None)
        if had != now:
            rid = row["run_id"]
            raise ValueError(
                f"run {rid} ran with output_type {meta.get('output_type')}: resume it with the "
                "same output_type, or it would not replay" if had else
                f"run {rid} ran without an output_type: resume it without one, not as "
                f"{output.name if output is not None else 'text'}")
        return row["run_id"], row["task"]

    def resume(self, run_id: str, sinks: Iterable[Sink] = (), *, output_type: Any = ...,
               deps: Any = None) -> Result:
        """Continue journaled run ``run_id`` (a unique prefix will do) after a crash: the same
        run again, its model outputs and tool results served from the journal as far as it
        got, then live (see ``tao.runs.resume``). The agent must be built as it was; a run
        given its own ``output_type`` is resumed with the same one (checked against what the
        journal kept), and its ``deps`` - never journaled - are given again."""
        rid, task = self._journaled(run_id, output_type)
        return self.run(task, sinks, run_id=rid, output_type=output_type, deps=deps)

    async def aresume(self, run_id: str, sinks: Iterable[Sink] = (), *, output_type: Any = ...,
                      deps: Any = None) -> Result:
        rid, task = self._journaled(run_id, output_type)
        return await self.arun(task, sinks, run_id=rid, output_type=output_type, deps=deps)
