"""What the pool's workers run in tests/test_durable.py: a scripted model that pays the name in
its task, and ``pay``, whose effect is a row in PostgreSQL under the call's idempotency key
(counted once however often the call is made) beside a row per attempt, with the worker's pid
(counted every time)."""

from __future__ import annotations

import json
import os
import time

from tao import ScriptedModel, tool, tool_call
from tao.runs import idempotency_key


def _db():
    import psycopg

    db = psycopg.connect(os.environ["TAO_TEST_PG"], autocommit=True)
    db.execute("CREATE TABLE IF NOT EXISTS paid (key TEXT PRIMARY KEY, name TEXT)")
    db.execute("CREATE TABLE IF NOT EXISTS attempts (name TEXT, pid INTEGER, ts DOUBLE PRECISION)")
    return db


@tool(idempotent=True)
def pay(name: str) -> str:
    """Pay ``name`` once: the payment is keyed by the call's idempotency key."""
    with _db() as db:
        db.execute("INSERT INTO attempts VALUES (%s, %s, %s)", (name, os.getpid(), time.time()))
        time.sleep(float(os.environ.get("TAO_TEST_PAY_S", "0.2")))  # a kill may land here
        db.execute("INSERT INTO paid VALUES (%s, %s) ON CONFLICT DO NOTHING",
                   (idempotency_key(), name))
        (n,) = db.execute("SELECT count(*) FROM paid WHERE name = %s", (name,)).fetchone()
    return f"paid {name} ({n})"


def model() -> ScriptedModel:
    """Pays the last word of the task, then answers with the tool's result."""
    def turn(messages):
        results = [m.content for m in messages if m.role == "tool"]
        if results:
            return f"done: {results[-1]}"
        task = next(m.content for m in messages if m.role == "user")
        return tool_call("pay", name=task.split()[-1])

    return ScriptedModel([turn, turn])


def calc_model() -> ScriptedModel:
    """Adds 40 and 2 with the calculator (a slow first turn), then answers with the result."""
    def first(messages):
        time.sleep(0.3)
        return tool_call("calculator", operation="add", a=40, b=2)

    return ScriptedModel([first, lambda messages: f"it is {messages[-1].content}"])


def plan_model() -> ScriptedModel:
    """A plan that pays the task's two last words at once (two steps with no order between
    them), then answers with both results."""
    def plan(messages):
        task = next(m.content for m in messages if m.role == "user")
        a, b = task.split()[-2:]
        steps = [{"id": f"step{i}", "description": f"pay {n}", "tool": "pay",
                  "args": {"name": n}, "depends_on": []} for i, n in ((1, a), (2, b))]
        return json.dumps({"steps": steps, "answer": "$step1; $step2"})

    return ScriptedModel([plan])
