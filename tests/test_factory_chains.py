"""Issue 28 through the one factory: what tao.toml, ``tao run`` and the workbench say without
Python - named agents and their handoffs, a typed result as a JSON Schema or ``py:module:Class``,
a session by name - and the budgets of a handoff chain as a user expects them: the run's
budgets are the chain's, ``max_turns`` is each agent's own.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from typer.testing import CliRunner

import tao.cli as cli
from tao import ReActAgent, ScriptedModel, calculator, tool_call
from tao.factory import AgentSpec, build_agent
from tao.factory.config import ConfigError, load_config
from tao.factory.outputs import output_type
from tao.factory.team import chain_spec
from tao.output import SchemaOutput

PERSON = {"title": "Person", "type": "object", "required": ["name", "age"],
          "properties": {"name": {"type": "string"}, "age": {"type": "integer"}}}


def toml(folder: Path, text: str) -> Path:
    (folder / "tao.toml").write_text(textwrap.dedent(text), encoding="utf-8")
    return folder


def transfer(to: str, reason: str = ""):
    return tool_call(f"transfer_to_{to}", reason=reason)


# -- the spec ------------------------------------------------------------------------------------
def test_a_spec_says_a_whole_chain_and_build_agent_makes_it():
    spec = AgentSpec("react", name="triage", handoffs=[
        AgentSpec("codeact", name="analyst", description="does the arithmetic")])
    model = ScriptedModel([transfer("analyst"), "```python\nfinal_answer(6 * 7)\n```"])
    triage = build_agent(spec, model)
    assert triage.name == "triage" and "transfer_to_analyst" in triage.toolbox.names
    assert "does the arithmetic" in triage.toolbox["transfer_to_analyst"].description
    assert triage.run("6 * 7?").answer == "42"


def test_a_chain_that_comes_back_names_the_agent_and_is_bounded():
    spec = AgentSpec("react", name="ping", handoffs=[
        AgentSpec("react", name="pong", handoffs=["ping"])])
    agent = build_agent(spec, ScriptedModel([transfer("pong"), transfer("ping"), "ping answers"]))
    assert agent.handoffs["transfer_to_pong"].agent.handoffs["transfer_to_ping"].agent is agent
    assert agent.run("?").answer == "ping answers"
    with pytest.raises(ValueError, match="'nobody'"):
        build_agent(AgentSpec("react", name="a", handoffs=["nobody"]), ScriptedModel([]))
    with pytest.raises(ValueError, match="cannot vote"):
        AgentSpec("react", votes=3, handoffs=["x"])


def test_an_agent_with_its_own_model_gets_it_from_the_door():
    asked: list[str] = []

    def resolve(name):
        asked.append(name)
        return ScriptedModel(["from the endpoint"], name=name)

    spec = AgentSpec("react", name="triage", handoffs=[
        AgentSpec("react", name="expert", model="openai:big")])
    triage = build_agent(spec, ScriptedModel([transfer("expert")]), resolve)
    assert triage.run("?").answer == "from the endpoint" and asked == ["openai:big"]


def test_a_spec_types_the_result():
    spec = AgentSpec("react", output_type=SchemaOutput(PERSON))
    result = build_agent(spec, ScriptedModel(['{"name": "Ann", "age": 3}'])).run("Ann, 3")
    assert result.output == {"name": "Ann", "age": 3}


# -- output types said as text -------------------------------------------------------------------
def test_an_output_type_is_a_schema_file_an_inline_schema_or_a_python_class(tmp_path, monkeypatch):
    (tmp_path / "person.json").write_text(json.dumps(PERSON), encoding="utf-8")
    (tmp_path / "shapes.py").write_text("from pydantic import BaseModel\n"
                                        "class Person(BaseModel):\n    name: str\n    age: int\n",
                                        encoding="utf-8")
    from_file = output_type("person.json", tmp_path)
    assert from_file.name == "Person" and from_file.parse('{"name": "A", "age": 1}')["age"] == 1
    assert output_type(json.dumps(PERSON)).schema == PERSON
    assert output_type({"type": "array", "items": {"type": "integer"}}).parse("[1, 2]") == [1, 2]
    cls = output_type("py:shapes:Person", tmp_path)
    agent = ReActAgent(ScriptedModel(['{"name": "Ann", "age": 3}']), output_type=cls)
    assert agent.run("?").output == cls(name="Ann", age=3)
    for bad, words in (("missing.json", "no schema file"), ("py:shapes:Nobody", "has no Nobody"),
                       ('{"type": 3}', "not a valid JSON Schema"), ("py:nomodule:X", "cannot import")):
        with pytest.raises(ValueError, match=words):
            output_type(bad, tmp_path)


def test_a_schema_output_sends_a_wrong_answer_back_to_the_model():
    model = ScriptedModel(['{"name": "Ann"}', '{"name": "Ann", "age": 3}'])
    result = ReActAgent(model, output_type=SchemaOutput(PERSON)).run("Ann is 3")
    assert result.output == {"name": "Ann", "age": 3}
    assert "'age' is a required property" in model.calls[1][-1].content


# -- tao.toml ------------------------------------------------------------------------------------
def test_tao_toml_names_agents_and_their_handoffs(tmp_path):
    config = load_config(toml(tmp_path, """
        output_type = { type = "object", properties = { n = { type = "integer" } } }
        [agents.triage]
        agent = "react"
        handoffs = ["analyst"]
        [agents.analyst]
        agent = "codeact"
        description = "does the arithmetic"
        max_turns = 4
        deny = ["shell"]
        max_tool_calls = 7
    """))
    assert config.output_type["type"] == "object"
    assert list(config.agents) == ["triage", "analyst"]
    analyst = config.agents["analyst"]
    assert (analyst.agent, analyst.max_turns, analyst.description) == ("codeact", 4,
                                                                       "does the arithmetic")
    assert analyst.guard == {"max_tool_calls": 7, "deny": ["shell"]}


@pytest.mark.parametrize("text, words", [
    ('[agents.triage]\nhandoffs = ["nobody"]\n', "no [agents.nobody]"),
    ('[agents.triage]\nagent = "smart"\n', "agents.triage.agent must be one of"),
    ('[agents.triage]\nmax_turn = 3\n', "did you mean 'max_turns'"),
    ('[agents.react]\nagent = "react"\n', "architectures"),
    ('output_type = "nope.json"\n', "no schema file"),
    ('[agents.a]\noutput_type = "py:nomodule:X"\n', "agents.a.output_type"),
    ('agent = "ghost"\n', "agent must be one of"),
])
def test_a_mistake_in_the_agents_tables_names_the_table_and_what_to_fix(tmp_path, text, words):
    with pytest.raises(ConfigError, match=words.replace("[", r"\[").replace("]", r"\]")):
        load_config(toml(tmp_path, text))


def test_the_chain_gets_the_runs_restrictions_and_tools_and_each_table_its_own(tmp_path):
    config = load_config(toml(tmp_path, """
        [agents.triage]
        handoffs = ["analyst"]
        [agents.analyst]
        agent = "react-text"
        deny = ["calculate"]
        max_turns = 3
    """))
    spec = chain_spec(config.agents, "triage", tools=[calculator],
                      guard={"deny": ["send_email"], "max_tool_calls": 9, "allow": ["calculator"]},
                      max_turns=8, base=tmp_path)
    analyst = spec.handoffs[0]
    assert spec.guard["max_tool_calls"] == 9 and "max_tool_calls" not in analyst.guard
    assert analyst.guard["deny"] == ["send_email", "calculate"]
    assert spec.guard["allow"] == ["calculator", "transfer_to_analyst"]  # its handoffs stay allowed
    assert (spec.max_turns, analyst.max_turns) == (8, 3)
    assert list(spec.tools) == [calculator] == list(analyst.tools)


# -- budgets across a chain ----------------------------------------------------------------------
def _adds(n: int):
    return [tool_call("calculator", operation="add", a=i, b=1) for i in range(n)]


def test_the_budgets_the_chain_starts_with_bound_the_whole_chain():
    worker = ReActAgent(ScriptedModel([*_adds(5), "done"]), [calculator], name="worker")
    triage = ReActAgent(ScriptedModel([transfer("worker")]), name="triage", handoffs=[worker],
                        max_tool_calls=3)
    result = triage.run("add")
    assert result.status == "budget" and "max_tool_calls=3" in result.error
    assert result.tool_calls == 3  # the transfer, then two of the worker's five


def test_a_targets_own_budget_bounds_its_part_and_max_turns_is_each_agents_own():
    worker = ReActAgent(ScriptedModel([*_adds(5), "done"]), [calculator], name="worker",
                        max_turns=3)
    triage = ReActAgent(ScriptedModel([tool_call("calculator", operation="add", a=1, b=1),
                                       transfer("worker")]), [calculator], name="triage",
                        handoffs=[worker], max_turns=2)
    result = triage.run("add")
    assert result.status == "max_turns" and result.turns == 2 + 3  # each loop its own limit
    capped = ReActAgent(ScriptedModel([*_adds(5), "done"]), [calculator], name="worker",
                        max_tool_calls=2)
    again = ReActAgent(ScriptedModel([transfer("worker")]), name="triage", handoffs=[capped])
    assert again.run("add").status == "budget"


def test_a_chains_wall_clock_runs_from_its_start(monkeypatch):
    import tao.guard.budget as budget

    now = [1000.0]
    monkeypatch.setattr(budget.time, "monotonic", lambda: now[0])

    def slow(messages):
        now[0] += 4  # each reply of the worker takes 4 s
        return tool_call("calculator", operation="add", a=1, b=1)

    worker = ReActAgent(ScriptedModel([slow] * 5 + ["done"]), [calculator], name="worker")
    triage = ReActAgent(ScriptedModel([transfer("worker")]), name="triage", handoffs=[worker],
                        max_seconds=10)
    result = triage.run("add")
    assert result.status == "budget" and "max_seconds=10" in result.error


# -- tao run -------------------------------------------------------------------------------------
def run(args, replies, monkeypatch, folder: Path):
    monkeypatch.chdir(folder)
    monkeypatch.setattr(cli, "resolve_model", lambda spec="auto", timeout=None:
                        ScriptedModel(list(replies)))
    return CliRunner().invoke(cli.app, ["run", *args, "--no-audit"])


def test_tao_run_agent_name_builds_the_chain_of_tao_toml(tmp_path, monkeypatch):
    toml(tmp_path, """
        [agents.triage]
        handoffs = ["analyst"]
        [agents.analyst]
        agent = "react-text"
    """)
    out = run(["6 * 7?", "--agent", "triage", "--json"],
              [transfer("analyst", "needs math"), "Final Answer: 42"], monkeypatch, tmp_path)
    assert out.exit_code == 0, out.output
    assert json.loads(out.output)["answer"] == "42"
    shown = run(["6 * 7?", "--agent", "triage"], [transfer("analyst", "needs math"),
                                                  "Final Answer: 42"], monkeypatch, tmp_path)
    assert "triage hands the conversation to analyst" in shown.output
    bad = run(["?", "--agent", "ghost"], [], monkeypatch, tmp_path)
    assert bad.exit_code == 2 and "'ghost'" in bad.output


def test_tao_run_output_type_prints_the_validated_value(tmp_path, monkeypatch):
    (tmp_path / "person.json").write_text(json.dumps(PERSON), encoding="utf-8")
    reply = ['Here it is: {"name": "Ann", "age": 3}']
    quiet = run(["Ann is 3.", "--output-type", "person.json", "-q"], reply, monkeypatch, tmp_path)
    assert quiet.exit_code == 0 and json.loads(quiet.output) == {"name": "Ann", "age": 3}
    as_json = run(["Ann is 3.", "--output-type", "person.json", "--json"], reply, monkeypatch,
                  tmp_path)
    assert json.loads(as_json.output)["output"] == {"name": "Ann", "age": 3}
    shown = run(["Ann is 3.", "--output-type", json.dumps(PERSON)], reply, monkeypatch, tmp_path)
    assert "Output (Person):" in shown.output
    toml(tmp_path, 'output_type = "person.json"\n')
    from_file = run(["Ann is 3.", "--json"], reply, monkeypatch, tmp_path)
    assert json.loads(from_file.output)["output"]["age"] == 3
    bad = run(["?", "--output-type", "nope.json"], reply, monkeypatch, tmp_path)
    assert bad.exit_code == 2 and "no schema file" in bad.output


def test_tao_run_session_goes_on_from_the_last_run(tmp_path, monkeypatch):
    monkeypatch.setenv("TAO_DATA_DIR", str(tmp_path / "data"))
    seen: list = []

    def remembers(messages):
        seen.append([m.content for m in messages])
        return "Ann" if any("Ann" in (m.content or "") for m in messages[1:-1]) else "noted"

    first = run(["My name is Ann.", "--session", "s1", "-q"], [remembers], monkeypatch, tmp_path)
    second = run(["What is my name?", "--session", "s1", "-q"], [remembers], monkeypatch, tmp_path)
    other = run(["What is my name?", "--session", "s2", "-q"], [remembers], monkeypatch, tmp_path)
    assert (first.output.strip(), second.output.strip(), other.output.strip()) == (
        "noted", "Ann", "noted")
    from tao import Session

    kept = Session("s1", path=tmp_path / "data" / "sessions.db").messages()
    assert [m.content for m in kept] == ["My name is Ann.", "noted", "What is my name?", "Ann"]
