"""``tao eval --concurrency``: 1,000 tasks against an OpenAI-compatible server answering in 200 ms.

The server is a stdlib asyncio HTTP/1.1 server in a process of its own on 127.0.0.1 (keep-alive,
each answer a chat.completion.chunk event stream sent after ``--latency`` seconds); it answers
"What is A + B?" with the sum, or with ``--tool`` first with a ``calculate`` call and then with
what the tool returned. The client side is tao as a user runs it: ``Evaluation`` on a JSONL
suite with a real ``OpenAIModel`` and ReAct (native tools), results in an ``--out`` directory.

One task's time is measured alone first (``--alone`` tasks at concurrency 1, wall / tasks); the
ideal for the run is tasks / concurrency x that. RSS is this process's VmRSS from
/proc/self/status, sampled every 5 ms by a thread during the run; the growth is its peak minus
the value just before the run (imports, client and suite already loaded by the alone run), per
task in flight = growth / concurrency. VmHWM (reset through /proc/self/clear_refs) is printed
as a check on the sampling. CPU is this process's ``time.process_time()``; "waited for a CPU" is
the main thread's run-queue time from /proc/self/schedstat (other processes had the cores). The
server reports the most requests it had in flight and its own CPU per request (it has the other
core: it must not be what the run waits for). ``--stand-in`` adds a row whose model only sleeps
(tao's own cost, no HTTP); ``--workers W`` a row of W processes x concurrency / W.

    python benchmarks/eval_concurrency.py [--tasks 1000] [--concurrency 100] [--latency 0.2]
                                          [--tool] [--stand-in] [--workers 2] [--repeat 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import re
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

# -- the server (its own process) -------------------------------------------------------------


def _chunk(delta: dict, finish: str | None = None) -> bytes:
    event = {"id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 0,
             "model": "bench", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    return b"data: " + json.dumps(event).encode() + b"\n\n"


def _answer(body: dict, tool_first: bool) -> bytes:
    messages = body.get("messages", [])
    tool = [m for m in messages if m.get("role") == "tool"]
    question = next(m["content"] for m in reversed(messages) if m.get("role") == "user")
    a, b = map(int, re.findall(r"\d+", question)[:2])
    events = [_chunk({"role": "assistant", "content": ""})]
    if tool_first and body.get("tools") and not tool:
        events.append(_chunk({"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                                              "function": {"name": "calculate",
                                                           "arguments": json.dumps({"expression": f"{a} + {b}"})}}]}))
        events.append(_chunk({}, "tool_calls"))
    else:
        text = f"{a} + {b} = {tool[-1]['content'] if tool else a + b}"
        events += [_chunk({"content": text}), _chunk({}, "stop")]
    usage = {"id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 0,
             "model": "bench", "choices": [],
             "usage": {"prompt_tokens": 50, "completion_tokens": 10, "total_tokens": 60}}
    events += [b"data: " + json.dumps(usage).encode() + b"\n\n", b"data: [DONE]\n\n"]
    return b"".join(events)


def serve(port: multiprocessing.Value, latency: float, tool_first: bool) -> None:
    stats = {"in_flight": 0, "max_in_flight": 0, "requests": 0}

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                method, path = lines[0].split(" ")[:2]
                headers = {k.lower(): v.strip() for k, _, v in (h.partition(":") for h in lines[1:] if h)}
                body = await reader.readexactly(int(headers.get("content-length", 0)))
                if method == "GET" and path.endswith("/stats"):
                    data = json.dumps({**stats, "cpu_s": time.process_time()}).encode()
                    kind = b"application/json"
                    stats["max_in_flight"] = stats["requests"] = 0
                else:
                    stats["requests"] += 1
                    stats["in_flight"] += 1
                    stats["max_in_flight"] = max(stats["max_in_flight"], stats["in_flight"])
                    try:
                        await asyncio.sleep(latency)
                        data, kind = _answer(json.loads(body), tool_first), b"text/event-stream"
                    finally:
                        stats["in_flight"] -= 1
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: " + kind + b"\r\nContent-Length: "
                             + str(len(data)).encode() + b"\r\n\r\n" + data)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    async def main() -> None:
        server = await asyncio.start_server(handle, "127.0.0.1", 0, backlog=1024)
        port.value = server.sockets[0].getsockname()[1]
        await server.serve_forever()

    asyncio.run(main())


# -- the client (this process) ----------------------------------------------------------------


class RssSampler(threading.Thread):
    """The peak of VmRSS (kB) while running, read from /proc/self/status every ``every`` s."""

    def __init__(self, every: float = 0.005):
        super().__init__(daemon=True)
        self.every, self.peak, self.samples = every, 0, 0
        self.stopped = threading.Event()

    def run(self) -> None:
        while not self.stopped.is_set():
            self.peak = max(self.peak, status_kb("VmRSS"))
            self.samples += 1
            time.sleep(self.every)

    def __enter__(self) -> RssSampler:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopped.set()
        self.join()
        self.peak = max(self.peak, status_kb("VmRSS"))


def status_kb(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise KeyError(field)


def runqueue_s() -> float:
    """Seconds this process's main thread has waited for a CPU (ready to run, not running)."""
    with open("/proc/self/schedstat") as f:
        return int(f.read().split()[1]) / 1e9


def reset_hwm() -> None:
    with open("/proc/self/clear_refs", "w") as f:  # "5": reset the peak RSS (Linux >= 4.0)
        f.write("5")


class StandIn:
    """``--stand-in``'s model: the server's answer after ``asyncio.sleep(latency)``, no HTTP -
    what is left is tao's own cost (agent, events, scoring, the --out store, the window)."""

    def __new__(cls, latency: float, tool_first: bool):
        from tao.messages import Message, ToolCall, Usage
        from tao.models.base import Model, ModelResponse

        class Sleeper(Model):
            name = "stand-in"

            async def stream(self, messages, *, tools=None, **kwargs):
                await asyncio.sleep(latency)
                question = next(m.content for m in messages if m.role == "user")
                a, b = map(int, re.findall(r"\d+", question)[:2])
                seen = [m.content for m in messages if m.role == "tool"]
                if tool_first and tools and not seen:
                    call = ToolCall("call_1", "calculate", {"expression": f"{a} + {b}"})
                    yield ModelResponse(Message.assistant("", [call]), Usage(50, 10), "tool_calls")
                    return
                text = f"{a} + {b} = {seen[-1] if seen else a + b}"
                yield text
                yield ModelResponse(Message.assistant(text), Usage(50, 10), "stop")

        return Sleeper()


def evaluate(suite: Path, model, out: Path, concurrency: int, limit: int | None = None,
             workers: int = 1):
    from tao.evals.runner import Evaluation

    ev = Evaluation(str(suite), ["react"], model, out=out, concurrency=concurrency, limit=limit,
                    label="bench", workers=workers)
    start, cpu = time.perf_counter(), time.process_time()
    records = list(ev.run())
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    assert len(records) == len(ev.tasks), "every task ran"
    assert all(r["correct"] for r in records), [r for r in records if not r["correct"]][:2]
    return wall, cpu, records


def measure(label: str, suite: Path, model, out: Path, args, workers: int, concurrency: int,
            stats, rss_shown: bool) -> list[str]:
    """One row: ``args.alone`` tasks one at a time, then all at ``workers`` x ``concurrency``.
    RSS is shown for the first row only: later runs reuse the memory an earlier one freed."""
    alone_wall, alone_cpu, alone = evaluate(suite, model, out / "alone", 1, args.alone)
    one_task = alone_wall / args.alone
    ideal = args.tasks / (workers * concurrency) * one_task
    before = stats()
    base_kb = status_kb("VmRSS")
    reset_hwm()
    load, waited = os.getloadavg()[0], runqueue_s()
    with RssSampler() as rss:
        wall, cpu, records = evaluate(suite, model, out / "all", concurrency, workers=workers)
    waited = runqueue_s() - waited
    server = stats()
    server_ms = (server["cpu_s"] - before["cpu_s"]) / max(server["requests"], 1) * 1000
    growth = rss.peak - base_kb
    rss_cols = ([f"{base_kb / 1024:.1f}", f"{rss.peak / 1024:.1f}", f"{status_kb('VmHWM') / 1024:.1f}",
                 f"{growth / concurrency:.0f}"] if rss_shown else ["-", "-", "-", "-"])
    return [label, f"{workers} x {concurrency}", f"{one_task * 1000:.1f}", f"{ideal:.2f}",
            f"{wall:.2f}", f"{wall / ideal:.2f}", *rss_cols, f"{alone_cpu / args.alone * 1000:.2f}",
            f"{cpu / args.tasks * 1000:.2f}" if workers == 1 else "-",
            f"{waited:.2f}" if workers == 1 else "-", str(server["max_in_flight"] or "-"),
            f"{server_ms:.2f}" if server["requests"] else "-", f"{load:.2f}"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tasks", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=100)
    parser.add_argument("--latency", type=float, default=0.2, help="seconds the server waits")
    parser.add_argument("--alone", type=int, default=20, help="tasks run one at a time first")
    parser.add_argument("--repeat", type=int, default=1, help="measure the OpenAIModel row N times")
    parser.add_argument("--tool", action="store_true", help="one calculate() call, then the answer")
    parser.add_argument("--stand-in", action="store_true",
                        help="also a row with a model that only sleeps (tao's own cost)")
    parser.add_argument("--workers", type=int, default=1,
                        help="also a row with W processes x concurrency / W tasks each")
    args = parser.parse_args()

    ctx = multiprocessing.get_context("spawn")
    port = ctx.Value("i", 0)
    server = ctx.Process(target=serve, args=(port, args.latency, args.tool), daemon=True)
    server.start()
    while not port.value:
        time.sleep(0.01)
    base = f"http://127.0.0.1:{port.value}/v1"

    import functools

    from tao.models.openai import OpenAIModel

    tmp = Path(tempfile.mkdtemp(prefix="tao-bench-"))
    suite = tmp / "sums.jsonl"
    with suite.open("w", encoding="utf-8") as f:
        for i in range(args.tasks):
            a, b = 100 + i, 7 * i % 1000
            f.write(json.dumps({"id": f"q{i}", "question": f"What is {a} + {b}?", "answer": a + b}) + "\n")
    stats = lambda: json.loads(urllib.request.urlopen(base + "/stats").read())  # noqa: E731

    model = OpenAIModel("bench", base_url=base, api_key="x")
    rows = [measure("OpenAIModel", suite, model, tmp / f"openai{n}", args, 1, args.concurrency,
                    stats, n == 0) for n in range(args.repeat)]
    if args.stand_in:
        rows.append(measure("stand-in (no HTTP)", suite, StandIn(args.latency, args.tool), tmp / "stand-in",
                            args, 1, args.concurrency, stats, False))
    if args.workers > 1:
        factory = functools.partial(OpenAIModel, "bench", base_url=base, api_key="x")
        rows.append(measure("OpenAIModel", suite, factory, tmp / "workers", args, args.workers,
                            args.concurrency // args.workers, stats, False))
    server.terminate()

    calls = "one calculate() call, then the answer (2 requests)" if args.tool else "answering directly (1 request)"
    print(f"tao eval --concurrency: {args.tasks} tasks, ReAct {calls}, OpenAI-compatible server on "
          f"127.0.0.1 answering in {args.latency * 1000:.0f} ms; Python {sys.version.split()[0]}, "
          f"{os.cpu_count()} CPUs; ideal = tasks / in flight x one task alone ({args.alone} tasks)")
    header = ["model", "workers x conc.", "one task ms", "ideal s", "wall s", "x ideal",
              "RSS before MB", "RSS peak MB", "VmHWM MB", "KB / task in flight",
              "CPU ms / task alone", "CPU ms / task", "waited for a CPU s", "server max in flight",
              "server CPU ms / request", "load 1 min"]
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for row in rows:
        print("| " + " | ".join(row) + " |")
    print("targets: x ideal <= 1.3, KB / task in flight <= 200 (RSS: this process's VmRSS sampled "
          "every 5 ms, peak - value before the run, / concurrency; CPU: this process's)")


if __name__ == "__main__":
    main()
