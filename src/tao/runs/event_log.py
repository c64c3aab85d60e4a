"""A run's events in PostgreSQL, for a page served by one machine while the run executes on
another (issue 29, point 3).

The worker that runs the agent hands every event to ``EventLog.sink(run_id)``: a row
``(run_id, seq, data)`` in ``run_events`` and a ``NOTIFY tao_events`` with the run's id, in one
transaction. A reader anywhere calls ``follow(run_id, after=N)``: the rows after ``seq`` N, in
order, then each new row as its notification arrives, until the run's ``RunFinished``. The rows
are the truth and the notification only a wake-up: a reader that reconnects with the last
``seq`` it saw (the page's ``Last-Event-ID``) misses nothing, and a lost notification costs at
most ``POLL_S`` of delay (the reader looks again that often).

An event's number is the run's own ``seq`` (``tao.events.stamp``), so an event written twice -
a worker that died after writing it, its run resumed elsewhere, which numbers its events the
same way - is kept once (``ON CONFLICT DO NOTHING``).
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

from ..events import Event, RunFinished, event_from_dict
from ..safe_json import dumps
from .pg import create, safe

SCHEMA = """
CREATE TABLE IF NOT EXISTS run_events (
    run_id TEXT, seq INTEGER, data TEXT, ts DOUBLE PRECISION, PRIMARY KEY (run_id, seq));
"""
CHANNEL = "tao_events"
#: seconds a follower waits for a notification before it reads the table again anyway
POLL_S = 1.0


class EventLog:
    """``EventLog(url)``: the ``run_events`` table of one PostgreSQL database."""

    def __init__(self, url: str):
        self.url = url
        self._db: Any = None

    def _conn(self) -> Any:
        if self._db is None or self._db.closed:
            import psycopg

            self._db = psycopg.connect(self.url, autocommit=True)
            create(self._db, SCHEMA)
        return self._db

    def append(self, run_id: str, event: Event) -> None:
        """Keep ``event`` (numbered: ``event.seq``) and wake the run's followers."""
        if event.seq is None:
            raise ValueError("an event must be numbered (tao.events.stamp) to be kept")
        db = self._conn()
        with db.transaction():
            db.execute("INSERT INTO run_events VALUES (%s, %s, %s, %s) ON CONFLICT DO NOTHING",
                       (run_id, event.seq, dumps(event.to_dict()), time.time()))
            db.execute("SELECT pg_notify(%s, %s)", (CHANNEL, run_id))

    def sink(self, run_id: str) -> Callable[[Event], None]:
        """A sink for ``agent.run(..., sinks=[...])`` that keeps the run's events here."""
        return lambda event: self.append(run_id, event)

    def read(self, run_id: str, after: int = 0) -> list[Event]:
        """The run's events numbered after ``after``, in order."""
        rows = self._conn().execute(
            "SELECT data FROM run_events WHERE run_id = %s AND seq > %s ORDER BY seq",
            (run_id, after)).fetchall()
        return [event_from_dict(json.loads(r[0])) for r in rows]

    async def follow(self, run_id: str, after: int = 0,
                     timeout: float | None = None) -> AsyncIterator[Event]:
        """The run's events after ``after`` as they come, ending with its ``RunFinished``
        (or after ``timeout`` seconds with none new)."""
        import psycopg

        try:
            listener = await psycopg.AsyncConnection.connect(self.url, autocommit=True)
        except psycopg.Error as e:
            raise ConnectionError(f"cannot follow run {run_id} at {safe(self.url)}: {e}") from None
        async with listener:
            try:  # a reader may come before the run's first event
                await listener.execute(SCHEMA)
            except (psycopg.errors.UniqueViolation, psycopg.errors.DuplicateTable,
                    psycopg.errors.DuplicateObject):
                pass  # made by its writer meanwhile
            await listener.execute(f"LISTEN {CHANNEL}")
            quiet_since = time.monotonic()
            while True:
                cur = await listener.execute(
                    "SELECT seq, data FROM run_events WHERE run_id = %s AND seq > %s "
                    "ORDER BY seq", (run_id, after))
                rows = await cur.fetchall()
                for seq, data in rows:
                    after = seq
                    event = event_from_dict(json.loads(data))
                    yield event
                    if type(event) is RunFinished:
                        return
                if rows:
                    quiet_since = time.monotonic()
                elif timeout is not None and time.monotonic() - quiet_since > timeout:
                    return
                # until this run's next row is said, or POLL_S passes (notifications that came
                # while the rows were read wait in the connection: none is missed)
                async for note in listener.notifies(timeout=POLL_S):
                    if note.payload == run_id:
                        break

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None
