"""What the web tests share: a real uvicorn on 127.0.0.1 in a thread, an SSE reader, scripted
models for the runs (one that answers at once, one paced so a test can act mid-run)."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from typing import Any

import httpx
import uvicorn

from tao.models.base import Model
from tao.models.scripted import ScriptedModel, tool_call

TASK_ZH = "小明有 50 元，买了 3 本书每本 12 元，请问他还剩多少钱？"


def zh_script() -> ScriptedModel:
    return ScriptedModel([
        ("先算书的总价：3 × 12。", tool_call("calculator", operation="multiply", a=3, b=12)),
        ("再用 50 减去 36。", tool_call("calculator", operation="subtract", a=50, b=36)),
        "小明还剩 14 元。"], chunk_size=3, name="scripted-zh")


class Paced(Model):
    """A model that takes ``delay`` seconds per chunk: a run that is still going when the test
    reconnects or cancels."""

    def __init__(self, inner: Model, delay: float):
        self.inner, self.delay = inner, delay
        self.name, self.supports_grammar = inner.name, inner.supports_grammar

    async def stream(self, messages: Any, **kwargs: Any):
        async for chunk in self.inner.stream(messages, **kwargs):
            await asyncio.sleep(self.delay)
            yield chunk


def slow_script() -> Model:
    steps: list[Any] = [(f"第 {i} 步。", tool_call("calculator", operation="add", a=i, b=1))
                        for i in range(1, 6)]
    return Paced(ScriptedModel([*steps, "完成。"], chunk_size=2), 0.05)


MODELS = {"scripted-zh": zh_script, "slow": slow_script}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Served:
    """A real uvicorn serving ``app`` in a thread."""

    def __init__(self, app: Any, log_level: str = "warning"):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port,
                                                    log_level=log_level, lifespan="on",
                                                    log_config=None))  # logs reach caplog
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> Served:
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.02)
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.should_exit = True
        self.thread.join(10)

    def client(self, **kw: Any) -> httpx.Client:
        return httpx.Client(base_url=self.url, timeout=30, **kw)


def sse(client: httpx.Client, run_id: str, *, last: int | None = None, limit: int | None = None,
        query: bool = False, until: str | None = None) -> list[dict[str, Any]]:
    """The SSE messages of a run as dicts {id, event, data}: up to ``end``, or ``limit`` of
    them, or the first of type ``until`` (then the connection is dropped)."""
    headers = {"Last-Event-ID": str(last)} if last is not None and not query else {}
    params = {"last_event_id": last} if last is not None and query else {}
    out: list[dict[str, Any]] = []
    with client.stream("GET", f"/api/runs/{run_id}/events", headers=headers, params=params) as r:
        assert r.status_code == 200, r.read()
        assert r.headers["content-type"].startswith("text/event-stream")
        msg: dict[str, Any] = {}
        for line in r.iter_lines():
            if line.startswith(":"):
                continue
            if not line:
                if "event" in msg:
                    msg["data"] = json.loads(msg["data"])
                    out.append(msg)
                    if msg["event"] in ("end", until) or (limit is not None
                                                          and len(out) >= limit):
                        break
                msg = {}
                continue
            key, _, value = line.partition(": ")
            msg[key] = value
    return out


def start(client: httpx.Client, **body: Any) -> str:
    body = {"agent": "react", "model": {"name": "scripted-zh"}, "tools": ["calculators"],
            "task": TASK_ZH, **body}
    r = client.post("/api/runs", json=body)
    assert r.status_code == 201, r.text
    return r.json()["run_id"]




def echo_script() -> ScriptedModel:
    """Adds 15 and 27, then answers with what the tool said - whatever the approver decided."""
    return ScriptedModel([tool_call("calculator", operation="add", a=15, b=27),
                          lambda messages: f"工具说：{messages[-1].content}"], name="echo")


def writer_script() -> Model:
    """Writes a.txt, then (slowly) b.txt and c.txt: a coding run to look at, or to cancel."""
    return Paced(ScriptedModel([
        tool_call("write_file", path="a.txt", content="第一个文件\n"),
        tool_call("write_file", path="src/b.txt", content="second\n"),
        tool_call("write_file", path="c.txt", content="third\n"), "写好了。"]), 0.15)


MODELS["echo"] = echo_script
MODELS["writer"] = writer_script


class Crashy:
    """A factory of models that fail as the embedded one does when its process dies: the first
    time one is asked after the tool's result, it raises ``ModelCrashed``; asked again (a new
    process), it answers. ``calls`` says what was asked live, so a test sees what a resumed run
    took from the journal instead."""

    def __init__(self) -> None:
        self.crashed = False
        self.calls: list[str] = []

    def __call__(self) -> Model:
        from tao.errors import ModelCrashed
        from tao.messages import Message, ToolCall, Usage
        from tao.models.base import ModelResponse

        outer = self

        class CrashyModel(Model):
            name = "crashy"

            async def stream(self, messages: Any, **kwargs: Any):
                if not any(m.role == "tool" for m in messages):
                    outer.calls.append("ask")
                    yield ModelResponse(Message.assistant("", [ToolCall(
                        "c1", "calculator", {"operation": "add", "a": 15, "b": 27})]), Usage(3, 2))
                    return
                if not outer.crashed:
                    outer.crashed = True
                    raise ModelCrashed("the embedded model's process (pid 1) died while "
                                       "answering: SIGSEGV, a segmentation fault")
                outer.calls.append("answer")
                yield "答案是 42。"
                yield ModelResponse(Message.assistant("答案是 42。"), Usage(5, 4))
        return CrashyModel()
