"""One served run's events: an append-only buffer numbered by the event's ``seq``, which every
SSE client reads from where it wants (``Last-Event-ID``) and then follows live.

The buffer holds each event once, already serialized and with the run's secrets (the endpoint's
API key) replaced, so fifty clients watching one run cost one ``dumps`` per event, and no path
out of the server - SSE, replay, the trace file - can carry the key: they all read this buffer.
A client that reconnects with ``Last-Event-ID: N`` gets every event with ``seq > N`` and then the
live ones; since the buffer is indexed by ``seq`` and appended on the server's one event loop,
nothing is lost or sent twice.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass, field
from typing import Any

from .. import safe_json

REDACTED = "***"


@dataclass(slots=True)
class Item:
    """One buffered event: its number, its type (the SSE ``event:``) and its JSON text."""

    seq: int
    type: str
    data: str


@dataclass
class LiveRun:
    """A run as the server keeps it: what was asked (without the key), its events, its state."""

    run_id: str
    agent: str
    model: str
    task: str
    secrets: tuple[str, ...] = ()
    started: float = field(default_factory=time.time)
    status: str = "queued"  # queued -> running -> done | max_turns | budget | error | cancelled
    workspace: Any = None  # the Path of a coding run's own folder
    result: dict[str, Any] | None = None
    items: list[Item] = field(default_factory=list)
    task_handle: asyncio.Task[Any] | None = None
    approver: Any = None  # approvals.WebApprover
    journal: Any = None  # the tao.runs Journal it is recorded in
    owner: str = ""  # the hash of the session that started it
    conversation: str | None = None  # the tao.Session it continues, by the page's name
    _wake: asyncio.Event = field(default_factory=asyncio.Event)
    _trace: Any = None  # the open JSONL file the events are written to as they come

    @property
    def live(self) -> bool:
        return self.status in ("queued", "running")

    def redact(self, text: str) -> str:
        for s in self.secrets:
            if s:  # as it is, and as JSON writes it (a key with a quote or a backslash)
                text = text.replace(s, REDACTED).replace(safe_json.dumps(s)[1:-1], REDACTED)
        return text

    def add(self, event: dict[str, Any]) -> Item:
        """Buffer one event dict (stamped with ``seq``), write it to the trace, wake readers."""
        seq = event.get("seq") or (self.items[-1].seq + 1 if self.items else 1)
        text = self.redact(safe_json.dumps(event))
        item = Item(int(seq), str(event.get("type", "event")), text)
        self.items.append(item)
        if self._trace is not None:
            self._trace.write(text + "\n")
            self._trace.flush()
        if item.type == "run_finished":
            self.result = safe_json.loads(text).get("result")
        self._notify()
        return item

    def open_trace(self, path: Any) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._trace = open(path, "w", encoding="utf-8")  # noqa: SIM115 - closed by finish()

    def finish(self, status: str) -> None:
        self.status = status
        if self._trace is not None:
            self._trace.close()
            self._trace = None
        self._notify()

    def _notify(self) -> None:
        wake, self._wake = self._wake, asyncio.Event()
        wake.set()

    def events(self) -> list[dict[str, Any]]:
        return [safe_json.loads(i.data) for i in self.items]

    async def follow(self, after: int = 0, stop: Any = None) -> AsyncIterator[Item]:
        """Every event with ``seq > after``, then each new one as it comes, until the run ends
        (or ``stop``, an event set when the server shuts down, is set and ``wake()`` called)."""
        i = _first_after(self.items, after)
        while True:
            wake = self._wake
            while i < len(self.items):
                yield self.items[i]
                i += 1
            if not self.live or (stop is not None and stop.is_set()):
                return
            await wake.wait()

    def wake(self) -> None:
        """Wake the followers without an event (they look at their ``stop``)."""
        self._notify()


def _first_after(items: list[Item], after: int) -> int:
    """Index of the first item with ``seq > after`` (items are in ``seq`` order)."""
    import bisect

    return bisect.bisect_right([it.seq for it in items], after) if after > 0 else 0


def replayed(run_id: str, agent: str, model: str, task: str, status: str, started: float,
             lines: Iterable[str]) -> LiveRun:
    """A finished run read back from its trace file (a past run of the journal)."""
    run = LiveRun(run_id, agent, model, task, started=started, status=status or "done")
    for line in lines:
        if line.strip():
            try:
                d = safe_json.loads(line)
            except ValueError:  # a run killed mid-line: what came before it is still the run
                break
            run.items.append(Item(int(d.get("seq") or len(run.items) + 1), d.get("type", "event"),
                                  line.rstrip("\n")))
            if d.get("type") == "run_finished":
                run.result = d.get("result")
    return run
