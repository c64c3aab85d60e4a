"""``Guard``: an agent's guardrail settings; ``Run``: one run's guard state, the run context the
loop hands to both doors (``Toolbox.bind(run)``, ``run.wrap(model)``).

Every tool call of every agent passes ``Run.admit`` (count it, check the policy, ask approval)
before it runs and ``Run.after`` once it has (fence untrusted output, audit). Approval events go
out through ``Run.emit``: into the plan's own event queue, or into ``Run.pump``, which a loop
wraps around an await that may need a human (ReAct's ``gate``, CodeAct's code block), so
``ApprovalRequested`` reaches the sinks while the call waits and before any ``Action``.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Awaitable, Iterable, Sequence
from dataclasses import replace
from typing import Any

from .. import prompts
from ..events import ApprovalDecided, ApprovalRequested, Event
from ..messages import ToolCall, Usage
from ..safe_json import dumps
from .approval import ApprovalRequest, Decision, decide
from .budget import Budget, BudgetExceeded, Metered
from .policy import Policy, digest

KEYS = ("allow", "deny", "require_approval", "high_risk", "untrusted", "approve", "audit",
        "audit_fsync", "secret", "max_tokens", "max_cost", "max_seconds", "max_tool_calls",
        "max_repeats", "prices")


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
                 prices: Any = None):
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
                None if audit is True else audit, fsync=audit_fsync, secret=self.secret)

    def start(self, task: str, agent: str, model: str, lang: str, tools: Iterable[Any]) -> Run:
        return Run(self, task, agent, model, "zh" if lang == "zh" else "en", tools)


def _marks(t: Any) -> bool:
    return bool(getattr(t, "requires_approval", False) or getattr(t, "high_risk", False)
                or getattr(t, "untrusted_output", False))


class Run:
    def __init__(self, guard: Guard, task: str, agent: str, model: str, lang: str,
                 tools: Iterable[Any]):
        import uuid

        self.guard, self.policy, self.budget, self.lang = guard, guard.policy, guard.budget, lang
        self.t = prompts.table("guard")[lang]
        self.id = uuid.uuid4().hex
        b = self.budget
        #: whether the tool door has anything to do (else agents skip binding: zero overhead)
        self.active = bool(self.policy.active or guard.audit or b.max_tool_calls or b.max_repeats
                           or b.meters_model or any(_marks(t) for t in tools))
        self.untrusted = any(self.policy.is_untrusted(t.name, t) for t in tools)
        self.start = time.monotonic()
        self.deadline = self.start + b.max_seconds if b.max_seconds else None
        self.usage, self.cost, self.calls = Usage(), 0.0, 0
        self.stopped: str | None = None
        self.tainted = False
        self.tag = ""
        self.repeats: dict[str, int] = {}
        self._counted: set[str] = set()
        self._admitted: dict[str, ToolCall | Any] = {}
        self._edited: dict[str, dict[str, Any]] = {}
        self._batch: list[tuple[ToolCall, str, asyncio.Future[Decision], tuple[str, ...]]] = []
        self._pending: deque[Event] = deque()
        self._wake: asyncio.Future[None] | None = None
        self._waiters: list[asyncio.Future[None]] = []
        self._pumping = 0
        self.emit = self._queue
        self._audit({"kind": "run.start", "agent": agent, "model": model, "task": task})

    # -- the model door -----------------------------------------------------------------------
    def wrap(self, model: Any) -> Any:
        if self.budget.max_cost is not None:
            self.budget.price(model.name)  # no price: the user's error, said before any call
        return Metered(model, self) if self.budget.meters_model else model

    def check(self) -> None:
        """Raise ``BudgetExceeded`` when a budget is spent (called at both doors)."""
        if self.stopped:
            raise BudgetExceeded(self.stopped)
        b = self.budget
        if self.deadline is not None and time.monotonic() > self.deadline:
            self._stop("b_max_seconds", b.max_seconds, f"{time.monotonic() - self.start:.1f}")

    def spend(self, model: str, usage: Usage) -> None:
        self.usage.add(usage)
        b = self.budget
        if b.max_cost is not None:
            inp, out = b.price(model)
            self.cost += (usage.prompt_tokens * inp + usage.completion_tokens * out) / 1e6
            if self.cost > b.max_cost and not self.stopped:
                self.stopped = self._reason("b_max_cost", b.max_cost, f"${self.cost:.6f}")
        if b.max_tokens is not None and self.usage.total_tokens > b.max_tokens and not self.stopped:
            self.stopped = self._reason("b_max_tokens", b.max_tokens, self.usage.total_tokens)

    def _reason(self, key: str, limit: Any, used: Any, tool: str = "") -> str:
        return prompts.render(self.t[key], limit=str(limit), used=str(used), tool=tool)

    def _stop(self, key: str, limit: Any, used: Any, tool: str = "") -> None:
        self.stopped = self._reason(key, limit, used, tool)
        raise BudgetExceeded(self.stopped)

    # -- the tool door ------------------------------------------------------------------------
    def count(self, call: ToolCall) -> None:
        if call.id in self._counted:
            return
        self._counted.add(call.id)
        self.check()
        b = self.budget
        self.calls += 1
        if b.max_tool_calls is not None and self.calls > b.max_tool_calls:
            self._stop("b_max_tool_calls", b.max_tool_calls, self.calls)
        if b.max_repeats is not None:
            d = digest(call.name, call.arguments)
            n = self.repeats[d] = self.repeats.get(d, 0) + 1
            if n > b.max_repeats:
                self._stop("b_max_repeats", b.max_repeats, n, call.name)

    async def admit(self, call: ToolCall, tool: Any) -> ToolCall | Any:
        """The call to run (its arguments maybe edited), or the ``ToolResult`` saying why not."""
        if call.id in self._admitted:  # decided already, before its Action
            return self._admitted.pop(call.id)
        self.count(call)
        verdict, why = self.policy.check(call.name, tool, call.arguments, self.tainted)
        if verdict == "run":
            return call
        if verdict != "ask":
            allowed = ", ".join(sorted(self.policy.allow or ())) or "-"
            return self._refuse(call, verdict, prompts.render(self.t[verdict], tool=call.name,
                                                              allowed=allowed))
        decision = await self._ask(call, self.t[why], tuple(getattr(tool, "secret", ())))
        if decision.verdict == "rejected":
            text = prompts.render(self.t["rejected"], tool=call.name,
                                  reason=decision.reason or self.t["no_reason"])
            return self._refuse(call, "rejected", text)
        if decision.verdict == "edited":
            self._edited[call.id] = decision.arguments or {}
            return replace(call, arguments=decision.arguments or {})
        return call

    async def vet(self, call: ToolCall, tool: Any) -> ToolCall | Any:
        """``admit`` ahead of the call's execution (a plan step is decided before it is shown):
        the door then runs the call as decided without asking again."""
        admitted = await self.admit(call, tool)
        if isinstance(admitted, ToolCall):
            self._admitted[call.id] = admitted
        return admitted

    async def gate(self, calls: Sequence[ToolCall], tools: Any):
        """Decide the calls of one turn before the loop shows them (an async generator of the
        approval events); ``execute`` then runs what was decided. Budgets are checked first."""
        if not self.active:
            return
        for call in calls:
            self.count(call)
        if not any(self.policy.check(c.name, tools[c.name] if c.name in tools else None,
                                     c.arguments, self.tainted)[0] == "ask" for c in calls):
            return
        pump = self.pump(asyncio.gather(*(self.admit(c, tools[c.name] if c.name in tools
                                                      else None) for c in calls)))
        async for event in pump:
            yield event
        self._admitted.update((c.id, a) for c, a in zip(calls, pump.value))

    def shown(self, call: ToolCall) -> ToolCall:
        """The call as it will run (edited arguments), for its ``Action``."""
        decided = self._admitted.get(call.id)
        return decided if isinstance(decided, ToolCall) else call

    def after(self, call: ToolCall, tool: Any, result: Any) -> Any:
        """The result as the model reads it: untrusted output fenced (and the run tainted), an
        edit said; the call audited."""
        content = result.content
        if not result.is_error and self.policy.is_untrusted(call.name, tool):
            from .untrusted import fence

            self.tainted = True
            content = fence(content, call.name, self.nonce(), self.lang)
        edited = self._edited.pop(call.id, None)
        if edited is not None:
            content = prompts.render(self.t["edited"], arguments=dumps(edited)) + content
        self._audit_call(call, tool, "error" if result.is_error else "ok", result.duration_s)
        return result if content is result.content else replace(result, content=content)

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

        return "\n\n" + note(self.nonce(), self.lang)

    def _refuse(self, call: ToolCall, status: str, text: str) -> Any:
        from ..tools.base import ToolResult

        self._audit_call(call, None, status, 0.0)
        return ToolResult(text, True, 0.0, retryable=False)

    # -- approval -----------------------------------------------------------------------------
    async def _ask(self, call: ToolCall, why: str, secret: tuple[str, ...]) -> Decision:
        """Queue the call for approval; the calls queued in the same tick are asked together."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Decision] = loop.create_future()
        self._batch.append((call, why, future, secret))
        if len(self._batch) == 1:
            loop.call_soon(lambda: asyncio.ensure_future(self._decide()))
        return await future

    async def _decide(self) -> None:
        batch, self._batch = self._batch, []
        requests = [ApprovalRequest(c.id, c.name, dict(c.arguments), why,
                                    digest(c.name, c.arguments)) for c, why, _, _ in batch]
        try:
            for r in requests:
                self.emit(ApprovalRequested(r.call_id, r.tool, r.arguments, r.reason, r.digest))
            await self._delivered()
            decisions = await decide(self.guard.approve, requests, self.lang)
        except BaseException as e:  # the approver's own failure ends the run, as the user's bug
            for _, _, f, _ in batch:
                if not f.done():
                    f.set_exception(e)
            return
        for r, d, (_, _, f, secret) in zip(requests, decisions, batch):
            self.emit(ApprovalDecided(r.call_id, r.tool, d.verdict, d.reason, d.arguments,
                                      d.digest or r.digest, d.by))
            self._audit({"kind": "approval", "call_id": r.call_id, "tool": r.tool,
                         "arguments": r.arguments, "digest": r.digest, "decision": d.verdict,
                         "reason": d.reason, "edited": d.arguments, "by": d.by},
                        secret)
            f.set_result(d)

    # -- events out while a loop awaits ---------------------------------------------------------
    def _queue(self, event: Event) -> None:
        self._pending.append(event)
        if self._wake is not None and not self._wake.done():
            self._wake.set_result(None)

    async def _delivered(self) -> None:
        """Wait until the events emitted so far were handed on (so a terminal prompt comes after
        the request is shown)."""
        if self._pumping and self.emit == self._queue:
            waiter = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            await waiter
        else:
            for _ in range(3):
                await asyncio.sleep(0)

    def pump(self, awaitable: Awaitable[Any]) -> Pump:
        return Pump(self, awaitable)

    # -- audit ----------------------------------------------------------------------------------
    def _audit_call(self, call: ToolCall, tool: Any, status: str, duration: float) -> None:
        if self.guard.audit is not None:
            self._audit({"kind": "tool.call", "call_id": call.id, "tool": call.name,
                         "arguments": call.arguments, "status": status,
                         "duration_s": round(duration, 6)}, tuple(getattr(tool, "secret", ())))

    def _audit(self, record: dict[str, Any], secret: Iterable[str] = ()) -> None:
        if self.guard.audit is not None:
            self.guard.audit.append({**record, "run_id": self.id}, secret=secret)

    def finish(self, result: Any) -> Any:
        """The run's ``Result``, with ``status="budget"`` and the reason when a budget ended it."""
        if self.stopped:
            result.status, result.error = "budget", self.stopped
        self._audit({"kind": "run.end", "status": result.status, "turns": result.turns,
                     "tool_calls": result.tool_calls, "error": result.error})
        return result


class Pump:
    """``async for event in run.pump(aw)``: the events the run emits while ``aw`` runs, as they
    come; ``value`` is ``aw``'s result afterwards (its exception is raised)."""

    def __init__(self, run: Run, awaitable: Awaitable[Any]):
        self.run, self.awaitable, self.value = run, awaitable, None

    async def __aiter__(self):
        run = self.run
        if not run.active:  # nothing can be asked: no task, no events
            self.value = await self.awaitable
            return
        task = asyncio.ensure_future(self.awaitable)
        run._pumping += 1
        try:
            while True:
                while run._pending:
                    yield run._pending.popleft()
                for w in run._waiters:
                    if not w.done():
                        w.set_result(None)
                run._waiters.clear()
                if task.done():
                    break
                run._wake = asyncio.get_running_loop().create_future()
                await asyncio.wait({task, run._wake}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            run._pumping -= 1
            if not task.done():
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
        self.value = task.result()
