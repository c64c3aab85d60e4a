"""A run's events through PostgreSQL (issue 29, point 3): a worker's run writes them, a reader
in another process follows them as they come and, reconnecting with the last number it saw,
gets the rest without a loss or a repeat."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("psycopg")

from tao import ReActAgent, ScriptedModel, calculator, tool_call
from tao.events import RunFinished, RunStarted
from tao.runs.event_log import EventLog

WORKER = textwrap.dedent("""
    import sys, time
    from tao import ReActAgent, ScriptedModel, calculator, tool_call
    from tao.runs.event_log import EventLog

    log = EventLog(sys.argv[1])
    slow = lambda reply: (lambda messages: (time.sleep(0.3), reply)[1])
    model = ScriptedModel([slow(tool_call("calculator", operation="add", a=i, b=1))
                           for i in range(3)] + [slow("done")])
    ReActAgent(model, [calculator]).run("count", sinks=[log.sink("remote-1")], run_id="remote-1")
""")


def kinds(events):
    return [e.kind for e in events]


def test_a_reader_follows_a_run_executing_in_another_process(pg_url):
    worker = subprocess.Popen([sys.executable, "-c", WORKER, pg_url])

    async def follow():
        return [e async for e in EventLog(pg_url).follow("remote-1", timeout=60)]

    try:
        seen = asyncio.run(follow())
    finally:
        worker.wait(60)
    assert worker.returncode == 0
    assert type(seen[0]) is RunStarted and type(seen[-1]) is RunFinished
    assert [e.seq for e in seen] == list(range(1, len(seen) + 1))
    assert seen[-1].result.answer == "done" and seen[-1].result.tool_calls == 3
    assert kinds(seen) == kinds(EventLog(pg_url).read("remote-1"))


def test_reconnecting_with_the_last_number_seen_loses_nothing(pg_url):
    log = EventLog(pg_url)
    events: list = []
    ReActAgent(ScriptedModel([tool_call("calculator", operation="add", a=1, b=1), "2"]),
               [calculator]).run("1+1", sinks=[log.sink("r2"), events.append], run_id="r2")

    async def from_(after):
        return [e async for e in log.follow("r2", after=after, timeout=5)]

    first = asyncio.run(from_(0))[:3]  # the page dropped after three events
    rest = asyncio.run(from_(first[-1].seq))
    assert kinds(first + rest) == kinds(events)
    log.append("r2", events[2])  # written again (a resumed worker): kept once
    assert kinds(log.read("r2")) == kinds(events)
    with pytest.raises(ValueError, match="numbered"):
        log.append("r2", RunStarted("t", "a", "m"))


def test_many_writers_making_the_tables_of_a_fresh_database_at_once_all_get_them(pg_url):
    """Two workers' first runs at once once ended a run with 'type "run_events" already exists':
    PostgreSQL's CREATE TABLE IF NOT EXISTS is not safe against itself. ``pg.create`` tries
    again until the tables are there."""
    import threading
    import uuid

    import psycopg

    from tao.runs import event_log, pg

    errors: list[BaseException] = []
    for _ in range(5):
        name = f"fresh_{uuid.uuid4().hex[:8]}"
        with psycopg.connect(pg_url, autocommit=True) as db:
            db.execute(f'CREATE DATABASE "{name}"')
        head, _, query = pg_url.partition("?")
        url = head.rsplit("/", 1)[0] + "/" + name + ("?" + query if query else "")
        conns = [psycopg.connect(url, autocommit=True) for _ in range(8)]
        go = threading.Barrier(len(conns))

        def make(db):
            try:
                go.wait()
                pg.create(db, event_log.SCHEMA)
                pg.create(db, pg.SCHEMA)
            except BaseException as e:  # noqa: BLE001 - the test reports whatever it was
                errors.append(e)

        threads = [threading.Thread(target=make, args=(db,)) for db in conns]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for db in conns:
            db.close()
    assert errors == []
