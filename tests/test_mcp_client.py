"""``tao.mcp.MCPServer`` against a real MCP server process (tests/mcp_servers/demo.py): its tools
in ReAct (native and text), CodeAct and plan steps, and every way a server goes wrong - it dies,
hangs, fails, writes garbage - read as a typed error observation within its timeout + 1 s, the
next call reconnecting, ``close()`` never raising."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path

import pytest

from tao import ReActAgent, ScriptedModel, calculator, tool, tool_call
from tao.events import Observation
from tao.mcp import MCPConnectError, MCPServer
from tao.messages import ToolCall
from tao.tools.base import Toolbox

DEMO = Path(__file__).parent / "mcp_servers" / "demo.py"


def demo(**options) -> MCPServer:
    """The demo server, taken as the user's own (its output not fenced) unless a test says."""
    options.setdefault("untrusted_output", False)
    return MCPServer(command=[sys.executable, str(DEMO)], **options)


@pytest.fixture(scope="module")
def server():
    s = demo(timeout=10)
    yield s
    s.close()


def observations(events):
    return [e for e in events if type(e) is Observation]


def call(tools, tool_name: str, /, **arguments):
    """One call through the tool door, timed."""
    start = time.perf_counter()
    result = asyncio.run(Toolbox([tools]).execute(ToolCall("c1", tool_name, arguments)))
    return result, time.perf_counter() - start


# -- tools, schemas, names ---------------------------------------------------------------------
def test_the_servers_tools_come_with_its_own_input_schemas(server):
    tools = Toolbox([server])
    assert {"add", "weather", "get_time", "calculator", "crash"} <= set(tools.names)
    spec = tools["add"].spec
    assert spec.parameters["properties"] == {"a": {"type": "number"}, "b": {"type": "number"}}
    assert spec.parameters["required"] == ["a", "b"]
    assert spec.description == "Add two numbers."
    assert tools["add"].signature() == "add(a: float, b: float)"


def test_arguments_are_checked_against_the_schema_before_the_server_is_called(server):
    result, _ = call(server, "add", a="z")
    assert result.is_error and not result.retryable
    assert "invalid arguments for add(a: float, b: float)" in result.content
    assert "'b' is missing" in result.content and "(got 'z')" in result.content


def test_a_clashing_name_gets_the_servers_prefix_and_a_plain_name_keeps_its_own(server):
    tools = Toolbox([calculator, server])
    assert "calculator" in tools and "demo_calculator" in tools
    assert tools["calculator"] is calculator  # the local tool keeps its name
    assert Toolbox([server, calculator])["calculator"] is calculator  # in either order
    result, _ = call(tools, "demo_calculator", expression="1+1")
    assert result.content == "remote:1+1"


def test_a_name_that_is_no_identifier_reads_as_one_and_the_old_name_says_where_it_went(server):
    result, _ = call(server, "get_time")
    assert result.content == "12:00"
    wrong, _ = call(server, "get-time")
    assert wrong.is_error and "'get-time' is called 'get_time' here" in wrong.content


def test_prefix_puts_the_servers_name_before_every_tool_and_the_plain_name_says_so():
    with demo(prefix="demo") as s:
        assert {"demo_add", "demo_get_time"} <= set(Toolbox([s]).names)
        wrong, _ = call(s, "add", a=1, b=2)
        assert "'add' is called 'demo_add' here" in wrong.content
        assert call(s, "demo_add", a=1, b=2)[0].content == "3"


def test_a_server_gets_the_sdks_safe_environment_and_env_adds_to_it(monkeypatch):
    monkeypatch.setenv("TAO_MCP_SECRET", "not for servers")
    with demo(env={"TAO_MCP_GIVEN": "given"}) as s:
        assert call(s, "env", name="TAO_MCP_SECRET")[0].content == ""
        assert call(s, "env", name="TAO_MCP_GIVEN")[0].content == "given"
        assert call(s, "env", name="PATH")[0].content != ""


# -- the three agents --------------------------------------------------------------------------
@pytest.mark.parametrize("protocol", ["tools", "text", "json"])
def test_react_calls_the_servers_tools(server, protocol):
    if protocol == "tools":
        replies = [tool_call("add", a=15, b=27), "15 + 27 = 42"]
    elif protocol == "json":  # seed 003's decision object
        replies = [json.dumps({"thought": "add", "action": "add", "action_input": {"a": 15, "b": 27}}),
                   json.dumps({"thought": "done", "action": "final", "action_input": "15 + 27 = 42"})]
    else:
        replies = ['Thought: add them\nAction: add\nAction Input: {"a": 15, "b": 27}',
                   "Thought: done\nFinal Answer: 15 + 27 = 42"]
    model = ScriptedModel(replies)
    events = []
    result = ReActAgent(model, [calculator, server], protocol=protocol).run("15+27?", [events.append])
    assert (result.status, result.answer) == ("done", "15 + 27 = 42")
    assert [o.content for o in observations(events)] == ["42"]
    if protocol != "tools":  # the prompt lists the server's tools with its schema
        assert "add" in model.calls[0][0].content and "weather" in model.calls[0][0].content


def test_calls_of_one_turn_run_at_once_on_one_session(server):
    model = ScriptedModel([[tool_call("add", a=1, b=2), tool_call("weather", city="x"),
                            tool_call("add", a=3, b=4)], "done"])
    events = []
    ReActAgent(model, [server]).run("go", [events.append])
    first, weather, second = observations(events)
    assert (first.content, second.content) == ("3", "7")
    assert json.loads(weather.content) == {"city": "x", "temp_c": 21, "sky": "晴"}
    assert server.connection.sessions == 1


def test_a_process_that_never_closes_its_servers_leaves_none_behind():
    import subprocess

    code = ("import sys; from tao.mcp import MCPServer; "
            f"s = MCPServer(command=[sys.executable, {str(DEMO)!r}, 'left-behind-check']); "
            "print(len(list(s)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and int(out.stdout) > 5, out.stderr
    time.sleep(0.5)
    left = subprocess.run(["pgrep", "-f", "left-behind-check"], capture_output=True, text=True)
    assert left.stdout == ""


def test_codeact_code_calls_the_servers_tools_and_gets_python_values(server):
    from tao.agents.codeact import CodeActAgent

    model = ScriptedModel([
        "```python\nw = weather(city='北京')\nfinal_answer([type(w).__name__, w['temp_c'] + "
        "add(1, 2), w['sky']])\n```"])
    result = CodeActAgent(model, [server]).run("北京几度？")
    assert result.status == "done", result.error
    assert result.answer in ('["dict", 24.0, "晴"]', "['dict', 24.0, '晴']", '["dict", 24, "晴"]')


def test_a_plan_step_calls_a_servers_tool(server):
    from tao.plan.agent import PlanExecuteAgent

    plan = {"steps": [{"id": "step1", "description": "add", "tool": "add",
                       "args": {"a": 2, "b": 3}, "depends_on": []},
                      {"id": "step2", "description": "weather", "tool": "weather",
                       "args": {"city": "上海"}, "depends_on": []}],
            "answer": "$step1 度"}
    result = PlanExecuteAgent(ScriptedModel([json.dumps(plan, ensure_ascii=False)]),
                              [server]).run("?")
    assert (result.status, result.answer, result.tool_calls) == ("done", "5 度", 2)


# -- the guardrails hold for MCP tools -----------------------------------------------------------
def test_deny_and_approval_hold_for_mcp_tools_and_a_server_can_be_marked_as_a_whole():
    with demo(requires_approval=True, untrusted_output=True) as marked:
        asked = []

        def approve(request):
            asked.append(request.tool)
            return request.tool == "weather"

        model = ScriptedModel([tool_call("pid"), tool_call("add", a=1, b=2),
                               tool_call("weather", city="x"), "ok"])
        events = []
        ReActAgent(model, [marked], deny=["pid"], approve=approve).run("go", [events.append])
        pid, add, weather = observations(events)
        assert pid.is_error and "pid" in pid.content  # denied: never sent to the server
        assert asked == ["add", "weather"]  # every tool of the marked server needed approval
        assert add.is_error and "add" in add.content
        assert "<<<DATA" in weather.content and '"temp_c": 21' in weather.content  # fenced


def test_a_servers_output_is_untrusted_unless_the_user_says_otherwise():
    """What a server returns is someone else's text: by default fenced as data, and after it a
    high-risk tool needs approval."""
    ran = []

    @tool(high_risk=True)
    def deploy() -> str:
        """Deploy."""
        ran.append(1)
        return "deployed"

    with MCPServer(command=[sys.executable, str(DEMO)]) as default:
        model = ScriptedModel([tool_call("weather", city="x"), tool_call("deploy"), "ok"])
        events = []
        ReActAgent(model, [default, deploy]).run("go", [events.append])
    weather, deployed = observations(events)
    assert "<<<DATA" in weather.content and '"temp_c": 21' in weather.content
    assert deployed.is_error and ran == []  # no terminal here: the approval was refused


def test_audit_and_budgets_count_mcp_calls(server, tmp_path):
    log = tmp_path / "audit.jsonl"
    model = ScriptedModel([tool_call("add", a=1, b=2), tool_call("add", a=3, b=4), "never"])
    result = ReActAgent(model, [server], audit=log, max_tool_calls=1).run("go")
    assert result.status == "budget" and result.tool_calls == 1
    calls = [r for r in map(json.loads, log.read_text().splitlines()) if r["kind"] == "tool.call"]
    assert [(c["tool"], c["arguments"], c["status"]) for c in calls] == [
        ("add", {"a": 1, "b": 2}, "ok"), ("add", {"a": 3, "b": 4}, "budget")]  # refused: logged


# -- failures: a typed observation within timeout + 1 s, then a reconnect ------------------------
#: seconds a call may take here: above what starting the demo server again takes on a busy machine
LIMIT = 4.0


@pytest.fixture
def fragile():
    s = demo(timeout=LIMIT)
    yield s
    s.close()


@pytest.mark.parametrize("tool, kind", [("crash", "MCPServerDied"), ("hang", "MCPTimeout"),
                                        ("garbage", "MCPTimeout"), ("fail", "MCPToolError")])
def test_a_failing_server_is_a_typed_error_in_time_and_the_next_call_works(fragile, tool, kind):
    first, _ = call(fragile, "pid")
    args = {"message": "no"} if tool == "fail" else {}
    result, seconds = call(fragile, tool, **args)
    assert result.is_error and result.content.startswith(f"Error: {kind}: ")
    assert "ExceptionGroup" not in result.content
    assert seconds < LIMIT + 1
    after, _ = call(fragile, "pid")
    assert not after.is_error
    if tool in ("crash", "hang", "garbage"):  # a new process answers
        assert after.value != first.value and fragile.connection.sessions == 2
    else:
        assert after.value == first.value and fragile.connection.sessions == 1
    if tool == "fail":
        assert result.content == "Error: MCPToolError: refused: no"


RAW = Path(__file__).parent / "mcp_servers" / "raw.py"


@pytest.mark.parametrize("tool, kind", [("bad_shape", "MCPBadResponse"), ("wrong_id", "MCPTimeout"),
                                        ("bad_json", "MCPTimeout"), ("exit_after", "MCPServerDied")])
def test_a_server_answering_what_is_not_mcp_is_a_typed_error_in_time(tool, kind, capfd):
    with MCPServer(command=[sys.executable, str(RAW)], timeout=1.5) as raw:
        assert call(raw, "ok")[0].content == "fine"
        result, seconds = call(raw, tool)
        assert result.is_error and result.content.startswith(f"Error: {kind}: ")
        assert seconds < 1.5 + 1
        assert call(raw, "ok")[0].content == "fine"
    assert "Traceback" not in capfd.readouterr().err  # the SDK's log stays off the terminal


def test_a_server_killed_between_calls_is_started_again_for_the_next_call(fragile):
    import os
    import signal

    first, _ = call(fragile, "pid")
    os.kill(first.value, signal.SIGKILL)
    time.sleep(0.3)
    result, seconds = call(fragile, "pid")
    assert not result.is_error and result.value != first.value and seconds < LIMIT + 1


def test_a_server_that_cannot_start_is_the_users_error_at_once():
    with pytest.raises(MCPConnectError, match="No such file"):
        list(MCPServer(command=["/nonexistent/server"]))
    exits = MCPServer(command=[sys.executable, "-c", "import sys; print('bad token', "
                                                     "file=sys.stderr); sys.exit(1)"])
    with pytest.raises(MCPConnectError, match="bad token"):  # its stderr says why
        ReActAgent(ScriptedModel([]), [exits])
    start = time.perf_counter()
    silent = MCPServer(command=[sys.executable, "-c", "import time; time.sleep(60)"],
                       connect_timeout=1)
    with pytest.raises(MCPConnectError):
        list(silent)
    assert time.perf_counter() - start < 4
    for s in (exits, silent):
        s.close()


def test_close_never_raises():
    import os
    import signal

    never = demo()
    never.close()  # never connected
    s = demo(timeout=LIMIT)
    call(s, "pid")
    s.close()
    s.close()  # twice
    again, _ = call(s, "pid")  # a closed server opens a new session when called
    assert not again.is_error
    os.kill(again.value, signal.SIGKILL)  # the process is gone under it
    s.close()
    hung = demo(timeout=LIMIT)
    call(hung, "pid")
    hung.connection.timeout = 60  # a call in flight that will not end by itself

    async def close_while_hanging():
        pending = asyncio.ensure_future(Toolbox([hung]).execute(ToolCall("h", "hang", {})))
        await asyncio.sleep(0.5)
        start = time.perf_counter()
        await hung.aclose()
        seconds = time.perf_counter() - start
        result = await asyncio.wait_for(pending, 5)
        return result, seconds

    result, seconds = asyncio.run(close_while_hanging())
    assert result.is_error and seconds < 10  # the SDK's stdin-close then terminate, bounded


def test_async_code_lists_the_tools_without_blocking_its_loop():
    async def main():
        with demo() as s:
            ticks = 0

            async def tick():
                nonlocal ticks
                while True:
                    await asyncio.sleep(0.01)
                    ticks += 1

            ticker = asyncio.ensure_future(tick())
            tools = await s.aconnect()
            ticker.cancel()
            agent = ReActAgent(ScriptedModel([tool_call("add", a=1, b=1), "2"]), [s])
            return [t.name for t in tools], ticks, await agent.arun("1+1?")

    names, ticks, result = asyncio.run(main())
    assert "add" in names and ticks > 5 and result.answer == "2"


def test_bad_configuration_is_said_at_construction():
    with pytest.raises(TypeError, match="one of them"):
        MCPServer()
    with pytest.raises(ValueError, match="http"):
        MCPServer(url="ftp://example.com")
    with pytest.raises(ValueError, match="timeout"):
        MCPServer(command="python x.py", timeout=0)


# -- streamable HTTP ---------------------------------------------------------------------------
def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_http(port: int):
    import socket
    import subprocess

    proc = subprocess.Popen([sys.executable, str(DEMO), "--http", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", port), 0.1).close()
            return proc
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise RuntimeError("the HTTP server did not start")


def test_an_http_server_that_dies_is_an_error_and_one_started_again_is_reconnected():
    port = free_port()
    proc = start_http(port)
    try:
        with MCPServer(url=f"http://127.0.0.1:{port}/mcp", timeout=2) as s:
            ok, _ = call(s, "add", a=2, b=2)
            assert ok.content == "4"
            hung, seconds = call(s, "hang", seconds=30)
            assert hung.content.startswith("Error: MCPTimeout") and seconds < 3
            proc.kill()
            proc.wait()
            down, seconds = call(s, "add", a=1, b=1)
            assert down.is_error and down.content.startswith("Error: MCP") and seconds < 3
            proc = start_http(port)
            up, _ = call(s, "add", a=1, b=1)
            assert up.content == "2"
    finally:
        proc.kill()
