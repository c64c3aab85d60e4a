"""Durable runs: the run journal (``journal.py``) and what continues a run from it (``resume.py``).

A tool with side effects that must not happen twice reads its call's idempotency key, which is
the same on the first attempt and on the attempt a resumed run makes after a crash::

    from tao.runs import idempotency_key

    @tool(idempotent=True)
    def pay(invoice: str) -> str:
        return bank.pay(invoice, idempotency_key=idempotency_key())
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Any

#: the key of the tool call running now (``run_id:seq``), None outside a journaled run's call
IDEMPOTENCY_KEY: ContextVar[str | None] = ContextVar("tao_idempotency_key", default=None)


def idempotency_key() -> str | None:
    """``run_id:seq`` of the journaled tool call running now: the same on a resumed run's retry
    of a call whose result the crashed run did not record. None when the run has no journal."""
    return IDEMPOTENCY_KEY.get()


def __getattr__(name: str) -> Any:  # the journal (sqlite3) loads on first use
    if name in ("Journal", "JournalError"):
        from . import journal

        return getattr(journal, name)
    raise AttributeError(f"module 'tao.runs' has no attribute {name!r}")


__all__ = ["IDEMPOTENCY_KEY", "Journal", "JournalError", "idempotency_key"]
