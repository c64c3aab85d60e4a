"""The workbench under load: 50 SSE clients at once, each watching a scripted run, against a real
``tao serve`` app (uvicorn in a subprocess on 127.0.0.1). Measured: the latency from an event's
``ts`` (stamped when the agent emitted it) to the moment a client has read and parsed it (the same
machine's clock), p50/p95/max, over the events emitted while the client was connected ("live";
the ones before it, e.g. the run's start, came from the buffer); that every client got every event exactly once, in order; the
server's RSS idle and at its peak (VmHWM).

Two shapes: ``runs`` - each client starts its own run (its own session) and watches it, 50 runs
at once; ``fanout`` - one run, 50 clients watching it. The model is a ``ScriptedModel`` paced at
``--delay`` seconds a chunk (default 20 ms: a 50 tokens/s endpoint): six ReAct turns, five
calculator calls, streamed text - about 90 events a run.

    python benchmarks/web_load.py [--clients 50] [--delay 0.02] [--shape runs|fanout|both] [--rounds 3]
                                  [--fsync]   # the journal fsyncs each tool start, as tao run does
                                  [--audit fsync|nofsync|off]   # the audit log (default: not fsync'd)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any


def paced_model() -> Any:
    from tao.models.base import Model
    from tao.models.scripted import ScriptedModel, tool_call

    class Paced(Model):
        def __init__(self, inner: Model, delay: float):
            self.inner, self.delay = inner, delay
            self.name, self.supports_grammar = "paced", False

        async def stream(self, messages: Any, **kwargs: Any) -> Any:
            async for chunk in self.inner.stream(messages, **kwargs):
                await asyncio.sleep(self.delay)
                yield chunk

    delay = float(os.environ.get("WEB_LOAD_DELAY", "0.02"))
    turns = [(f"第 {i} 步：把 {i} 加到总数上，再看下一步要做什么。",
              tool_call("calculator", operation="add", a=i, b=i)) for i in range(1, 6)]
    return Paced(ScriptedModel([*turns, "算完了：总数是 30。"], chunk_size=4), delay)


def serve(port: int, folder: str) -> None:
    """The server side (run in a subprocess): the workbench app with the paced model."""
    import uvicorn

    from tao.web import create_app

    app = create_app(journal=Path(folder) / "runs.db", models={"paced": paced_model},
                     workspace_root=Path(folder) / "ws",
                     journal_fsync=os.environ.get("WEB_LOAD_FSYNC") == "1",
                     audit=os.environ.get("WEB_LOAD_AUDIT") != "off",
                     audit_fsync=os.environ.get("WEB_LOAD_AUDIT") == "fsync",
                     max_runs=int(os.environ.get("WEB_LOAD_MAX_RUNS", "1000")))  # the load, not the cap
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)


def rss_kib(pid: int) -> dict[str, int]:
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(("VmRSS:", "VmHWM:")):
                key, value = line.split(":")
                out[key] = int(value.split()[0])
    return out


async def watch(session: Any, url: str, run_id: str, latencies: list[float]) -> list[int]:
    """Read a run's SSE stream to its end; the seqs seen (latency of each event recorded)."""
    seqs: list[int] = []
    async with session.get(f"{url}/api/runs/{run_id}/events") as r:
        assert r.status == 200, r.status
        connected = time.time()  # events stamped before this were waiting in the buffer
        event = data = None
        async for raw in r.content:
            line = raw.decode("utf-8").rstrip("\r\n")
            if line.startswith("event: "):
                event = line[7:]
            elif line.startswith("data: "):
                data = line[6:]
            elif not line and event is not None:
                if event == "end":
                    break
                d = json.loads(data or "{}")
                if d["ts"] >= connected:
                    latencies.append(time.time() - d["ts"])
                seqs.append(d["seq"] if d["run_id"] == run_id else -1)  # another run's: a failure
                event = data = None
    return seqs


async def start_run(session: Any, url: str) -> str:
    body = {"agent": "react", "model": {"name": "paced"}, "tools": ["calculators"],
            "task": "把 1 到 5 各自翻倍后加起来", "max_turns": 10}
    async with session.post(f"{url}/api/runs", json=body) as r:
        assert r.status == 201, await r.text()
        return (await r.json())["run_id"]


async def load(url: str, clients: int, shape: str) -> dict[str, Any]:
    import aiohttp

    latencies: list[float] = []
    timeout = aiohttp.ClientTimeout(total=600)
    sessions = [aiohttp.ClientSession(timeout=timeout, cookie_jar=aiohttp.CookieJar(unsafe=True))
                for _ in range(clients)]  # one user each (unsafe=True: keep cookies of an IP)
    try:
        t0 = time.perf_counter()
        if shape == "runs":
            run_ids = await asyncio.gather(*(start_run(s, url) for s in sessions))
        else:  # one run: every watcher is the same user (the run's session)
            first = await start_run(sessions[0], url)
            from yarl import URL

            for s in sessions[1:]:
                s.cookie_jar.update_cookies({c.key: c.value for c in sessions[0].cookie_jar},
                                            URL(url))
            run_ids = [first] * clients
        seen = await asyncio.gather(*(watch(s, url, r, latencies)
                                      for s, r in zip(sessions, run_ids)))
        wall = time.perf_counter() - t0
    finally:
        for s in sessions:
            await s.close()
    complete = sum(1 for seqs in seen if seqs == list(range(1, len(seqs) + 1)) and seqs)
    lat = sorted(latencies)
    return {"shape": shape, "clients": clients, "runs": len(set(run_ids)),
            "events": sum(map(len, seen)), "live": len(lat),
            "complete": complete, "wall_s": round(wall, 2),
            "p50_ms": round(statistics.median(lat) * 1000, 2),
            "p95_ms": round(lat[int(0.95 * (len(lat) - 1))] * 1000, 2),
            "max_ms": round(lat[-1] * 1000, 2)}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--clients", type=int, default=50)
    ap.add_argument("--delay", type=float, default=0.02)
    ap.add_argument("--shape", choices=("runs", "fanout", "both"), default="both")
    ap.add_argument("--rounds", type=int, default=3, help="Each shape this many times, in turn.")
    ap.add_argument("--fsync", action="store_true",
                    help="Journal with fsync at each tool start (create_app(journal_fsync=True)).")
    ap.add_argument("--audit", choices=("fsync", "nofsync", "off"), default="nofsync",
                    help="The audit log: each line fsync'd, not (create_app's default), or none.")
    ap.add_argument("--serve", nargs=2, metavar=("PORT", "DIR"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.serve:
        return serve(int(args.serve[0]), args.serve[1])
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with tempfile.TemporaryDirectory(prefix="web-load-") as folder:
        env = {**os.environ, "WEB_LOAD_DELAY": str(args.delay), "TAO_DATA_DIR": folder,
               "WEB_LOAD_FSYNC": "1" if args.fsync else "0", "WEB_LOAD_AUDIT": args.audit}
        server = subprocess.Popen([sys.executable, __file__, "--serve", str(port), folder], env=env)
        try:
            import urllib.request

            for _ in range(200):
                try:
                    urllib.request.urlopen(f"{url}/api/options", timeout=1).read()
                    break
                except OSError:
                    time.sleep(0.05)
            idle = rss_kib(server.pid)["VmRSS"]
            rows = []
            load_avg = os.getloadavg()[0]
            for _ in range(args.rounds):
                for shape in (("runs", "fanout") if args.shape == "both" else (args.shape,)):
                    rows.append(asyncio.run(load(url, args.clients, shape)))
                    rows[-1]["rss_mib"] = round(rss_kib(server.pid)["VmRSS"] / 1024, 1)
            peak = rss_kib(server.pid)["VmHWM"]
        finally:
            server.terminate()
            server.wait(10)
    cols = ["shape", "clients", "runs", "events", "live", "complete", "wall_s", "p50_ms",
            "p95_ms", "max_ms", "rss_mib"]
    print(f"model: paced ScriptedModel, {args.delay * 1000:.0f} ms a chunk; "
          f"server RSS idle {idle / 1024:.1f} MiB, peak {peak / 1024:.1f} MiB; "
          f"load average at start {load_avg:.1f} on {os.cpu_count()} CPUs; journal fsync "
          f"{'on' if args.fsync else 'off'}, audit log {args.audit}")
    print(" | ".join(cols))
    for row in rows:
        print(" | ".join(str(row[c]) for c in cols))
    for shape in dict.fromkeys(r["shape"] for r in rows):  # the median round of each shape
        mine = [r for r in rows if r["shape"] == shape]
        print(f"{shape}: median of {len(mine)} rounds p50 "
              f"{statistics.median(r['p50_ms'] for r in mine)} ms, p95 "
              f"{statistics.median(r['p95_ms'] for r in mine)} ms; every client got every event "
              f"once, in order: {all(r['complete'] == r['clients'] for r in mine)}")


if __name__ == "__main__":
    main()
