"""``tao serve``'s HTTP side on a real uvicorn (127.0.0.1, a free port) driven by httpx, with
``ScriptedModel`` runs: the events of a run over SSE, reconnecting with ``Last-Event-ID``,
cancelling, approvals answered over HTTP, the journal's past runs, compare, a coding run's files,
sessions and the token."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

httpx = pytest.importorskip("httpx")
uvicorn = pytest.importorskip("uvicorn")
pytest.importorskip("fastapi")
pytest.importorskip("sse_starlette")

from tao.messages import Message, ToolCall  # noqa: E402
from tao.models.base import Model  # noqa: E402
from tao.models.scripted import ScriptedModel, tool_call  # noqa: E402
from tao.web import create_app  # noqa: E402

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

    def __init__(self, app: Any):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port,
                                                    log_level="warning", lifespan="off"))
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


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    app = create_app(journal=tmp_path / "runs.db", models=MODELS,
                     workspace_root=tmp_path / "workspaces")
    with Served(app) as s:
        yield s


def sse(client: httpx.Client, run_id: str, *, last: int | None = None, limit: int | None = None,
        query: bool = False) -> list[dict[str, Any]]:
    """The SSE messages of a run as dicts {id, event, data}; stops after ``limit`` events."""
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
                    if msg["event"] == "end" or (limit is not None and len(out) >= limit):
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


def test_a_chinese_run_streams_thought_action_observation_answer_in_order(served: Served) -> None:
    with served.client() as c:
        assert c.get("/").status_code == 200 and "tao_session" in c.cookies
        options = c.get("/api/options", headers={"Accept-Language": "zh-CN,zh;q=0.9"}).json()
        assert options["lang"] == "zh" and "scripted-zh" in [m["name"] for m in options["models"]]
        assert options["agents"] == ["react", "react-text", "codeact", "plan", "code"]
        run_id = start(c)
        messages = sse(c, run_id)
    *events, end = messages
    assert end["event"] == "end" and end["data"] == {"status": "done"} and "id" not in end
    assert [int(m["id"]) for m in events] == list(range(1, len(events) + 1))
    assert all(m["data"]["seq"] == int(m["id"]) and m["data"]["type"] == m["event"]
               and m["data"]["run_id"] == run_id for m in events)
    chain = [m["event"] for m in events if m["event"] in
             ("thought", "action", "observation", "final_answer")]
    assert chain == ["thought", "action", "observation"] * 2 + ["final_answer"]
    assert events[-1]["event"] == "run_finished"
    assert events[-1]["data"]["result"]["answer"] == "小明还剩 14 元。"
    assert "".join(m["data"]["text"] for m in events if m["event"] == "token"
                   and m["data"]["turn"] == 3) == "小明还剩 14 元。"  # streamed in pieces


@pytest.mark.parametrize("query", [False, True], ids=["header", "query"])
def test_a_reconnect_with_last_event_id_loses_and_repeats_nothing(served: Served,
                                                                  query: bool) -> None:
    with served.client() as c:
        run_id = start(c, model={"name": "slow"})
        first = sse(c, run_id, limit=7)  # then the connection is dropped mid-run
        assert c.get("/api/runs").json()["runs"][0]["live"] is True
        rest = sse(c, run_id, last=int(first[-1]["id"]), query=query)
        full = c.get(f"/api/runs/{run_id}/replay").json()["events"]
    joined = [m["data"] for m in first + rest[:-1]]
    assert joined == full and [e["seq"] for e in joined] == list(range(1, len(full) + 1))
    assert full[-1]["type"] == "run_finished" and rest[-1]["data"] == {"status": "done"}
