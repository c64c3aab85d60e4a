"""The run journal in PostgreSQL: ``Journal("postgresql://user@host/db")`` or
``TAO_JOURNAL=postgresql://...`` / ``--journal URL``.

The same two tables and the same records as the SQLite file, so ``tao runs`` and ``tao resume``
read a run from any machine that reaches the server, and a run killed on one machine is resumed
on another. The writes go through the same ``Writer`` (its queue, group commit and write-behind;
``tao.runs.writer``); only the connection differs, and this adapter speaks SQLite's dialect
for it: ``?`` placeholders, ``BEGIN``/``COMMIT``, and the two ``PRAGMA synchronous`` settings
the writer switches between become ``synchronous_commit`` on (a commit returns once the server
flushed its WAL: what ``fsync=True`` promises) and off (it may return before: what a record
written behind risks anyway).

psycopg comes with the ``postgres`` extra.
"""

from __future__ import annotations

import re
from typing import Any

from ..errors import TaoError

SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY, agent TEXT, model TEXT, task TEXT, status TEXT,
    started DOUBLE PRECISION, updated DOUBLE PRECISION, meta TEXT);
CREATE TABLE IF NOT EXISTS records (
    run_id TEXT, seq INTEGER, kind TEXT, key TEXT, data TEXT, ts DOUBLE PRECISION,
    PRIMARY KEY (run_id, seq));
"""

_SYNC = {"PRAGMA synchronous=FULL": "SET synchronous_commit TO on",
         "PRAGMA synchronous=NORMAL": "SET synchronous_commit TO off"}


def is_url(target: Any) -> bool:
    return isinstance(target, str) and target.startswith(("postgresql://", "postgres://"))


def safe(url: str) -> str:
    """The URL without its password (for messages and listings)."""
    return re.sub(r"://([^:/@]+):[^@]*@", r"://\1:***@", url)


def create(db: Any, schema: str) -> None:
    """``CREATE TABLE IF NOT EXISTS ...`` on a connection in autocommit, safe when other
    processes make the same tables at the same moment (PostgreSQL then raises a unique
    violation on its catalogue, or says the table's row type exists, instead of skipping: the
    tables exist, which is what was asked; seen with two workers' first runs at once)."""
    import psycopg

    try:
        db.execute(schema)
    except (psycopg.errors.UniqueViolation, psycopg.errors.DuplicateTable,
            psycopg.errors.DuplicateObject):
        db.execute(schema)  # made by the other one meanwhile: now it is a no-op


class PgConnection:
    """A psycopg connection that takes the journal's SQLite-dialect statements."""

    def __init__(self, url: str, fsync: bool):
        try:
            import psycopg
        except ImportError as e:
            raise ImportError("a run journal in PostgreSQL needs psycopg: pip install "
                              "'tao-agents[postgres]'") from e
        self._error = psycopg.Error
        try:
            self.db = psycopg.connect(url, autocommit=True)
            create(self.db, SCHEMA)
            self.db.execute("SET synchronous_commit TO " + ("on" if fsync else "off"))
        except psycopg.Error as e:
            raise JournalConnectError(f"cannot open the run journal at {safe(url)}: "
                                      f"{str(e).strip()}") from None
        self._sql: dict[str, str] = {}

    def execute(self, sql: str, args: Any = ()) -> Any:
        text = self._sql.get(sql)
        if text is None:
            text = self._sql[sql] = _SYNC.get(sql) or sql.replace("?", "%s")
        return self.db.execute(text, tuple(args) if args else None)

    @property
    def in_transaction(self) -> bool:
        from psycopg.pq import TransactionStatus

        return self.db.info.transaction_status != TransactionStatus.IDLE

    def close(self) -> None:
        self.db.close()


class JournalConnectError(TaoError):
    """The PostgreSQL server of a journal URL cannot be reached or used."""
