"""``tao serve`` as a user starts it: bound to 127.0.0.1 it needs no token; bound to any other
address it makes one and prints the address to open with it, and the API refuses requests
without it. And what the run form may get wrong is a clear 4xx, never a run that hangs."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

httpx = pytest.importorskip("httpx")
pytest.importorskip("uvicorn")
pytest.importorskip("fastapi")
pytest.importorskip("sse_starlette")

from web_helpers import MODELS, Served, free_port, sse, start  # noqa: E402

from tao.web import create_app  # noqa: E402


def serve(tmp_path: Path, *args: str) -> tuple[subprocess.Popen, str]:
    """``tao serve ARGS`` in a subprocess; the address it printed."""
    env = {**os.environ, "TAO_DATA_DIR": str(tmp_path)}
    proc = subprocess.Popen([sys.executable, "-m", "tao", "serve", *args], env=env,
                            stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    line = proc.stderr.readline()
    match = re.search(r"http://\S+", line)
    assert match, line + proc.stderr.read()
    return proc, match.group(0)


def wait_up(url: str, **kw) -> httpx.Response:
    for _ in range(200):
        try:
            return httpx.get(url, timeout=2, **kw)
        except httpx.TransportError:
            time.sleep(0.05)
    raise AssertionError(f"{url} never answered")


def test_bound_elsewhere_it_makes_a_token_and_prints_the_address_with_it(tmp_path: Path) -> None:
    port = free_port()
    proc, address = serve(tmp_path, "--host", "0.0.0.0", "--port", str(port))
    try:
        token = address.split("?token=")[1]
        assert address == f"http://127.0.0.1:{port}/?token={token}" and len(token) >= 24
        base = f"http://127.0.0.1:{port}"
        assert wait_up(f"{base}/api/options").status_code == 401
        ok = httpx.get(f"{base}/api/options", headers={"Authorization": f"Bearer {token}"})
        assert ok.status_code == 200 and "react" in ok.json()["agents"]
    finally:
        proc.terminate()
        proc.wait(10)


def test_on_localhost_it_needs_no_token(tmp_path: Path) -> None:
    port = free_port()
    proc, address = serve(tmp_path, "--port", str(port))
    try:
        assert address == f"http://127.0.0.1:{port}/"
        assert wait_up(f"{address}api/options").status_code == 200
        assert (tmp_path / "runs.db").exists()  # the journal: in the user's data directory
        assert (tmp_path / "audit.jsonl").exists()  # and the audit log, as tao run keeps it
    finally:
        proc.terminate()
        proc.wait(10)


@pytest.mark.parametrize("args, toml, log", [
    ([], 'audit = "logs/served.jsonl"\n', "logs/served.jsonl"),  # tao.toml's, from its folder
    (["--audit", "mine.jsonl"], 'audit = false\n', "mine.jsonl"),  # the flag wins
    (["--no-audit"], "", None)])
def test_the_audit_log_is_chosen_as_tao_run_chooses_it(tmp_path: Path, args, toml, log) -> None:
    (tmp_path / "tao.toml").write_text(toml, encoding="utf-8")
    proc, address = serve(tmp_path, "--port", str(free_port()), *args)
    try:
        assert wait_up(f"{address}api/options").status_code == 200
        made = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*.jsonl"))
        assert made == ([log] if log else [])
    finally:
        proc.terminate()
        proc.wait(10)


def test_what_the_form_gets_wrong_is_a_clear_error(tmp_path: Path) -> None:
    def broken():
        raise ValueError("this model cannot be built here")

    app = create_app(journal=tmp_path / "runs.db", models={**MODELS, "broken": broken},
                     workspace_root=tmp_path / "ws")
    with Served(app) as s, s.client() as c:
        cases = {
            "unknown agent 'reflex'": {"agent": "reflex"},
            "unknown model 'gpt'": {"model": {"name": "gpt"}},
            "unknown tool 'shell'": {"tools": ["shell"]},
            "the task is empty": {"task": "  "},
            "needs api_key, model": {"model": {"name": "openai"}},
            "this model cannot be built here": {"model": {"name": "broken"}},
            "approval is asked for calculater": {"approve": ["calculater"]},
        }
        for said, change in cases.items():
            r = c.post("/api/runs", json={"model": {"name": "scripted-zh"}, "task": "1+1", **change})
            assert r.status_code == 400 and said in r.json()["detail"], (said, r.text)
        r = c.post("/api/runs", json={"model": {"name": "scripted-zh"}, "max_turns": "many"})
        assert r.status_code == 422 and "task" in r.json()["error"]
        assert c.get("/api/runs/nope/events").status_code == 404
        assert c.get("/api/runs").json()["runs"] == []  # nothing half-started is left behind
        run_id = start(c)
        assert sse(c, run_id, last=10_000) == [{"event": "end", "data": {"status": "done"}}]


def test_a_session_may_have_only_so_many_runs_going(tmp_path: Path) -> None:
    from tao.web.sessions import MAX_LIVE

    app = create_app(journal=tmp_path / "runs.db", models=MODELS, workspace_root=tmp_path / "ws")
    with Served(app) as s, s.client() as c, s.client() as other:
        runs = [start(c, model={"name": "echo"}, approve=["calculator"]) for _ in range(MAX_LIVE)]
        r = c.post("/api/runs", json={"model": {"name": "echo"}, "task": "one more"})
        assert r.status_code == 429 and "cancel" in r.json()["detail"]
        assert other.post("/api/runs", json={"model": {"name": "scripted-zh"},
                                             "task": "1+1"}).status_code == 201
        c.post(f"/api/runs/{runs[0]}/cancel")
        sse(c, runs[0])
        assert start(c)  # room again


def test_errors_are_said_in_the_pages_language(tmp_path: Path) -> None:
    app = create_app(journal=tmp_path / "runs.db", models=MODELS, workspace_root=tmp_path / "ws",
                     token="tok-123456")
    zh = {"Accept-Language": "zh-CN,zh;q=0.9,en;q=0.8"}
    with Served(app) as s, s.client(headers=zh) as c:
        r = c.get("/api/options")
        assert r.status_code == 401 and r.json() == {
            "detail": "需要令牌：请打开 tao serve 打印的地址，或发送 Authorization: Bearer 令牌",
            "code": "token_needed"}
        c.headers["Authorization"] = "Bearer tok-123456"
        r = c.post("/api/runs", json={"agent": "reflex", "task": "1+1"})
        assert r.status_code == 400 and r.json()["code"] == "unknown_agent"
        assert r.json()["detail"].startswith("没有名为 'reflex' 的智能体；可选：react, react-text")
        r = c.get("/api/runs/abc/replay", headers={"Accept-Language": "en-US"})
        assert r.json() == {"detail": "no run 'abc'", "code": "no_run"}
