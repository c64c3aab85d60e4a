"""Seed 003's JSON decision object: ``ReActAgent(model, tools, protocol="json")``.

The model answers each turn with ``{"thought": ..., "action": "<tool>" | "final", "action_input":
{...} | "<answer>"}``; a tool's result comes back as ``Observation: ...``; ``final`` answers.
"""

from __future__ import annotations

import json

import pytest

from tao import Model, ReActAgent, ScriptedModel, Toolbox, calculate, calculator
from tao.agents.blocks import ToolParams
from tao.agents.decision import parse_decision
from tao.agents.protocols import JsonProtocol
from tao.agents.text_parser import ParsedAction, ParsedFinal
from tao.events import Action, Error, ModelRetry, Observation
from tao.safe_json import dumps

try:
    from grammar_check import accepts, sampler
except ImportError:  # tests/ became a package
    from .grammar_check import accepts, sampler


def decide(thought, action, action_input):
    return json.dumps({"thought": thought, "action": action, "action_input": action_input}, ensure_ascii=False)


SEED_3 = [  # 小明有 50 元，买了 3 本书每本 12 元，又买了 2 支笔每支 5 元，请问他还剩多少钱？
    decide("先算书的钱：3 * 12", "calculator", {"operation": "multiply", "a": 3, "b": 12}),
    decide("再算笔的钱：2 * 5", "calculator", {"operation": "multiply", "a": 2, "b": 5}),
    decide("一共花了 36 + 10", "calculator", {"operation": "add", "a": 36, "b": 10}),
    decide("还剩 50 - 46", "calculator", {"operation": "subtract", "a": 50, "b": 46}),
    decide("我已经知道最终答案了", "final", "他还剩 4 元"),
]


def test_the_json_protocol_answers_the_seed_calculator_question(seed_tasks):
    task = seed_tasks["seed-3-zh"]
    model = ScriptedModel(SEED_3)
    events = []

    result = ReActAgent(model, [calculator], protocol="json").run(task["question"], sinks=[events.append])

    assert (result.status, result.answer) == ("done", "他还剩 4 元")
    assert (result.turns, result.tool_calls) == (task["expect"]["react_turns"], task["expect"]["react_tool_calls"])
    assert [e.content for e in events if type(e) is Observation] == ["36", "10", "46", "4"]
    assert events[0].agent == "react-json"
    system = model.calls[0][0].content
    assert '"action": "final"' in system and "[calculator]" in system and "每次只回复一个 JSON 对象" in system
    assert model.calls[1][-1].content == "Observation: 36"
    assert result.messages[2].content == SEED_3[0]  # the decision is kept as the model wrote it


def test_seed_003s_own_calculator_takes_a_string():
    model = ScriptedModel([decide("算一下", "calculate", "15 + 27"), decide("好了", "final", "15 + 27 = 42")])
    events = []
    result = ReActAgent(model, [calculate], protocol="json").run("请帮我计算 15 + 27 等于多少？", sinks=[events.append])
    assert result.answer == "15 + 27 = 42"
    assert [e.call.arguments for e in events if type(e) is Action] == [{"expression": "15 + 27"}]


# -- read tolerantly ---------------------------------------------------------------------------

TOOLS = Toolbox([calculator, calculate])
PARAMS = {t.name: ToolParams.of(t.spec.parameters) for t in TOOLS}
ADD = {"operation": "add", "a": 15, "b": 27}
ADD_DECISION = decide("add", "calculator", ADD)


def add(thought="add"):
    return ParsedAction("calculator", ADD, thought)


READ = [
    ("the seed's object", ADD_DECISION, add()),
    ("in a json fence", f"```json\n{ADD_DECISION}\n```", add()),
    ("single quotes", "{'thought': 'add', 'action': 'calculator', 'action_input': {'operation': 'add', 'a': 15, 'b': 27}}", add()),
    ("prose before and after", f"Sure, here is my decision:\n{ADD_DECISION}\nI will wait for the result.", add()),
    ("braces in the prose before it", f"I'll use {{calculator}} now. {ADD_DECISION}", add()),
    ("action_input as a JSON string holding the object",
     json.dumps({"thought": "add", "action": "calculator", "action_input": json.dumps(ADD)}), add()),
    ("the local format's keys", json.dumps({"thought": "add", "tool": "calculator", "arguments": ADD}), add()),
    ("a tool name in the wrong case", decide("add", "Calculator", ADD), add()),
    ("no thought", json.dumps({"action": "calculator", "action_input": ADD}), add("")),
    ("a string for a one-parameter tool", decide("t", "calculate", "15 + 27"),
     ParsedAction("calculate", {"expression": "15 + 27"}, "t")),
    ("key=value text", decide("t", "calculator", "operation='add', a=15, b=27"), add("t")),
    ("final", decide("done", "final", "42"), ParsedFinal("42", "done")),
    ("Final, upper case, a number", decide("done", "Final", 42), ParsedFinal("42", "done")),
    ("final with an answer object", decide("done", "final", {"answer": "42"}), ParsedFinal("42", "done")),
    ("a final_answer key", json.dumps({"thought": "done", "final_answer": "42"}), ParsedFinal("42", "done")),
    ("a lone surrogate is kept", decide("t", "final", "x\ud800y"), ParsedFinal("x\ud800y", "t")),
]


@pytest.mark.parametrize("reply, expected", [r[1:] for r in READ], ids=[r[0] for r in READ])
def test_decisions_are_read_tolerantly(reply, expected):
    assert parse_decision(reply, PARAMS).parsed == expected


# -- what cannot be used is a corrective observation, and the run goes on ----------------------

DEEP = '{"thought": "t", "action": "calculator", "action_input": ' + "[" * 5000 + "]" * 5000 + "}"
UNUSABLE = [  # (case, reply, what the model is told)
    ("an empty reply", "", "the reply is empty"),
    ("prose only", "The answer is 42.", "the reply holds no JSON object"),
    ("invalid JSON", '{"thought": "t", "action": "calculator", "action_input": {"a": }}',
     "the reply is not valid JSON (Expecting value at character 63)"),
    ("JSON cut at the token limit", '{"thought": "t", "action": "calcu',
     "the reply is not valid JSON (Unterminated string starting at character 27)"),
    ("a list of decisions", f"[{ADD_DECISION}]", "the reply is a JSON list of 1 items, not one object"),
    ("wrong keys", '{"reasoning_steps": "t", "command": "calculator"}',
     'the JSON object has no "action" (its keys: reasoning_steps, command)'),
    ("action an object", '{"thought": "t", "action": {"name": "calculator"}, "action_input": {}}',
     '"action" must be a string (a tool name or "final"), not object'),
    ("action a number", '{"thought": "t", "action": 3, "action_input": {}}',
     '"action" must be a string (a tool name or "final"), not number'),
    ("an unknown tool", decide("t", "weather", {"city": "北京"}),
     'there is no tool named weather; the tools are [calculator, calculate], and "final" gives the answer'),
    ("no action_input", '{"thought": "t", "action": "calculator"}',
     'calling calculator needs "action_input": the arguments as a JSON object'),
    ("action_input a list", decide("t", "calculator", ["add", 15, 27]),
     '"action_input" is not an object of arguments (expected an object of arguments, got array)'),
    ("nesting past the limit", DEEP, "the reply is not valid JSON (nested more than 100 levels deep)"),
    ("an empty final answer", decide("t", "final", "  "),
     'the "action_input" of "final" is empty: it should hold the final answer'),
]


@pytest.mark.parametrize("reply, told", [u[1:] for u in UNUSABLE], ids=[u[0] for u in UNUSABLE])
def test_an_unusable_decision_is_a_corrective_observation_and_the_run_goes_on(reply, told):
    model = ScriptedModel([reply, ADD_DECISION, decide("done", "final", "42")])
    events = []

    result = ReActAgent(model, TOOLS, protocol="json").run("What is 15 + 27?", sinks=[events.append])

    assert [e.message for e in events if type(e) is Error] == [told]
    correction = model.calls[1][-1]
    assert correction.role == "user"
    assert correction.content.startswith(f"Observation: your last reply could not be used: {told}\n")
    assert '{"thought": "your reasoning", "action": "final", "action_input": "the final answer"}' in correction.content
    assert (result.status, result.answer, result.turns, result.tool_calls) == ("done", "42", 3, 1)


def test_of_two_objects_the_first_runs_and_the_model_is_told():
    model = ScriptedModel([ADD_DECISION + "\n" + decide("done", "final", "43"), decide("done", "final", "42")])
    events = []
    result = ReActAgent(model, TOOLS, protocol="json").run("What is 15 + 27?", sinks=[events.append])
    assert result.answer == "42" and result.tool_calls == 1
    assert [e.content for e in events if type(e) is Observation] == ["42"]  # the tool's own result
    assert model.calls[1][-1].content == (
        "Observation: 42\n(Your reply held 2 JSON objects; only the first was run. Send one decision per reply.)")


def test_a_lone_surrogate_goes_through_and_the_trace_can_be_written():
    model = ScriptedModel([decide("t", "calculate", "1 + 1"), '{"thought": "t", "action": "final", "action_input": "2 \\ud800"}'])
    result = ReActAgent(model, [calculate], protocol="json").run("1 + 1?")
    assert result.answer == "2 \ud800"
    assert "\\ud800" in dumps(result.to_dict())
    dumps(result.to_dict()).encode("utf-8")


def test_corrections_follow_the_task_language():
    model = ScriptedModel(['{"thought": "t", "action": 7}', decide("好了", "final", "42")])
    ReActAgent(model, TOOLS, protocol="json").run("请帮我计算 15 + 27 等于多少？")
    assert model.calls[1][-1].content.startswith(
        'Observation: 无法使用你的上一条回复："action" 应该是字符串（工具名称或 "final"），收到的是 number\n')


# -- how the model is held to the object --------------------------------------------------------

class GrammarModel(Model):
    supports_grammar = True  # as LocalModel: nothing here is decoded

    async def stream(self, messages, **kwargs):  # pragma: no cover - never called
        raise AssertionError


def test_on_the_embedded_model_a_grammar_holds_the_decision():
    kwargs = JsonProtocol().model_kwargs(GrammarModel(), TOOLS, "en")
    assert list(kwargs) == ["grammar"]
    gbnf = kwargs["grammar"]
    sampler(gbnf)  # llama.cpp parses it
    for reply in [ADD_DECISION, decide("t", "calculate", {"expression": "2 * 3"}), decide("done", "final", "42"),
                  *SEED_3]:
        assert accepts(gbnf, reply), reply
    for reply in [decide("t", "weather", {}), decide("t", "final", {"answer": "42"}),
                  '{"thought": "t", "action": "calculator"}', f"{ADD_DECISION} trailing prose",
                  decide("t", "calculator", {"operation": "add", "a": 1})]:
        assert not accepts(gbnf, reply), reply


def test_api_models_are_asked_for_a_json_schema():
    kwargs = JsonProtocol().model_kwargs(ScriptedModel([]), TOOLS, "en")
    fmt = kwargs["response_format"]
    assert fmt["type"] == "json_schema" and fmt["json_schema"]["name"] == "decision"
    schema = fmt["json_schema"]["schema"]
    assert schema["type"] == "object" and schema["required"] == ["thought", "action", "action_input"]
    assert schema["properties"]["action"]["enum"] == ["calculator", "calculate", "final"]


def test_an_endpoint_that_refuses_json_schema_is_asked_with_json_object_then_nothing():
    pytest.importorskip("openai")
    from tao import OpenAIModel

    try:
        from openai_server import Error as HTTPError, OpenAIServer, Reply
    except ImportError:  # tests/ became a package
        from .openai_server import Error as HTTPError, OpenAIServer, Reply

    with OpenAIServer() as server:
        server.push(HTTPError(400, "response_format type json_schema is unavailable"),
                    HTTPError(400, "response_format json_object is unavailable"),
                    Reply("```json\n" + ADD_DECISION + "\n```"), Reply(decide("done", "final", "42")))
        model = OpenAIModel("m", base_url=server.url, api_key="x", backoff_base=0.0)
        events = []
        result = ReActAgent(model, TOOLS, protocol="json").run("What is 15 + 27?", sinks=[events.append])

    assert (result.status, result.answer, result.tool_calls) == ("done", "42", 1), result.error
    assert [b.get("response_format", {}).get("type") for b in server.bodies] == [
        "json_schema", "json_object", None, None]  # the step down holds for the turns after
    retries = [e.reason for e in events if type(e) is ModelRetry]
    assert len(retries) == 2 and retries[0].startswith("the model refused response_format=json_schema; asking with json_object")
    assert "asking with no response_format" in retries[1]


def test_a_bad_key_is_not_mistaken_for_a_refused_format():
    pytest.importorskip("openai")
    from tao import OpenAIModel

    try:
        from openai_server import Error as HTTPError, OpenAIServer
    except ImportError:  # tests/ became a package
        from .openai_server import Error as HTTPError, OpenAIServer

    with OpenAIServer() as server:
        server.push(HTTPError(401, "bad key"))
        model = OpenAIModel("m", base_url=server.url, api_key="x", backoff_base=0.0)
        result = ReActAgent(model, TOOLS, protocol="json").run("What is 15 + 27?")
    assert result.status == "error" and "401" in result.error and len(server.bodies) == 1
