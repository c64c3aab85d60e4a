"""The page as tao's approver: a gated call waits until someone answers it over HTTP.

tao's guard (``tao.guard.run.Run``) emits ``ApprovalRequested`` for each gated call of a turn and
then awaits ``approver.decide(requests)``; this approver turns each request into a future that
``POST /api/runs/{id}/approvals`` resolves. The gate, the digest binding and the events are the
guard's own; nothing of it is copied here. A run cancelled while it waits ends the wait (the
futures are cancelled with the run's task).
"""

from __future__ import annotations

import asyncio
from typing import Any

from ..guard.approval import ApprovalRequest, Decision
from .words import Refusal

VERDICTS = ("approve", "reject", "edit")


class WebApprover:
    by = "web"

    def __init__(self) -> None:
        self.pending: dict[str, tuple[ApprovalRequest, asyncio.Future[Decision]]] = {}

    async def decide(self, requests: list[ApprovalRequest]) -> list[Decision]:
        loop = asyncio.get_running_loop()
        futures = []
        for r in requests:
            future: asyncio.Future[Decision] = loop.create_future()
            self.pending[r.call_id] = (r, future)
            futures.append(future)
        try:
            return list(await asyncio.gather(*futures))
        finally:
            for r in requests:
                self.pending.pop(r.call_id, None)

    def close(self) -> None:
        """The run ended: what still waits is answered by no one (a later answer is a 404)."""
        for _, future in self.pending.values():
            future.cancel()
        self.pending.clear()

    def answer(self, call_id: str, verdict: str, reason: str = "",
               arguments: dict[str, Any] | None = None) -> Decision:
        """Answer the waiting call ``call_id``: a 404 ``Refusal`` when none waits, a 400 one for
        a verdict that is not one of ``VERDICTS`` or an edit without arguments."""
        if verdict not in VERDICTS:
            raise Refusal(400, "bad_verdict", verdict=repr(verdict))
        entry = self.pending.get(call_id)
        if entry is None or entry[1].done():
            raise Refusal(404, "no_approval", call_id=repr(call_id))
        request, future = entry
        if verdict == "approve":
            decision = Decision.approve(request.digest)
        elif verdict == "reject":
            decision = Decision.reject(reason, request.digest)
        else:
            if not isinstance(arguments, dict):
                raise Refusal(400, "edit_args")
            decision = Decision.edit(arguments, request.digest)
        future.set_result(decision)
        return decision
