"""Events out of a loop while it awaits: an approval asked in the middle of a tool call (CodeAct's
code, a turn's parallel calls) must reach the sinks before the human answers, yet the loop's
generator is suspended in that await. ``Pump`` runs the await as a task and hands out what the
run emits meanwhile, as it comes.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any

from ..events import Event


class Outbox:
    def __init__(self) -> None:
        self.pending: deque[Event] = deque()
        self.wake: asyncio.Future[None] | None = None
        self.waiters: list[asyncio.Future[None]] = []
        self.pumping = 0

    def emit(self, event: Event) -> None:
        self.pending.append(event)
        if self.wake is not None and not self.wake.done():
            self.wake.set_result(None)

    async def delivered(self, emit: Callable[[Event], None]) -> None:
        """Wait until the events emitted so far were handed on, so that a terminal prompt comes
        after the request is shown. ``emit`` elsewhere (the plan's queue): a few loop turns."""
        if self.pumping and emit == self.emit:
            waiter = asyncio.get_running_loop().create_future()
            self.waiters.append(waiter)
            await waiter
        else:
            for _ in range(3):
                await asyncio.sleep(0)


class Pump:
    """``async for event in Pump(outbox, aw)``: the events emitted while ``aw`` runs; ``value``
    is ``aw``'s result afterwards (its exception is raised). ``active=False``: nothing can be
    emitted, so ``aw`` is awaited inline (no task)."""

    def __init__(self, outbox: Outbox, awaitable: Awaitable[Any], active: bool = True):
        self.outbox, self.awaitable, self.active, self.value = outbox, awaitable, active, None

    async def __aiter__(self):
        if not self.active:
            self.value = await self.awaitable
            return
        box = self.outbox
        task = asyncio.ensure_future(self.awaitable)
        box.pumping += 1
        try:
            while True:
                while box.pending:
                    yield box.pending.popleft()
                for w in box.waiters:
                    if not w.done():
                        w.set_result(None)
                box.waiters.clear()
                if task.done():
                    break
                box.wake = asyncio.get_running_loop().create_future()
                await asyncio.wait({task, box.wake}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            box.pumping -= 1
            if not task.done():
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
        self.value = task.result()
