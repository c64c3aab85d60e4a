"""``tao.Session``: a conversation kept across runs, processes and machines.

``agent.run(task, session=Session("ann"))`` starts from what the session holds (fitted to the
model's context by the short-term memory, oldest turns dropped first) and appends the run to
it: the task and the answer, as a user and an assistant message. SQLite by default
(``sessions.db`` in tao's data directory, or ``path=``); PostgreSQL with
``Session(id, path="postgresql://...")`` (psycopg, from the ``postgres`` extra). Each append is
one transaction of its own, numbered by the database, so two processes appending to one session
lose nothing and each reads the other's turns in order.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

from ..errors import TaoError
from ..messages import Message

SCHEMA = ("CREATE TABLE IF NOT EXISTS session_messages (n {serial} PRIMARY KEY, "
          "session TEXT NOT NULL, role TEXT NOT NULL, content TEXT NOT NULL, ts {real})")
INDEX = "CREATE INDEX IF NOT EXISTS session_messages_by_id ON session_messages (session, n)"


class SessionError(TaoError):
    """The session's store cannot be opened or written."""


class Session:
    """``Session(id, path=None)``: one conversation (``id``: any text, e.g. the user's id and a
    chat's). ``messages()`` reads it, ``add(messages)`` appends, ``clear()`` empties it."""

    def __init__(self, id: str, path: str | os.PathLike[str] | None = None):
        if not str(id):
            raise ValueError("a session needs an id")
        self.id = str(id)
        target = str(path) if path is not None else ""
        self.url = target if target.startswith(("postgresql://", "postgres://")) else ""
        self.path = None if self.url else (Path(target).expanduser() if target
                                           else _default_path())
        self._lock = threading.Lock()
        self._db: Any = None

    # -- reading and writing ------------------------------------------------------------------
    def messages(self, limit: int | None = None) -> list[Message]:
        """The conversation so far, oldest first (the last ``limit`` messages)."""
        mark = self._mark
        sql = (f"SELECT role, content FROM session_messages WHERE session = {mark} "
               "ORDER BY n DESC" + (f" LIMIT {int(limit)}" if limit else ""))
        rows = self._run(sql, (self.id,), fetch=True)
        return [Message(role, content) for role, content in reversed(rows)]

    def add(self, messages: list[Message]) -> None:
        """Append ``messages`` (their role and text) in one transaction."""
        mark = self._mark
        rows = [(self.id, m.role, m.content or "", time.time()) for m in messages]
        self._run(f"INSERT INTO session_messages (session, role, content, ts) VALUES "
                  f"({mark}, {mark}, {mark}, {mark})", rows, many=True)

    def add_turn(self, task: str, answer: str | None) -> None:
        """A run's task and its answer (nothing for a run that gave none)."""
        if answer is not None:
            self.add([Message.user(task), Message.assistant(answer)])

    def clear(self) -> None:
        self._run(f"DELETE FROM session_messages WHERE session = {self._mark}", (self.id,))

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None

    def __repr__(self) -> str:
        return f"Session({self.id!r}, path={self.url or str(self.path)!r})"

    # -- the store ------------------------------------------------------------------------------
    @property
    def _mark(self) -> str:
        return "%s" if self.url else "?"

    def _run(self, sql: str, args: Any, fetch: bool = False, many: bool = False) -> Any:
        with self._lock:
            db = self._connect()
            try:
                if self.url:
                    with db.transaction(), db.cursor() as cur:
                        (cur.executemany if many else cur.execute)(sql, args)
                        return cur.fetchall() if fetch else None
                with db:  # one transaction
                    cur = (db.executemany if many else db.execute)(sql, args)
                    return cur.fetchall() if fetch else None
            except (sqlite3.Error, OSError) as e:
                raise SessionError(f"session {self.id!r} at {self.path}: {e}") from None

    def _connect(self) -> Any:
        if self._db is not None:
            return self._db
        if self.url:
            try:
                import psycopg
            except ImportError as e:
                raise ImportError("a session in PostgreSQL needs psycopg: pip install "
                                  "'tao-agents[postgres]'") from e
            try:
                db = psycopg.connect(self.url, autocommit=True)
                with db.cursor() as cur:
                    cur.execute(SCHEMA.format(serial="BIGSERIAL", real="DOUBLE PRECISION"))
                    cur.execute(INDEX)
            except psycopg.Error as e:
                raise SessionError(f"cannot open the session store at {_safe(self.url)}: {e}") \
                    from None
        else:
            try:
                assert self.path is not None
                self.path.parent.mkdir(parents=True, exist_ok=True)
                db = sqlite3.connect(self.path, check_same_thread=False, timeout=30)
                db.execute("PRAGMA journal_mode=WAL")
                db.execute(SCHEMA.format(serial="INTEGER", real="REAL"))
                db.execute(INDEX)
            except (sqlite3.Error, OSError) as e:
                raise SessionError(f"cannot open the session store at {self.path}: {e}") from None
        self._db = db
        return db


def _default_path() -> Path:
    from ..paths import data_dir

    return data_dir() / "sessions.db"


def _safe(url: str) -> str:
    """The URL without its password (an error message may be shown or logged)."""
    import re

    return re.sub(r"://([^:/@]+):[^@]*@", r"://\1:***@", url)


__all__ = ["Session", "SessionError"]
