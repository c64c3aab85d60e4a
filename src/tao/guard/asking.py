"""How a run asks a human, kept apart from ``run.py``'s two doors: a turn's gated calls must reach
the approver as one batch, their ``ApprovalRequested`` must reach the sinks before anyone answers
(the loop is suspended in the await: ``pump``), and every decision must be audited. ``Run``
inherits ``Asking``; the state it works on is the run's own, made in ``Run.__init__``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, Any

from ..events import ApprovalDecided, ApprovalRequested, Event
from ..messages import ToolCall
from .approval import ApprovalRequest, Decision, decide
from .budget import Meter
from .outbox import Outbox, Pump
from .policy import digest


class Asking:
    # the run's (``Run.__init__``)
    _batch: list[tuple[ToolCall, str, asyncio.Future[Decision], tuple[str, ...]]]
    _deciding: set[asyncio.Task[None]]
    approve: Any
    lang: str
    active: bool
    meter: Meter
    outbox: Outbox
    emit: Callable[[Event], None]

    if TYPE_CHECKING:
        def _audit(self, record: dict[str, Any], secret: Iterable[str] = ()) -> None: ...

    async def _ask(self, call: ToolCall, why: str, secret: tuple[str, ...]) -> Decision:
        """Queue the call for approval; the calls queued in the same tick are asked together."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Decision] = loop.create_future()
        self._batch.append((call, why, future, secret))
        if len(self._batch) == 1:
            loop.call_soon(self._start_deciding)
        return await future

    def _start_deciding(self) -> None:
        task = asyncio.ensure_future(self._decide())
        self._deciding.add(task)  # held: the loop keeps only a weak reference to a task
        task.add_done_callback(self._deciding.discard)

    async def _decide(self) -> None:
        batch, self._batch = self._batch, []
        requests = [ApprovalRequest(c.id, c.name, dict(c.arguments), why,
                                    digest(c.name, c.arguments)) for c, why, _, _ in batch]
        try:
            for r in requests:
                self.emit(ApprovalRequested(r.call_id, r.tool, r.arguments, r.reason, r.digest))
            await self.outbox.delivered(self.emit)
            decisions = await decide(self.approve, requests, self.lang)
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
            if not f.done():  # the call's wait was cut (a code block killed at its time limit)
                f.set_result(d)

    def pump(self, awaitable: Awaitable[Any], *, timed: bool = False, events: bool = False) -> Pump:
        """``async for event in run.pump(aw)``: the approval events of what ``aw`` does, while
        it runs; then ``.value`` (see ``outbox``). ``timed``: ``aw`` is stopped at the
        wall-clock budget (CodeAct's code, which passes neither door while it computes; not a
        turn's approvals, where a person is typing). ``events``: ``aw`` emits events of its own
        (CodeAct's tool calls), so it is pumped even when the guard has nothing to do."""
        if timed and self.meter.remaining() is not None:
            awaitable = self.meter.within(awaitable)
        return Pump(self.outbox, awaitable, self.active or events)
