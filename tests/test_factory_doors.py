"""Issue 28 at every other door of the one factory: what ``tao run --agent NAME`` and
``--output-type`` do (tests/test_factory_chains.py), ``tao chat``, ``tao compare``, ``tao eval``
and ``tao mcp serve`` do too - the same tao.toml, the same flags, the same chain.

Each test reads like the README's "Without Python" example: a tao.toml whose ``triage`` hands
arithmetic to ``analyst``, and a ``tao.ScriptedModel`` playing both.
"""

from __future__ import annotations

import json
import textwrap

import pytest
from typer.testing import CliRunner

import tao.cli as cli
from tao import ScriptedModel, tool_call

TRIAGE = """
    [agents.triage]
    agent = "react"
    handoffs = ["analyst"]
    [agents.analyst]
    agent = "react-text"
    description = "does the arithmetic"
"""
PERSON = {"title": "Person", "type": "object", "required": ["name", "age"],
          "properties": {"name": {"type": "string"}, "age": {"type": "integer"}}}
#: triage hands the question over; analyst answers it (the text protocol)
HANDED = [tool_call("transfer_to_analyst", reason="needs math"), "Final Answer: 42"]


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A project folder with the triage -> analyst tao.toml, the working directory."""
    (tmp_path / "tao.toml").write_text(textwrap.dedent(TRIAGE), encoding="utf-8")
    (tmp_path / "person.json").write_text(json.dumps(PERSON), encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TAO_DATA_DIR", str(tmp_path / "data"))
    return tmp_path


def scripted(monkeypatch, replies: list) -> ScriptedModel:
    model = ScriptedModel(list(replies))
    monkeypatch.setattr(cli, "resolve_model", lambda spec="auto", timeout=None: model)
    return model


def invoke(*args: str, input: str | None = None):
    return CliRunner().invoke(cli.app, [*args, "--no-audit"], input=input)


def flat(text: str) -> str:
    return " ".join(text.split())  # rich wraps at 80 columns


# -- tao chat --------------------------------------------------------------------------------------
def test_tao_chat_agent_name_answers_with_the_chain(project, monkeypatch):
    scripted(monkeypatch, HANDED)
    out = invoke("chat", "--agent", "triage", input="6 * 7?\n/help\n/agent ghost\n")
    assert out.exit_code == 0, out.output
    assert "tao chat · triage" in out.stdout
    assert "triage hands the conversation to analyst" in flat(out.stdout)
    assert "Final Answer: 42" in out.stdout
    assert "react, react-text, react-json, codeact, plan, triage, analyst" in flat(out.stdout)
    assert "No agent named ghost" in out.stdout
    bad = invoke("chat", "--agent", "ghost")
    assert bad.exit_code == 2 and "[agents.NAME]" in flat(bad.output)


def test_tao_chat_switches_to_a_named_agent_and_keeps_the_conversation(project, monkeypatch):
    model = scripted(monkeypatch, ["Noted, Ann.", *HANDED])
    out = invoke("chat", input="I am Ann.\n/agent triage\n6 * 7?\n")
    assert out.exit_code == 0, out.output
    assert "agent: triage" in out.stdout and "Final Answer: 42" in out.stdout
    assert [m.content for m in model.calls[1][1:]] == ["I am Ann.", "Noted, Ann.", "6 * 7?"]


def test_tao_chat_output_type_types_every_answer(project, monkeypatch):
    scripted(monkeypatch, ['Here: {"name": "Ann", "age": 3}'])
    out = invoke("chat", "--output-type", "person.json", input="Ann is 3.\n")
    assert out.exit_code == 0, out.output
    assert "Output (Person):" in out.stdout and '"age": 3' in out.stdout
    bad = invoke("chat", "--output-type", "nope.json")
    assert bad.exit_code == 2 and "no schema file" in flat(bad.output)


def test_tao_run_and_tao_chat_share_a_session_by_name(project, monkeypatch):
    scripted(monkeypatch, ["Noted."])
    assert invoke("run", "I am Ann.", "--session", "s1", "-q").exit_code == 0
    model = scripted(monkeypatch, ["Ann."])
    out = invoke("chat", "--session", "s1", input="Who am I?\n")
    assert out.exit_code == 0, out.output
    assert [m.content for m in model.calls[0][1:]] == ["I am Ann.", "Noted.", "Who am I?"]


# -- tao compare -------------------------------------------------------------------------------------
def test_tao_compare_puts_a_named_agent_beside_the_architectures(project, monkeypatch):
    scripted(monkeypatch, ["42", *HANDED])  # the react row, then the triage chain
    out = CliRunner().invoke(cli.app, ["compare", "6 * 7?", "--agents", "react,triage", "--json"])
    assert out.exit_code == 0, out.output
    react, triage = json.loads(out.stdout)
    assert (react["agent"], react["answer"]) == ("react", "42")
    assert (triage["agent"], triage["architecture"]) == ("triage", "triage: ReAct -> analyst")
    assert (triage["answer"], triage["llm_calls"]) == ("42", 2)
    table = CliRunner().invoke(cli.app, ["compare", "6 * 7?", "--agents", "ghost"])
    assert table.exit_code == 2 and "'ghost'" in table.output


def test_compare_takes_a_named_spec_in_python():
    from tao.compare import compare
    from tao.factory import AgentSpec

    triage = AgentSpec("react", name="triage",
                       handoffs=[AgentSpec("react-text", name="analyst")])
    [row] = compare("6 * 7?", {"triage": ScriptedModel(HANDED)}, [triage])
    assert (row.agent, row.status, row.answer) == ("triage", "done", "42")


# -- tao eval ------------------------------------------------------------------------------------
def test_tao_eval_scores_a_named_agent_beside_react(project, monkeypatch):
    (project / "tasks.jsonl").write_text('{"question": "6 * 7?", "answer": 42}\n',
                                         encoding="utf-8")
    model = ScriptedModel(["The answer is 42.", *HANDED])  # react's task, then triage's
    monkeypatch.setattr("tao.models.resolve.resolve_model", lambda spec="auto", **kw: model)
    out = CliRunner().invoke(cli.app, ["eval", "tasks.jsonl", "--agent", "react,triage",
                                       "--json"])
    assert out.exit_code == 0, out.output
    rows = json.loads(out.stdout)["agents"]
    assert [(r["agent"], r["solved"]) for r in rows] == [("react", 1), ("triage", 1)]
    assert len(model.calls) == 3  # react once; triage, then analyst after the handoff
    bad = CliRunner().invoke(cli.app, ["eval", "tasks.jsonl", "--agent", "ghost"])
    assert bad.exit_code == 2 and "[agents.NAME]" in flat(bad.output)


def test_the_eval_chain_gets_the_suites_tools(project):
    from tao.evals.runner import Team, make_agent
    from tao.factory.config import load_config
    from tao.tools.calculator import calculator

    import pickle

    config = load_config()
    team = pickle.loads(pickle.dumps(Team(config.agents, config.base)))  # as a worker gets it
    agent = make_agent("triage", ScriptedModel(HANDED), [calculator], 5, team=team)
    assert {"calculator", "transfer_to_analyst"} <= set(agent.toolbox.names)
    analyst = agent.handoffs["transfer_to_analyst"].agent
    assert "calculator" in analyst.toolbox.names and analyst.max_turns == 5
    from tao.evals.runner import Evaluation

    with pytest.raises(ValueError, match="a chain cannot vote"):
        Evaluation("calculator", ["triage"], "local", votes=3, team=team)


# -- tao mcp serve ---------------------------------------------------------------------------------
def test_tao_mcp_serve_serves_a_named_agent_with_its_chain(project, monkeypatch):
    from mcp import Client

    import tao.mcp_server.server as server_module

    seen: dict = {}

    async def in_process(server):  # instead of stdio: the official client, in this process
        async with Client(server) as client:
            seen["tools"] = {t.name: t.description for t in (await client.list_tools()).tools}
            seen["answer"] = await client.call_tool("triage", {"task": "6 * 7?"})

    monkeypatch.setattr(server_module, "serve_stdio", in_process)
    scripted(monkeypatch, HANDED)
    out = invoke("mcp", "serve", "--agent", "triage")
    assert out.exit_code == 0, out.output
    assert set(seen["tools"]) == {"calculate", "calculator", "triage"}
    assert "Runs the agent triage (ReAct; it may hand the task to analyst)" in \
        seen["tools"]["triage"]
    assert seen["answer"].content[0].text == "42"
    every = invoke("mcp", "serve", "--agent", "ghost")
    assert every.exit_code == 2 and "[agents.NAME]" in flat(every.output)


def test_mcp_serve_agents_serves_the_architectures_and_every_named_agent(project, monkeypatch):
    import tao.mcp_server.server as server_module

    served: list = []

    async def listed(server):
        from mcp import Client

        async with Client(server) as client:
            served.extend(t.name for t in (await client.list_tools()).tools)

    monkeypatch.setattr(server_module, "serve_stdio", listed)
    scripted(monkeypatch, [])
    assert invoke("mcp", "serve", "--agents").exit_code == 0
    assert served[2:] == ["react", "codeact", "plan", "triage", "analyst"]


# -- the flags, declared once --------------------------------------------------------------------
@pytest.mark.parametrize("flag", ["--output-type", "--session", "--agent"])
def test_run_and_chat_say_the_same_of_the_shared_flags(flag):
    def said(command: str) -> str:
        import typer.main

        group = typer.main.get_command(cli.app)  # a click group (typer's own copy of click)
        option = next(p for p in group.commands[command].params if flag in p.opts)
        return str(option.help)

    assert said("run") == said("chat")
