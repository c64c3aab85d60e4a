"""Runs executed by a pool of workers on DBOS, durable in PostgreSQL (issue 29).

    tao worker --journal postgresql://...        # on each machine of the pool
    from tao.durable import submit, result
    run_id = submit("postgresql://...", "What is 15 + 27?", agent="react", model="local")
    result("postgresql://...", run_id)            # the Result, once a worker finished it

Each run is a DBOS workflow on the ``tao-runs`` queue (a concurrency limit per worker); the
workers share one PostgreSQL database, which holds DBOS's queue and workflow state (schema
``dbos``), tao's run journal and the runs' events (``tao.runs.event_log``). A worker that dies
has its runs recovered by another (``tao.durable.worker``: heartbeats), and the recovered run
resumes from tao's journal: model replies and tool results served, a side-effecting call that
started and never finished handled by tao's rules (its idempotency key, or an approval
question) - never repeated blindly. DBOS itself is imported only here, on use.
"""

from __future__ import annotations

from .submit import QUEUE, result, submit

__all__ = ["QUEUE", "result", "submit"]
