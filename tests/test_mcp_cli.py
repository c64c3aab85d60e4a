"""``--mcp`` on tao run / code / chat and ``mcp = [...]`` in tao.toml, with a real MCP server
process (tests/mcp_servers/demo.py) and a ``ScriptedModel``; and ``import tao`` stays free of
the ``mcp`` SDK."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import mcp.client.stdio  # noqa: F401 - imported here, not first inside CliRunner.invoke: the SDK binds
import pytest             # sys.stderr as stdio_client's default errlog when it is imported, and
from typer.testing import CliRunner  # CliRunner's stand-in has no fileno for later tests

import tao.cli as cli
from tao import ScriptedModel, tool_call

DEMO = Path(__file__).parent / "mcp_servers" / "demo.py"
SERVER = shlex.join([sys.executable, str(DEMO)])
runner = CliRunner()

def data_of(text: str) -> str:
    """What an MCP server returned, from inside the fence its (untrusted by default) output gets."""
    m = re.search(r"<<<DATA (\w+)>>>\n(.*)\n<<<END \1>>>", text, re.S)
    assert m, f"not fenced: {text!r}"
    return m.group(2)



@pytest.fixture
def model_is(monkeypatch, tmp_path):
    """``model_is(model)``: the command gets ``model``; the run happens in a fresh folder."""
    monkeypatch.chdir(tmp_path)

    def install(model):
        monkeypatch.setattr(cli, "resolve_model", lambda spec="auto", timeout=None: model)
        return model

    return install


def test_import_tao_does_not_import_the_mcp_sdk():
    code = ("import sys, tao, tao.cli; "
            "print(sorted(m for m in sys.modules if m == 'mcp' or m.startswith(('mcp.', 'tao.mcp'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_tao_run_mcp_gives_the_agent_the_servers_tools_beside_the_calculators(model_is):
    model = model_is(ScriptedModel([tool_call("add", a=2, b=3),
                                    tool_call("calculator", operation="add", a=1, b=1),
                                    tool_call("demo_calculator", expression="1+1"), "5"]))
    res = runner.invoke(cli.app, ["run", "2+3?", "--mcp", SERVER, "--no-audit", "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["answer"] == "5"
    tools = [m for m in model.calls[-1] if m.role == "tool"]
    assert [data_of(tools[0].content), tools[1].content, data_of(tools[2].content)] == [
        "5", "2", "remote:1+1"]  # remote, local, prefixed


def test_tao_toml_mcp_servers_are_used_and_the_command_line_replaces_them(model_is, tmp_path):
    (tmp_path / "tao.toml").write_text(f"mcp = [{json.dumps(SERVER)}]\n", encoding="utf-8")
    model = model_is(ScriptedModel([tool_call("get_time"), "noon"]))
    res = runner.invoke(cli.app, ["run", "time?", "--no-audit", "--json"])
    assert res.exit_code == 0, res.output
    assert [data_of(m.content) for m in model.calls[-1] if m.role == "tool"] == ["12:00"]
    model = model_is(ScriptedModel([tool_call("get_time"), "noon"]))
    res = runner.invoke(cli.app, ["run", "time?", "--no-audit", "--json", "--mcp",
                                  f"{sys.executable} -c 'import sys; sys.exit(4)'"])
    assert res.exit_code == 2 and "cannot connect to MCP server" in res.output
    assert model.calls == []  # said before any model call


def test_a_server_that_cannot_start_is_a_usage_error(model_is):
    model = model_is(ScriptedModel(["never"]))
    res = runner.invoke(cli.app, ["run", "x", "--mcp", "/nonexistent/mcp-server", "--no-audit"])
    assert res.exit_code == 2 and "No such file" in res.output
    res = runner.invoke(cli.app, ["run", "x", "--mcp", "http://127.0.0.1:9/mcp", "--no-audit"])
    assert res.exit_code == 2 and "cannot connect to MCP server http://127.0.0.1:9/mcp" in res.output
    assert model.calls == []


def test_tao_code_mcp_adds_the_servers_tools_to_the_workspace(model_is, tmp_path):
    model = model_is(ScriptedModel([
        'Thought: ask the server\nAction: weather\nAction Input: {"city": "北京"}',
        "Thought: done\nFinal Answer: 21 度"]))
    res = runner.invoke(cli.app, ["code", "北京几度？", "--sandbox", "none", "--no-audit",
                                  "--mcp", SERVER])
    assert res.exit_code == 0, res.output
    assert '"temp_c": 21' in [m for m in model.calls[-1] if m.role == "user"][-1].content
    assert "Today's weather in a city" in model.calls[0][0].content  # listed in the prompt


def test_tao_chat_mcp_keeps_one_server_for_the_session(model_is):
    model_is(ScriptedModel([tool_call("pid"), "first", tool_call("pid"), "second"]))
    res = runner.invoke(cli.app, ["chat", "--mcp", SERVER, "--no-audit"],
                        input="one?\ntwo?\n/exit\n")
    assert res.exit_code == 0, res.output
    pids = [line.split(":", 1)[1].strip() for line in res.stdout.splitlines()
            if line.startswith("Observation:")]
    assert len(pids) == 2 and pids[0] == pids[1]  # the same process answered both questions


def test_a_server_started_by_the_cli_gets_the_users_environment(model_is, monkeypatch):
    monkeypatch.setenv("TAO_MCP_TEST_KEY", "from-the-shell")
    model = model_is(ScriptedModel([tool_call("env", name="TAO_MCP_TEST_KEY"), "ok"]))
    res = runner.invoke(cli.app, ["run", "key?", "--mcp", SERVER, "--no-audit", "--json"])
    assert res.exit_code == 0, res.output
    assert [data_of(m.content) for m in model.calls[-1] if m.role == "tool"] == ["from-the-shell"]
