"""``Guard``: an agent's guardrail settings; ``Run``: one run's guard state, the run context the
loop hands to both doors (``Toolbox.bind(run)``, ``run.wrap(model)``).

Every tool call of every agent passes ``Run.admit`` (count it, check the policy, ask approval)
before it runs and ``Run.after`` once it has (fence untrusted output, audit). Approval events go
out through ``Run.emit``: into the plan's own event queue, or into ``Run.pump``, which a loop
wraps around an await that may need a human (ReAct's ``gate``, CodeAct's code block), so
``ApprovalRequested`` reaches the sinks while the call waits and before any ``Action``. How a
run asks (batched per tick, its events, its audit) is ``asking.Asking``, which ``Run`` inherits.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from contextvars import ContextVar
from dataclasses import replace
from typing import Any, NoReturn

# ApprovalDecided, ApprovalRequested, ApprovalRequest, decide and Pump went to asking with the
# code that uses them (how a run asks for approval); they stay importable from here.
from .. import prompts
from ..events import ApprovalDecided, ApprovalRequested, Event  # noqa: F401
from ..messages import ToolCall
from ..runs import IDEMPOTENCY_KEY  # tao.runs is light: the journal loads on use
from ..safe_json import dumps
from .approval import ApprovalRequest, Decision, decide  # noqa: F401
from .asking import Asking
from .budget import Budget, BudgetExceeded, Meter, Metered
from .outbox import Outbox, Pump  # noqa: F401
from .policy import Policy, digest

KEYS = ("allow", "deny", "require_approval", "high_risk", "untrusted", "approve", "audit",
        "audit_fsync", "secret", "max_tokens", "max_cost", "max_seconds", "max_tool_calls",
        "max_repeats", "prices", "journal", "journal_fsync")


class Guard:
    """What an agent's ``allow= deny= require_approval= high_risk= untrusted= approve= audit=
    secret= max_tokens= max_cost= max_seconds= max_tool_calls= max_repeats= prices=`` say.
    ``audit``: a path (or ``True`` for the default one, or an ``AuditLog``). Bad values are
    errors now, not at the first call."""

    def __init__(self, *, allow: Any = None, deny: Any = (), require_approval: Any = (),
                 high_risk: Any = (), untrusted: Any = (), approve: Any = None, audit: Any = None,
                 audit_fsync: bool = True, secret: Iterable[str] = (), max_tokens: int | None = None,
                 max_cost: float | None = None, max_seconds: float | None = None,
                 max_tool_calls: int | None = None, max_repeats: int | None = None,
                 prices: Any = None, journal: Any = None, journal_fsync: bool = True):
        self.policy = Policy(allow, deny, require_approval, high_risk, untrusted)
        self.budget = Budget(max_tokens, max_cost, max_seconds, max_tool_calls, max_repeats, prices)
        if approve is not None and not (callable(approve) or hasattr(approve, "decide")):
            raise TypeError(f"approve= takes a callback or an approver, not {approve!r}")
        self.approve = approve
        self.secret = frozenset(secret)
        self.audit = None
        if audit is not None and audit is not False:
            from .audit import AuditLog

            self.audit = audit if isinstance(audit, AuditLog) else AuditLog(
                None if audit is True else audit, fsync=audit_fsync, secret=self.secret).check()
        from ..runs.resume import open_journal  # journal=: the run journal (tao.runs)

        self.journal = open_journal(journal, journal_fsync)

    def start(self, task: str, agent: str, model: str, lang: str, tools: Iterable[Any],
              run_id: str | None = None, meta: dict[str, Any] | None = None,
              chain: Meter | None = None) -> Run:
        """The run's guard state. A run started inside another's tool call or plan step (a
        sub-agent) has that run as its parent: the parent's policies, approver, budgets and
        audit log hold for it too. ``meta``: what the journal keeps of the run beside its task
        (its typed output's name and schema digest). ``chain``: the meter of the agent that
        handed this run over (``tao.agents.handoffs``), whose budgets bound this run too."""
        tools = list(tools)
        self.policy.check_names(t.name for t in tools)
        return Run(self, task, agent, model, "zh" if lang == "zh" else "en", tools, CURRENT.get(),
                   run_id, meta, chain)


#: the run whose tool call (or plan step) is running: a sub-agent started there is its child
CURRENT: ContextVar[Run | None] = ContextVar("tao_guard_run", default=None)
_RESUME: list[Any] = []


def _resume() -> Any:
    """``tao.runs.resume``, imported once (with the journal's sqlite3) - not at every call."""
    if not _RESUME:
        from ..runs import resume

        _RESUME.append(resume)
    return _RESUME[0]


def _marks(t: Any) -> bool:
    return bool(getattr(t, "requires_approval", False) or getattr(t, "high_risk", False)
                or getattr(t, "untrusted_output", False))


def _steps_active() -> bool:
    from ..runs import steps

    return steps.ENABLED and steps.active()


class Run(Asking):
    def __init__(self, guard: Guard, task: str, agent: str, model: str, lang: str,
                 tools: Iterable[Any], parent: Run | None = None, run_id: str | None = None,
                 meta: dict[str, Any] | None = None, chain: Meter | None = None):
        import uuid

        tools = list(tools)
        self.parent = parent
        self.guard, self.policy, self.budget, self.lang = guard, guard.policy, guard.budget, lang
        self.t = prompts.table("guard")[lang]
        self.id = run_id or uuid.uuid4().hex  # the id the agent's stream gave the run
        b = self.budget
        #: whether the tool door has anything to do (else agents skip binding: zero overhead)
        self.active: bool = bool(self.policy.active or guard.audit or b.meters_model
                                 or (self.parent and self.parent.active)
                                 or (chain is not None and chain.meters)
                                 or any(_marks(t) for t in tools))
        self.approve: Any = guard.approve if guard.approve is not None or not self.parent \
            else self.parent.approve
        self.audit_log: Any = guard.audit or (self.parent.audit_log if self.parent else None)
        #: the run journal (``tao.runs``): a sub-agent's calls are journaled in its parent's run
        self.journal: Any = self.parent.journal if self.parent and self.parent.journal else (
            guard.journal.start(self.id, agent, model, task,
                                {**(guard.journal.meta or {}), **meta} if meta else None)
            if guard.journal else None)
        self._journal_own = self.journal is not None and not (self.parent and self.parent.journal)
        self.active = self.active or self.journal is not None
        #: run by a DBOS workflow (tao worker): each model and tool call is a step of it too
        self.stepped = self.journal is not None and _steps_active()
        self.untrusted = any(self.policy.is_untrusted(t.name, t) for t in tools)
        above = chain if chain is not None else self.parent.meter if self.parent else None
        self.meter: Meter = Meter(b, self.t, self.id, above)
        self.tainted = False
        self._reads = self._fenced_at = 0  # untrusted results read; and when last fenced()
        self.tag = ""
        #: calls decided before their Action (call id -> the call to run, or the refusal), and
        #: the digest each was decided with: what runs must still hash the same
        self._admitted: dict[str, tuple[ToolCall | Any, str]] = {}
        self._edited: dict[str, dict[str, Any]] = {}
        self._batch: list[tuple[ToolCall, str, asyncio.Future[Decision], tuple[str, ...]]] = []
        self._deciding: set[asyncio.Task[None]] = set()
        self.outbox = Outbox()
        #: where approval events go: the outbox a loop pumps, or the plan's own event queue
        self.emit: Callable[[Event], None] = self.outbox.emit
        self._audit({"kind": "run.start", "agent": agent, "model": model, "task": task,
                     **({"parent_run": self.parent.id} if self.parent else {})})

    # -- the model door (budgets: ``budget.Meter``) --------------------------------------------
    def wrap(self, model: Any) -> Any:
        self.meter.check_prices(model.name)  # no price for max_cost: said before any call
        if self.journal is not None:
            from ..runs.resume import Journaled

            model = Journaled(model, self.journal)
        if self.stepped:  # a run in a DBOS workflow (tao worker): each call a step too
            from ..runs.steps import Stepped

            model = Stepped(model)
        model = Metered(model, self.meter) if self.meter.meters else model
        from .. import tracing  # each call's times and usage, for the run's chat spans

        return tracing.traced_model(model, self.id) if tracing.enabled() else model

    def check(self) -> None:
        self.meter.check()

    # -- the tool door ------------------------------------------------------------------------
    async def admit(self, call: ToolCall, tool: Any) -> ToolCall | Any:
        """The call to run (its arguments maybe edited), or the ``ToolResult`` saying why not."""
        self.meter.check()  # also for a call counted before (a plan step's retry)
        if call.id in self._admitted:  # decided already, before its Action
            decided, sealed = self._admitted.pop(call.id)
            if isinstance(decided, ToolCall) and digest(decided.name, decided.arguments) != sealed:
                return self._refuse(call, tool, "rejected", prompts.render(
                    self.t["rejected"], tool=call.name, reason=self.t["stale"]))
            return decided
        self._count(call, tool)
        verdict, why = self.verdict(call, tool)
        if verdict == "run":
            return call
        if verdict != "ask":
            allowed = ", ".join(sorted(self.policy.allow or ())) or "-"
            return self._refuse(call, tool, verdict, prompts.render(self.t[verdict], tool=call.name,
                                                              allowed=allowed))
        reason = prompts.render(self.t[why], **getattr(why, "values", {}))
        decision = await self._ask(call, reason, tuple(getattr(tool, "secret", ())))
        if decision.verdict == "rejected":
            text = prompts.render(self.t["rejected"], tool=call.name,
                                  reason=decision.reason or self.t["no_reason"])
            return self._refuse(call, tool, "rejected", text)
        if decision.verdict == "edited":
            self._edited[call.id] = decision.arguments or {}
            return replace(call, arguments=decision.arguments or {})
        return call

    def stuck(self, call: ToolCall | None, tool: Any, reason: str) -> NoReturn:
        """The run stops here: ``call`` (None: a code block) failed the same way twice in a row
        and was sent again (``tao.agents.streak``). Audited as refused; ``finish`` then says
        ``status="budget"`` with ``reason``, as for a spent budget."""
        if call is not None:
            self._audit_call(call, tool, "stuck", 0.0)
        self.meter.halt(reason)

    def _count(self, call: ToolCall, tool: Any) -> None:
        """Count the call against the budgets; one they refuse is in the audit log too."""
        try:
            self.meter.count(call)
        except BudgetExceeded:
            self._audit_call(call, tool, "budget", 0.0)
            raise

    def verdict(self, call: ToolCall, tool: Any) -> tuple[str, str]:
        """The policy's word on ``call``, the strictest of this run's and its parents'; for a
        call the journal has the result of, "run" (decided the first time)."""
        if self.journal is not None:
            said = _resume().verdict(self.journal, call, tool)
            if said is not None:
                return (said, "why_resumed")
        verdict, why = self.policy.check(call.name, tool, call.arguments, self.tainted)
        if self.parent is not None and verdict != "denied" and verdict != "not_allowed":
            above = self.parent.verdict(call, tool)
            if above[0] != "run":
                return above
        return verdict, why

    async def vet(self, call: ToolCall, tool: Any) -> ToolCall | Any:
        """``admit`` ahead of the call's execution (a plan step is decided before it is shown):
        the door then runs the call as decided without asking again."""
        admitted = await self.admit(call, tool)
        if isinstance(admitted, ToolCall):
            self._keep(call, admitted)
        return admitted

    async def gate(self, calls: Sequence[ToolCall], tools: Any) -> AsyncIterator[Event]:
        """Decide the calls of one turn before the loop shows them (an async generator of the
        approval events); ``execute`` then runs what was decided. Budgets are checked first."""
        if not self.active:
            return
        for call in calls:
            self._count(call, tools[call.name] if call.name in tools else None)
        if not any(self.verdict(c, tools[c.name] if c.name in tools else None)[0] == "ask"
                   for c in calls):
            return
        pump = self.pump(asyncio.gather(*(self.admit(c, tools[c.name] if c.name in tools
                                                      else None) for c in calls)))
        async for event in pump:
            yield event
        decided: Any = pump.value  # what the gathered admissions gave, in call order
        for c, a in zip(calls, decided):
            self._keep(c, a)

    def _keep(self, call: ToolCall, admitted: Any) -> None:
        sealed = digest(admitted.name, admitted.arguments) if isinstance(admitted, ToolCall) else ""
        self._admitted[call.id] = (admitted, sealed)

    async def call_tool(self, call: ToolCall, tool: Any,
                        execute: Callable[[ToolCall, bool], Awaitable[Any]]) -> Any:
        """The tool door's run side (``Toolbox.execute`` with a run): a journaled result served,
        the call admitted (deny, approval, budget), journaled, run under the wall clock as this
        run's current call (``execute(call, in_thread)``, the call as admitted), its result fenced and audited.
        In a DBOS workflow (``tao worker``) all of it is one DBOS step (``tao.runs.steps``)."""
        if self.stepped:
            from ..runs.steps import tool_call

            return await tool_call(call, lambda: self._call_tool(call, tool, execute),
                                   lambda: bool(self.tainted), self._taint)
        return await self._call_tool(call, tool, execute)

    def _taint(self) -> None:
        r: Any = self
        while r is not None:
            r.tainted, r = True, r.parent

    async def _call_tool(self, call: ToolCall, tool: Any,
                         execute: Callable[[ToolCall, bool], Awaitable[Any]]) -> Any:
        journal = self.journal
        if journal is not None:
            resume = _resume()
            if (done := resume.door_replayed(journal, call, self)) is not None:
                if not done.is_error and self.policy.is_untrusted(call.name, tool, call.arguments):
                    self._reads += 1  # code that printed it has its output fenced, as at first
                return done
        if tool is not None and not call.parse_error:
            admitted = await self.admit(call, tool)
            if not isinstance(admitted, ToolCall):
                return admitted  # refused: its ToolResult says why
            call = admitted
        pending = resume.door_started(journal, call, tool) if journal is not None else None
        token = self.enter(pending)  # a sub-agent this tool starts runs under this run's guard
        try:  # with a wall-clock budget: in a thread, so that the clock can stop waiting for it
            timed = self.meter.remaining() is not None and asyncio._get_running_loop() is not None
            result = await (self.meter.within(execute(call, True)) if timed
                            else execute(call, False))
        finally:
            self.leave(token)
        result = self.after(call, tool, result)
        if pending is not None:
            resume.door_finished(journal, pending, result, self)
        return result

    def enter(self, pending: Any = None) -> Any:
        """This run is the current one while a tool call of it runs (``leave`` after); a
        journaled call's idempotency key (``tao.runs.idempotency_key()``) is set with it."""
        if pending is None:
            return CURRENT.set(self)
        return CURRENT.set(self), IDEMPOTENCY_KEY.set(pending.idempotency_key)

    def leave(self, token: Any) -> None:
        if type(token) is tuple:
            CURRENT.reset(token[0])
            IDEMPOTENCY_KEY.reset(token[1])
        else:
            CURRENT.reset(token)

    def shown(self, call: ToolCall) -> ToolCall:
        """The call as it will run (edited arguments), for its ``Action``."""
        decided = self._admitted.get(call.id, (None, ""))[0]
        return decided if isinstance(decided, ToolCall) else call

    def after(self, call: ToolCall, tool: Any, result: Any) -> Any:
        """The result as the model reads it: untrusted output fenced (and the run tainted), an
        edit said; the call audited."""
        content = result.content
        if not result.is_error and self.policy.is_untrusted(call.name, tool, call.arguments):
            from .untrusted import fence

            run: Run | None = self
            while run is not None:  # what a sub-agent read reaches its parent in its answer
                run.tainted, run = True, run.parent
            self._reads += 1
            content = fence(content, call.name, self.nonce(), self.lang)
        edited = self._edited.pop(call.id, None)
        if edited is not None:
            content = prompts.render(self.t["edited"], arguments=dumps(edited)) + content
        self._audit_call(call, tool, "error" if result.is_error else "ok", result.duration_s)
        return result if content is result.content else replace(result, content=content)

    def fenced(self, content: str, source: str) -> str:
        """``content`` fenced as ``source``'s data when untrusted output was read since the last
        call (CodeAct: the code got a web page's raw text and printed it - the model reads it
        in the code's output, not in a tool result), else as it is."""
        if self._reads == self._fenced_at:
            return content
        from .untrusted import fence

        self._fenced_at = self._reads
        return fence(content, source, self.nonce(), self.lang)

    def nonce(self) -> str:
        if not self.tag:
            from .untrusted import nonce

            self.tag = nonce()
        return self.tag

    def system_note(self) -> str:
        """What the system prompt adds when some tool's output is untrusted ("" when none is)."""
        if not self.untrusted:
            return ""
        from .untrusted import note

        return "\n\n" + note(self.lang)

    def _refuse(self, call: ToolCall, tool: Any, status: str, text: str) -> Any:
        from ..tools.base import ToolResult

        self._audit_call(call, tool, status, 0.0)
        return ToolResult(text, True, 0.0, retryable=False)

    # -- audit ----------------------------------------------------------------------------------
    def _audit_call(self, call: ToolCall, tool: Any, status: str, duration: float) -> None:
        if self.audit_log is not None:
            self._audit({"kind": "tool.call", "call_id": call.id, "tool": call.name,
                         "arguments": call.arguments, "status": status,
                         "duration_s": round(duration, 6)}, tuple(getattr(tool, "secret", ())))

    def _audit(self, record: dict[str, Any], secret: Iterable[str] = ()) -> None:
        if self.audit_log is not None:
            self.audit_log.append({**record, "run_id": self.id}, secret=secret)

    def finish(self, result: Any) -> Any:
        """The run's ``Result``, with ``status="budget"`` and the reason when a budget ended it."""
        if self.meter.stopped:
            result.status, result.error = "budget", self.meter.stopped
        self._audit({"kind": "run.end", "status": result.status, "turns": result.turns,
                     "tool_calls": result.tool_calls, "error": result.error})
        if self._journal_own:
            self.journal.finish(result.status)
        return result
