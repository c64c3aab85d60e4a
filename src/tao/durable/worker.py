"""``tao worker``: one member of the pool that executes submitted runs.

It launches DBOS on the journal's PostgreSQL database under an executor id of its own (DBOS
gives every process the same one unless told: two live processes sharing it would run one
workflow twice), takes runs from the ``tao-runs`` queue - at most ``concurrency`` at a time -
and beats: every ``BEAT_S`` it writes the time in ``tao_workers``. DBOS 3.4 hands a dead
executor's workflows to nobody by itself (its hosted Conductor does that), so each worker also
looks for members whose beat is older than ``STALE_S``: one of the live ones claims each such
member (an atomic UPDATE ... RETURNING, so one claim a member) and hands its pending runs back
to the queue (``DBOS._recover_pending_workflows``), where any worker takes them. A member wrongly
thought dead (paused longer than ``STALE_S``) may then run a run twice at once: tao's journal
and the tools' idempotency keys are what keeps its side effects single.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import uuid
from typing import Any

from .submit import APP, QUEUE, VERSION

BEAT_S = 0.5
STALE_S = 3.0
_log = logging.getLogger("tao.durable")

WORKERS = """
CREATE TABLE IF NOT EXISTS tao_workers (
    executor TEXT PRIMARY KEY, host TEXT, pid INTEGER, ts TIMESTAMPTZ, recovered_by TEXT);
"""


def launch(url: str, *, executor_id: str | None = None, concurrency: int = 2,
           queue: str = QUEUE, poll_s: float = 0.1) -> str:
    """DBOS launched in this process as a worker of the pool at ``url``; its executor id."""
    from dbos import DBOS

    from .workflow import register

    from ..runs import steps

    eid = executor_id or f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
    register()
    steps.enable()  # each model call and tool call of a run a DBOS step (tao.runs.steps)
    DBOS(config={"name": APP, "system_database_url": url, "executor_id": eid,
                 "application_version": VERSION, "log_level": "WARNING"})
    DBOS.launch()
    DBOS.register_queue(queue, worker_concurrency=concurrency, polling_interval_sec=poll_s,
                        on_conflict="always_update")
    return eid


class Heart:
    """The worker's beat and its watch over the others (see the module's words)."""

    def __init__(self, url: str, executor_id: str):
        self.url, self.eid = url, executor_id
        self.stop = threading.Event()
        self.recovered: list[str] = []

    def beat_once(self, db: Any) -> list[str]:
        db.execute("INSERT INTO tao_workers VALUES (%s, %s, %s, now(), NULL) "
                   "ON CONFLICT (executor) DO UPDATE SET ts = now(), pid = excluded.pid, "
                   "recovered_by = NULL", (self.eid, socket.gethostname(), os.getpid()))
        dead = [r[0] for r in db.execute(
            "UPDATE tao_workers SET recovered_by = %s WHERE ts < now() - make_interval("
            "secs => %s) AND recovered_by IS NULL AND executor <> %s RETURNING executor",
            (self.eid, STALE_S, self.eid)).fetchall()]
        if dead:
            from dbos import DBOS

            handles = DBOS._recover_pending_workflows(dead)
            self.recovered += dead
            _log.warning("worker %s: %d run(s) of %s handed back to the queue", self.eid,
                         len(handles), ", ".join(dead))
        return dead

    def run(self) -> None:
        import psycopg

        from ..runs.pg import create

        with psycopg.connect(self.url, autocommit=True) as db:
            create(db, WORKERS)
            while not self.stop.is_set():
                try:
                    self.beat_once(db)
                except Exception as e:  # noqa: BLE001 - a missed beat is said, the next one tried
                    _log.warning("worker %s: beat failed: %s", self.eid, e)
                self.stop.wait(BEAT_S)

    def leave(self, db_url: str | None = None) -> None:
        """Stop beating and leave the table (a worker that stops cleanly is not recovered)."""
        self.stop.set()
        import psycopg

        with psycopg.connect(db_url or self.url, autocommit=True) as db:
            db.execute("DELETE FROM tao_workers WHERE executor = %s", (self.eid,))


def serve(url: str, *, concurrency: int = 2, queue: str = QUEUE,
          executor_id: str | None = None, ready: Any = None) -> None:
    """Be a worker until SIGTERM or Ctrl-C: take runs, beat, recover dead members' runs."""
    import signal

    from dbos import DBOS

    eid = launch(url, executor_id=executor_id, concurrency=concurrency, queue=queue)
    heart = Heart(url, eid)
    beating = threading.Thread(target=heart.run, name="tao-worker-beat", daemon=True)
    beating.start()
    stopping = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stopping.set())
    if ready is not None:
        ready(eid)
    try:
        stopping.wait()
    finally:
        heart.leave()
        DBOS.destroy(workflow_completion_timeout_sec=10)
