"""One run of an agent inside another's (``Vote``, ``Attempts``, ``Reflexion``).

Each of those runs its agent several times and passes every event on as its own, except the
inner ``RunFinished``: the outer run ends once, with a result of its own making. The inner
result is kept for it to judge (a vote, a check, an evaluator).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import aclosing

from ..events import Event, RunFinished
from ..result import Result


class InnerRun:
    """``InnerRun(events, name)``: ``events()`` passes ``events`` on, less its ``RunFinished``,
    whose result is then ``result``."""

    def __init__(self, events: AsyncIterator[Event], name: str):
        self._source, self.name = events, name
        self.result: Result | None = None

    async def events(self) -> AsyncIterator[Event]:
        async with aclosing(self._source) as source:  # closed here if the outer run stops
            async for event in source:
                if type(event) is RunFinished:
                    self.result = event.result
                else:
                    yield event
        if self.result is None:  # pragma: no cover - every agent's stream ends with RunFinished
            raise RuntimeError(f"{self.name} ended a run without RunFinished")
