"""``tao mcp serve`` as a real process: the official ``mcp.Client`` lists and calls its tools and
agents over stdio and streamable HTTP, and a second tao process uses it as an MCP server (an
agent calling an agent through MCP). Models are ``ScriptedModel`` s (tests/mcp_servers/scripted_tao.py)."""

from __future__ import annotations

import asyncio
import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPTED = Path(__file__).parent / "mcp_servers" / "scripted_tao.py"
#: the served react agent's script: one calculator call, then the answer it read
SERVED = [{"tool": "calculator", "args": {"operation": "multiply", "a": 15, "b": 27}},
          "15 × 27 = 405"]

def data_of(text: str) -> str:
    """What an MCP server returned, from inside the fence its (untrusted by default) output gets."""
    m = re.search(r"<<<DATA (\w+)>>>\n(.*)\n<<<END \1>>>", text, re.S)
    assert m, f"not fenced: {text!r}"
    return m.group(2)



@pytest.fixture
def served_script(tmp_path):
    path = tmp_path / "served.json"
    path.write_text(json.dumps(SERVED, ensure_ascii=False), encoding="utf-8")
    return path


def serve_command(script: Path, *args: str) -> list[str]:
    return [sys.executable, str(SCRIPTED), str(script), "mcp", "serve", *args]


async def exercise(client) -> dict:
    """What a client sees of the served tools and agents."""
    tools = {t.name: t for t in (await client.list_tools()).tools}
    add = await client.call_tool("calculator", {"operation": "add", "a": 1, "b": 2})
    bad = await client.call_tool("calculator", {"operation": "add", "a": "x"})
    agent = await client.call_tool("react", {"task": "15 乘以 27 是多少？"})
    return {"tools": tools, "add": add, "bad": bad, "agent": agent}


def check(seen: dict) -> None:
    assert set(seen["tools"]) == {"calculate", "calculator", "react", "codeact", "plan"}
    assert seen["tools"]["calculator"].input_schema["required"] == ["operation", "a", "b"]
    assert seen["tools"]["react"].input_schema["properties"]["task"]["type"] == "string"
    add = seen["add"]
    assert not add.is_error and add.content[0].text == "3"
    assert add.structured_content == {"result": 3.0}  # the value, not only its text
    bad = seen["bad"]
    assert bad.is_error and "invalid arguments for calculator" in bad.content[0].text
    agent = seen["agent"]
    assert not agent.is_error and agent.content[0].text == "15 × 27 = 405"


def test_the_official_client_uses_tao_over_stdio(served_script):
    from mcp import Client, StdioServerParameters

    command = serve_command(served_script, "--agents")

    async def main():
        params = StdioServerParameters(command=command[0], args=command[1:])
        async with Client(params, read_timeout_seconds=60) as client:
            return await exercise(client)

    check(asyncio.run(main()))


def test_the_official_client_uses_tao_over_http_on_localhost(served_script):
    from mcp import Client

    proc = subprocess.Popen(serve_command(served_script, "--agents", "--http", "--port", "0"),
                            stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stderr.readline()  # "tao mcp serve: listening on http://127.0.0.1:PORT/mcp"
        assert "listening on http://127.0.0.1:" in line, line
        url = line.rsplit(" ", 1)[1].strip()

        async def main():
            async with Client(url, read_timeout_seconds=60) as client:
                return await exercise(client)

        check(asyncio.run(main()))
    finally:
        proc.kill()
        proc.wait()


def test_a_second_tao_process_calls_the_served_agent_through_mcp(served_script, tmp_path):
    client_script = tmp_path / "client.json"
    client_script.write_text(json.dumps([
        {"tool": "react", "args": {"task": "15 乘以 27 是多少？"}}, "子 agent 说 405"],
        ensure_ascii=False), encoding="utf-8")
    trace = tmp_path / "trace.jsonl"
    server = shlex.join(serve_command(served_script, "--agents"))
    out = subprocess.run([sys.executable, str(SCRIPTED), str(client_script), "run",
                          "15 乘以 27 是多少？", "--mcp", server, "--json", "--no-audit",
                          "--trace", str(trace)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert (result["status"], result["answer"], result["tool_calls"]) == ("done", "子 agent 说 405", 1)
    events = [json.loads(line) for line in trace.read_text(encoding="utf-8").splitlines()]
    seen = [e for e in events if e["type"] == "observation"]
    assert [(o["name"], data_of(o["content"]), o["is_error"]) for o in seen] == [
        ("react", "15 × 27 = 405", False)]


def test_serve_rejects_an_unknown_agent_and_a_taken_port(served_script):
    bad = subprocess.run(serve_command(served_script, "--agent", "dask"), capture_output=True,
                         text=True, timeout=60)
    assert bad.returncode == 2 and "dask" in bad.stderr
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        out = subprocess.run(serve_command(served_script, "--http", "--port", str(port)),
                             capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "cannot listen" in out.stderr


def test_each_served_agent_is_a_tool_taking_a_task(tmp_path):
    """react, codeact (its code in a sandbox in the server's process tree) and plan, in turn,
    on the one scripted model the server was started with."""
    from mcp import Client, StdioServerParameters

    plan = {"steps": [{"id": "step1", "description": "15 × 27", "tool": "calculator",
                       "args": {"operation": "multiply", "a": 15, "b": 27}, "depends_on": []}],
            "answer": "plan: $step1"}
    script = tmp_path / "agents.json"
    script.write_text(json.dumps([
        *SERVED,
        "```python\nfinal_answer(f\"codeact: {int(calculator('multiply', 15, 27))}\")\n```",
        json.dumps(plan)], ensure_ascii=False), encoding="utf-8")
    command = serve_command(script, "--agents")

    async def main():
        params = StdioServerParameters(command=command[0], args=command[1:])
        async with Client(params, read_timeout_seconds=120) as client:
            return [await client.call_tool(kind, {"task": "15 × 27?"})
                    for kind in ("react", "codeact", "plan")]

    react, codeact, planned = asyncio.run(main())
    assert react.content[0].text == "15 × 27 = 405"
    assert not codeact.is_error, codeact.content[0].text
    assert codeact.content[0].text == "codeact: 405"
    assert planned.content[0].text == "plan: 405"
