"""``tao mcp serve --http`` against a stranger: each probe of issue 24 replayed on a real server
process, with the official ``mcp`` client where a client is the question and raw HTTP where a
header is. Off localhost a token is made and required; Host and Origin are checked on every
address; the guardrail flags hold for the served tools and for the calls of a served agent,
and approval is asked of the calling client."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest

httpx = pytest.importorskip("httpx")

from test_mcp_server import SERVED, serve_command  # noqa: E402

INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "probe", "version": "0"}}}
HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


@pytest.fixture
def script(tmp_path: Path) -> Path:
    path = tmp_path / "served.json"
    path.write_text(json.dumps(SERVED, ensure_ascii=False), encoding="utf-8")
    return path


class Serving:
    """A ``tao mcp serve --http`` process; ``url`` on 127.0.0.1, ``token`` as it printed it."""

    def __init__(self, script: Path, *args: str):
        self.proc = subprocess.Popen(serve_command(script, "--http", "--port", "0", *args),
                                     stderr=subprocess.PIPE, text=True)
        line = self.proc.stderr.readline()
        assert "listening on http://" in line, line + self.proc.stderr.read()
        said = line.rsplit(" ", 1)[1].strip()
        self.port = int(said.rsplit(":", 1)[1].split("/")[0])
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.token = None
        if "--no-token" not in args and ("--token" in args or "127.0.0.1" not in said):
            line = self.proc.stderr.readline()
            assert "Authorization: Bearer " in line, line
            self.token = line.rsplit("Bearer ", 1)[1].strip().rstrip("'")

    def post(self, headers: dict[str, str] | None = None, token: str | None = None) -> httpx.Response:
        given = {**HEADERS, **({"Authorization": f"Bearer {token}"} if token else {}),
                 **(headers or {})}
        return httpx.post(self.url, json=INIT, headers=given, timeout=30)

    def __enter__(self) -> Serving:
        return self

    def __exit__(self, *exc: object) -> None:
        self.proc.kill()
        self.proc.wait()


def client(url: str, token: str | None = None, **kw):
    """The official client, with the bearer header when ``token`` is given."""
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    if token is None:
        return Client(url, read_timeout_seconds=60, **kw)
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"},
                              timeout=httpx2.Timeout(60))
    return Client(streamable_http_client(url, http_client=http), read_timeout_seconds=60, **kw)


def test_off_localhost_a_token_is_made_and_nothing_runs_without_it(script: Path) -> None:
    with Serving(script, "--agents", "--host", "0.0.0.0") as s:
        assert s.token and len(s.token) >= 24
        # the probe: a foreign Host and Origin, no token, then a call of the agent
        r = s.post({"Host": "evil.example", "Origin": "http://evil.example"})
        assert r.status_code == 401 and "react" not in r.text
        assert s.post({"Origin": "null"}).status_code == 401
        assert s.post(token="not-" + s.token).status_code == 401
        call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                "params": {"name": "react", "arguments": {"task": "1+1"}}}
        r = httpx.post(s.url, json=call, headers=HEADERS, timeout=30)
        assert r.status_code == 401

        async def without() -> None:
            async with client(s.url) as c:
                await c.call_tool("react", {"task": "15 乘以 27 是多少？"})

        with pytest.raises(BaseException):  # noqa: B017 - the SDK's error for a 401
            asyncio.run(without())

        async def with_token():
            async with client(s.url, s.token) as c:
                names = {t.name for t in (await c.list_tools()).tools}
                return names, await c.call_tool("react", {"task": "15 乘以 27 是多少？"})

        names, answer = asyncio.run(with_token())
        assert {"react", "codeact", "plan", "calculator"} <= names
        assert not answer.is_error and answer.content[0].text == "15 × 27 = 405"


def test_a_foreign_host_or_origin_is_refused_on_every_address(script: Path) -> None:
    with Serving(script, "--host", "0.0.0.0") as s:
        assert s.post(token=s.token).status_code == 200
        assert s.post({"Host": "evil.example"}, s.token).status_code == 421  # DNS rebinding
        assert s.post({"Host": f"127.0.0.1.nip.io:{s.port}"}, s.token).status_code == 421
        assert s.post({"Origin": "http://evil.example"}, s.token).status_code == 403
        assert s.post({"Origin": "null"}, s.token).status_code == 403
        assert s.post({"Origin": f"http://127.0.0.1:{s.port}"}, s.token).status_code == 200
    with Serving(script, "--host", "0.0.0.0", "--allow-host", "tao.internal") as s:
        assert s.post({"Host": "tao.internal:8000"}, s.token).status_code == 200
    with Serving(script) as s:  # localhost: no token needed, the same checks
        assert s.token is None
        assert s.post().status_code == 200
        assert s.post({"Host": "evil.example"}).status_code == 421
        assert s.post({"Origin": "http://evil.example"}).status_code == 403


def test_a_token_given_is_required_on_localhost_too(script: Path) -> None:
    with Serving(script, "--token", "s3cret-token-of-mine") as s:
        assert s.token == "s3cret-token-of-mine"
        assert s.post().status_code == 401
        assert s.post(token="s3cret-token-of-mine").status_code == 200


def test_without_a_token_off_localhost_only_the_calculators_are_served(script: Path) -> None:
    for refused in (["--agents"], ["--agent", "react"],
                    ["--tools", str(Path(__file__).parents[1] / "examples" / "weather.py")]):
        out = subprocess.run(serve_command(script, "--http", "--host", "0.0.0.0", "--port", "0",
                                           "--no-token", *refused),
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 2 and "without a token" in out.stderr, out.stderr
    with Serving(script, "--host", "0.0.0.0", "--no-token") as s:
        assert s.token is None

        async def add():
            async with client(s.url) as c:
                names = {t.name for t in (await c.list_tools()).tools}
                return names, await c.call_tool("calculator", {"operation": "add", "a": 1, "b": 2})

        names, result = asyncio.run(add())
        assert names == {"calculate", "calculator"} and result.content[0].text == "3"


def audit_records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_the_guardrails_hold_for_served_tools_and_served_agents(script: Path, tmp_path: Path) -> None:
    log = tmp_path / "audit.jsonl"
    with Serving(script, "--agents", "--deny", "calculator", "--audit", str(log)) as s:
        async def main():
            async with client(s.url) as c:
                return (await c.call_tool("calculator", {"operation": "add", "a": 1, "b": 2}),
                        await c.call_tool("calculate", {"expression": "1+2"}),
                        await c.call_tool("react", {"task": "15 乘以 27 是多少？"}))

        denied, allowed, agent = asyncio.run(main())
    assert denied.is_error and "calculator" in denied.content[0].text
    assert not allowed.is_error and allowed.content[0].text == "3"
    records = audit_records(log)
    calls = [(r["tool"], r["status"]) for r in records if r["kind"] == "tool.call"]
    # the served call, the allowed one, and the agent's own call of the denied tool
    assert calls == [("calculator", "denied"), ("calculate", "ok"), ("calculator", "denied"),
                     ("react", "ok")]
    agent_run = next(r for r in records if r["kind"] == "run.start" and r["agent"] == "react")
    assert agent_run["parent_run"]  # the agent ran as the MCP call's child, under its rules
    verify = subprocess.run([sys.executable, "-m", "tao", "audit", "verify", str(log)],
                            capture_output=True, text=True, timeout=60)
    assert verify.returncode == 0, verify.stdout + verify.stderr


def test_approval_is_asked_of_the_calling_client(script: Path, tmp_path: Path) -> None:
    import mcp_types as types

    asked: list[str] = []

    def answering(approve: bool):
        async def elicit(context, params):
            asked.append(params.message)
            return types.ElicitResult(action="accept", content={
                "approve": approve, **({} if approve else {"reason": "不要加法"})})
        return elicit

    with Serving(script, "--require-approval", "calculator", "--no-audit") as s:
        async def call(**kw):
            async with client(s.url, **kw) as c:
                return await c.call_tool("calculator", {"operation": "add", "a": 1, "b": 2})

        # the handshake-era protocol has a back channel for the server's question; the 2026-07-28
        # one asks by multi-round-trip results, which cannot pause an agent's run in between
        yes = asyncio.run(call(elicitation_callback=answering(True), mode="legacy"))
        no = asyncio.run(call(elicitation_callback=answering(False), mode="legacy"))
        nobody = asyncio.run(call(mode="legacy"))
        modern = asyncio.run(call(elicitation_callback=answering(True)))
    assert not yes.is_error and yes.content[0].text == "3", yes.content[0].text
    assert len(asked) == 2 and "calculator" in asked[0]
    assert no.is_error and "不要加法" in no.content[0].text
    assert nobody.is_error and "approval" in nobody.content[0].text
    assert modern.is_error and "cannot be asked" in modern.content[0].text


def test_taos_own_client_carries_the_token_in_its_headers(script: Path) -> None:
    from tao.mcp import MCPServer

    with Serving(script, "--host", "0.0.0.0") as s:
        refused = MCPServer(url=s.url, timeout=30)
        with pytest.raises(Exception, match="cannot connect"):
            refused.connect()
        refused.close()
        server = MCPServer(url=s.url, headers={"Authorization": f"Bearer {s.token}"}, timeout=30)
        try:
            from tao import Toolbox
            from tao.messages import ToolCall

            server.connect()
            result = asyncio.run(Toolbox([server]).execute(
                ToolCall("c1", "calculator", {"operation": "add", "a": 1, "b": 2})))
            assert not result.is_error and "3" in result.content, result.content
        finally:
            server.close()
