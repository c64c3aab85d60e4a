"""Runs executed by a pool of workers on DBOS, durable in PostgreSQL (issue 29, points 2-4).

Two ``tao worker`` processes take submitted runs from the queue; one is SIGKILLed while it pays
(a side effect keyed by tao's idempotency key); the other hands its runs back to the queue and
finishes them from the journal. Every run ends "done" with the answer an undisturbed run gives,
and every payment is made exactly once. Against a real PostgreSQL (pgserver)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("dbos")
psycopg = pytest.importorskip("psycopg")

import durable_scripts

from tao.durable import result, submit
from tao.durable.submit import forget
from tao.runs import Journal
from tao.runs.event_log import EventLog

HERE = Path(__file__).parent


@pytest.fixture
def pool(pg_url, monkeypatch):
    """``start()`` a ``tao worker`` process on a fresh database; all stopped at the end."""
    name = f"pool{os.getpid()}_{time.monotonic_ns()}"
    with psycopg.connect(pg_url, autocommit=True) as db:
        db.execute(f'CREATE DATABASE "{name}"')
    head, _, query = pg_url.partition("?")
    url = head.rsplit("/", 1)[0] + "/" + name + ("?" + query if query else "")
    monkeypatch.setenv("TAO_TEST_PG", url)
    durable_scripts._db().close()  # the test's tables, before the workers race to make them
    env = {**os.environ, "TAO_TEST_PG": url, "TAO_TEST_PAY_S": "0.2",
           "PYTHONPATH": os.pathsep.join([str(HERE), *sys.path])}
    procs: list[subprocess.Popen] = []

    def start() -> subprocess.Popen:
        proc = subprocess.Popen([sys.executable, "-m", "tao", "worker", "--journal", url,
                                 "--concurrency", "4"], env=env, cwd=HERE,
                                stderr=subprocess.PIPE, text=True)
        line = proc.stderr.readline()
        assert line.startswith("tao worker "), line
        procs.append(proc)
        return proc

    start.url = url
    yield start
    forget(url)
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    for proc in procs:
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()


def paid_and_tried(url):
    with psycopg.connect(url) as db:
        paid = dict(db.execute("SELECT name, count(*) FROM paid GROUP BY name").fetchall())
        tried = dict(db.execute("SELECT name, count(*) FROM attempts GROUP BY name").fetchall())
        pids = {r[0] for r in db.execute("SELECT DISTINCT pid FROM attempts").fetchall()}
    return paid, tried, pids


def paying(url, pid) -> bool:
    """Whether worker ``pid`` started a payment that is not made yet."""
    with psycopg.connect(url) as db:
        return bool(db.execute("SELECT 1 FROM attempts a WHERE a.pid = %s AND NOT EXISTS "
                               "(SELECT 1 FROM paid p WHERE p.name = a.name)", (pid,)).fetchone())


def kill_while_paying(url, worker) -> None:
    """SIGKILL ``worker`` once it is inside a payment (started, not made)."""
    deadline = time.monotonic() + 60
    while not paying(url, worker.pid):
        assert time.monotonic() < deadline, "the first worker took no run"
        time.sleep(0.01)
    worker.send_signal(signal.SIGKILL)


def test_a_worker_killed_mid_payment_leaves_every_run_done_and_every_payment_single(pool):
    first, second = pool(), pool()
    n = 200
    ids = [submit(pool.url, f"pay p{i}", model="py:durable_scripts:model",
                  tools=["durable_scripts:pay"], fsync=False) for i in range(n)]
    kill_while_paying(pool.url, first)
    results = [result(pool.url, rid, timeout=120) for rid in ids]
    assert [r.status for r in results] == ["done"] * n
    assert [r.answer for r in results] == [f"done: paid p{i} (1)" for i in range(n)]
    paid, tried, pids = paid_and_tried(pool.url)
    assert paid == {f"p{i}": 1 for i in range(n)}  # each payment exactly once
    assert max(tried.values()) == 2  # some were cut mid-way and tried again: under the same key
    assert pids == {first.pid, second.pid}
    runs = Journal(pool.url).runs(limit=1000)
    assert len(runs) == n and {r["status"] for r in runs} == {"done"}


def test_a_run_on_a_worker_streams_its_events_to_any_reader(pool):
    pool()
    rid = submit(pool.url, "pay ann", model="py:durable_scripts:model",
                 tools=["durable_scripts:pay"], fsync=False)

    async def follow():
        return [e async for e in EventLog(pool.url).follow(rid, timeout=60)]

    import asyncio

    events = asyncio.run(follow())
    assert events[0].kind == "run_started" and events[-1].kind == "run_finished"
    assert events[-1].result.answer == "done: paid ann (1)" == result(pool.url, rid).answer
    assert [e.seq for e in events] == list(range(1, len(events) + 1))


def test_each_model_call_and_tool_call_of_a_run_is_a_step_of_its_workflow(pool):
    """DBOS sees the run's calls as its steps (its step list, the Conductor), each recording
    the call's key beside its output; the journal is inside each step (tao.runs.steps)."""
    from tao.durable.submit import _client

    pool()
    rid = submit(pool.url, "pay bo", model="py:durable_scripts:model",
                 tools=["durable_scripts:pay"], fsync=False)
    assert result(pool.url, rid, timeout=60).answer == "done: paid bo (1)"
    steps = _client(pool.url).list_workflow_steps(rid)
    assert [s["function_name"] for s in steps] == ["tao.model", "tao.tool", "tao.model"]
    model, tool, answer = (s["output"] for s in steps)
    assert model["message"]["tool_calls"][0]["name"] == "pay"
    assert tool["key"] == '["pay", {"name": "bo"}]' and tool["content"] == "paid bo (1)"
    assert answer["message"]["content"] == "done: paid bo (1)"


def test_a_plan_whose_steps_pay_at_once_is_killed_and_recovered_with_each_payment_single(pool):
    """Parallel tool steps are DBOS steps started in no fixed order: recovered on the other
    worker, each is matched to its own recorded output by its key, or asks the journal."""
    first, second = pool(), pool()
    n = 40
    ids = [submit(pool.url, f"pay a{i} b{i}", agent="plan", model="py:durable_scripts:plan_model",
                  tools=["durable_scripts:pay"], fsync=False) for i in range(n)]
    kill_while_paying(pool.url, first)
    results = [result(pool.url, rid, timeout=120) for rid in ids]
    assert [r.status for r in results] == ["done"] * n
    assert [r.answer for r in results] == [f"paid a{i} (1); paid b{i} (1)" for i in range(n)]
    paid, _, _ = paid_and_tried(pool.url)
    assert paid == {f"{x}{i}": 1 for i in range(n) for x in "ab"}


def test_a_bad_submission_is_refused_before_it_is_queued(pool):
    with pytest.raises(ValueError, match="unknown agent"):
        submit(pool.url, "x", agent="nope")


def test_the_workbench_sends_runs_to_the_pool_and_streams_them_back(pool, monkeypatch, tmp_path):
    pytest.importorskip("fastapi")
    from web_helpers import Served, sse, start

    from tao.web import create_app

    pool()
    monkeypatch.setenv("TAO_WEB_SESSION_KEY", "k" * 40)  # what the servers of one pool share
    monkeypatch.setenv("TAO_DATA_DIR", str(tmp_path / "first"))
    app = create_app(journal=pool.url, models={"scripted": "py:durable_scripts:calc_model"},
                     workers=True, audit=None)
    with Served(app) as served, served.client() as c:
        c.get("/")
        run_id = start(c, model={"name": "scripted"}, task="40 + 2?")
        first = sse(c, run_id, limit=3)  # the page drops, then reconnects
        rest = sse(c, run_id, last=int(first[-1]["id"]))
        listed = c.get("/api/runs").json()["runs"]
        for refused in ({"tools": ["workspace"]}, {"model": {"name": "py:os:getcwd"}},
                        {"approve": ["calculator"]}, {"agent": "code"}):
            body = {"model": {"name": "scripted"}, **refused}
            r = c.post("/api/runs", json={"agent": "react", "tools": ["calculators"],
                                          "task": "x", **body})
            assert r.status_code == 400 and r.json()["code"] == "not_in_pool", (refused, r.text)
        # another server behind the same balancer: the same session (its signed cookie) finds
        # the run in the journal and streams it from PostgreSQL
        monkeypatch.setenv("TAO_DATA_DIR", str(tmp_path / "second"))  # another machine
        other = create_app(journal=pool.url, workers=True, audit=None)
        with Served(other) as second, second.client() as c2:
            c2.cookies.update(c.cookies)
            again = sse(c2, run_id)
    events = [m["data"] for m in first + rest[:-1]]
    assert [m["data"] for m in again[:-1]] == events
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    assert events[0]["type"] == "run_started" and events[-1]["type"] == "run_finished"
    assert events[-1]["result"]["answer"] == "it is 42" and rest[-1]["data"] == {"status": "done"}
    assert [(r["run_id"], r["status"]) for r in listed] == [(run_id, "done")]
