"""The pool of ``tao worker`` processes against a real PostgreSQL (pgserver): throughput with
1, 2 and 4 workers, the latency the queue adds to one run, and 200 runs with one worker
SIGKILLed mid-way (issue 29, point 4).

Each run is a scripted ReAct run (no model time): one call of ``pay`` - a side effect keyed by
tao's idempotency key in PostgreSQL, ``PAY_S`` long - then the answer. Runs are submitted from
this process through DBOS's client, the workers run with ``--concurrency 4``.

    python benchmarks/durable_pool.py [--runs 200] [--workers 1,2,4] [--pay-s 0.0]
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _db():
    import psycopg

    db = psycopg.connect(os.environ["TAO_BENCH_PG"], autocommit=True)
    db.execute("CREATE TABLE IF NOT EXISTS paid (key TEXT PRIMARY KEY, name TEXT)")
    db.execute("CREATE TABLE IF NOT EXISTS attempts (name TEXT, pid INTEGER)")
    return db


def pay_tool():
    from tao import tool
    from tao.runs import idempotency_key

    @tool(idempotent=True)
    def pay(name: str) -> str:
        """Pay ``name`` once."""
        with _db() as db:
            db.execute("INSERT INTO attempts VALUES (%s, %s)", (name, os.getpid()))
            time.sleep(float(os.environ.get("TAO_BENCH_PAY_S", "0")))
            db.execute("INSERT INTO paid VALUES (%s, %s) ON CONFLICT DO NOTHING",
                       (idempotency_key(), name))
        return f"paid {name}"

    return pay


pay = pay_tool()


def model():
    from tao import ScriptedModel, tool_call

    def turn(messages):
        results = [m.content for m in messages if m.role == "tool"]
        if results:
            return f"done: {results[-1]}"
        return tool_call("pay", name=next(m.content for m in messages if m.role == "user").split()[-1])

    return ScriptedModel([turn, turn])


def database(server_url: str, name: str) -> str:
    import psycopg

    with psycopg.connect(server_url, autocommit=True) as db:
        db.execute(f'DROP DATABASE IF EXISTS "{name}"')
        db.execute(f'CREATE DATABASE "{name}"')
    head, _, query = server_url.partition("?")
    return head.rsplit("/", 1)[0] + "/" + name + ("?" + query if query else "")


def start_workers(url: str, n: int, pay_s: float) -> list[subprocess.Popen]:
    env = {**os.environ, "TAO_BENCH_PG": url, "TAO_BENCH_PAY_S": str(pay_s),
           "PYTHONPATH": os.pathsep.join([str(HERE), *sys.path])}
    procs = [subprocess.Popen([sys.executable, "-m", "tao", "worker", "--journal", url,
                               "--concurrency", "4"], env=env, stderr=subprocess.PIPE, text=True)
             for _ in range(n)]
    for p in procs:
        p.stderr.readline()  # "tao worker ...": launched
    return procs


def stop(procs: list[subprocess.Popen]) -> None:
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    for p in procs:
        try:
            p.wait(30)
        except subprocess.TimeoutExpired:
            p.kill()


def batch(url: str, runs: int, workers: int, pay_s: float, kill_after: float | None = None):
    from tao.durable import result, submit

    os.environ["TAO_BENCH_PG"] = url
    _db().close()
    procs = start_workers(url, workers, pay_s)
    try:
        t = time.perf_counter()
        ids = [submit(url, f"pay p{i}", model="py:durable_pool:model", tools=["durable_pool:pay"],
                      fsync=False) for i in range(runs)]
        if kill_after is not None:
            time.sleep(kill_after)
            procs[0].send_signal(signal.SIGKILL)
        results = [result(url, rid, timeout=600) for rid in ids]
        took = time.perf_counter() - t
    finally:
        stop(procs)
    with _db() as db:
        paid = dict(db.execute("SELECT name, count(*) FROM paid GROUP BY name").fetchall())
        tried = dict(db.execute("SELECT name, count(*) FROM attempts GROUP BY name").fetchall())
    ok = sum(r.status == "done" and r.answer == f"done: paid p{i}" for i, r in enumerate(results))
    return took, ok, paid, tried


def latency(url: str, n: int = 10) -> tuple[float, float]:
    """One run at a time on one idle worker: submit -> result, and the same run in-process."""
    from tao.durable import result, submit
    from tao.durable.workflow import execute

    os.environ["TAO_BENCH_PG"] = url
    _db().close()
    procs = start_workers(url, 1, 0.0)
    try:
        result(url, submit(url, "pay warm", model="py:durable_pool:model",
                           tools=["durable_pool:pay"], fsync=False), timeout=60)
        queued = []
        for i in range(n):
            t = time.perf_counter()
            result(url, submit(url, f"pay q{i}", model="py:durable_pool:model",
                               tools=["durable_pool:pay"], fsync=False), timeout=60)
            queued.append(time.perf_counter() - t)
    finally:
        stop(procs)
    direct = []
    for i in range(n):
        t = time.perf_counter()
        execute({"journal": url, "run_id": f"direct{i}", "task": f"pay d{i}", "agent": "react",
                 "model": "py:durable_pool:model", "tools": ["durable_pool:pay"], "fsync": False})
        direct.append(time.perf_counter() - t)
    return statistics.median(queued), statistics.median(direct)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--workers", default="1,2,4")
    ap.add_argument("--pay-s", type=float, default=0.0, help="seconds each payment takes")
    args = ap.parse_args()
    import pgserver

    sys.path.insert(0, str(HERE))
    folder = tempfile.mkdtemp(prefix="tao-pg-bench-")
    server = pgserver.get_server(folder, cleanup_mode="stop")
    base = server.get_uri()
    try:
        print(f"| workers | runs | seconds | runs/s | done right | payments != 1 |")
        print("|---|---|---|---|---|---|")
        for w in [int(x) for x in args.workers.split(",")]:
            took, ok, paid, _ = batch(database(base, f"tp{w}"), args.runs, w, args.pay_s)
            bad = sum(v != 1 for v in paid.values()) + (args.runs - len(paid))
            print(f"| {w} | {args.runs} | {took:.1f} | {args.runs / took:.1f} | {ok} | {bad} |",
                  flush=True)
        queued, direct = latency(database(base, "lat"))
        print(f"\none run, median of 10: submit -> result {queued * 1000:.0f} ms; the same run "
              f"in-process {direct * 1000:.0f} ms; the queue adds {(queued - direct) * 1000:.0f} ms")
        took, ok, paid, tried = batch(database(base, "kill"), args.runs, 2, 0.2, kill_after=2.0)
        again = sum(v > 1 for v in tried.values())
        print(f"\n{args.runs} runs, 2 workers, payments 0.2 s, one worker SIGKILLed 2 s in: "
              f"{ok}/{args.runs} done with the undisturbed answer in {took:.1f} s; payments "
              f"{sorted(set(paid.values()))} per name ({len(paid)} names); {again} payments "
              f"tried twice (cut mid-way), made once")
    finally:
        from tao.durable.submit import forget

        forget()
        server.cleanup()


if __name__ == "__main__":
    main()
