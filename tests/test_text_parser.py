"""The tolerant text-protocol parser: what models actually write, and what it is read as."""

from __future__ import annotations

import random

import pytest

from tao.agents.text_parser import (ParsedAction, ParsedFinal, ParseFailure, cut_invented_observation,
                                    parse_arguments, parse_reply)

PARAMS = {"calculator": ["operation", "a", "b"], "calculate": ["expression"], "now": [],
          "search": ["query", "filters"]}
ADD = {"operation": "add", "a": 15, "b": 27}
ADD_JSON = '{"operation": "add", "a": 15, "b": 27}'


def act(arguments=ADD, thought="", tool="calculator"):
    return ParsedAction(tool, arguments, thought)


CASES = [
    # -- the format as specified, and whitespace drift
    ("canonical", f"Thought: add them\nAction: calculator\nAction Input: {ADD_JSON}", act(thought="add them")),
    ("extra whitespace and blank lines",
     f"\n\n   Thought:    add them   \n\n\n   Action:   calculator   \n\n  Action Input:   {ADD_JSON}  \n\n",
     act(thought="add them")),
    ("no space after colons", 'Thought:add\nAction:calculator\nAction Input:{"operation":"add","a":15,"b":27}',
     act(thought="add")),
    ("windows line endings", f"Thought: add\r\nAction: calculator\r\nAction Input: {ADD_JSON}\r\n", act(thought="add")),
    ("missing thought", f"Action: calculator\nAction Input: {ADD_JSON}", act()),
    ("prose before the first label is the thought",
     f"I should add the two numbers.\nAction: calculator\nAction Input: {ADD_JSON}",
     act(thought="I should add the two numbers.")),
    # -- JSON drift
    ("json fence", f"Thought: t\nAction: calculator\nAction Input:\n```json\n{ADD_JSON}\n```", act(thought="t")),
    ("bare fence", f"Thought: t\nAction: calculator\nAction Input: ```\n{ADD_JSON}\n```", act(thought="t")),
    ("single quotes", "Action: calculator\nAction Input: {'operation': 'add', 'a': 15, 'b': 27}", act()),
    ("python dict with True/None", "Action: search\nAction Input: {'query': 'x', 'filters': {'exact': True, 'site': None}}",
     act({"query": "x", "filters": {"exact": True, "site": None}}, tool="search")),
    ("json true/null with trailing comma", 'Action: search\nAction Input: {"query": "x", "filters": {"exact": true, "site": null},}',
     act({"query": "x", "filters": {"exact": True, "site": None}}, tool="search")),
    ("trailing comma", 'Action: calculator\nAction Input: {"operation": "add", "a": 15, "b": 27,}', act()),
    ("single quotes and trailing comma", "Action: calculator\nAction Input: {'operation': 'add', 'a': 15, 'b': 27,}", act()),
    ("trailing prose after the json",
     f"Action: calculator\nAction Input: {ADD_JSON} and then I will wait for the result.", act()),
    ("prose on the next line", f"Thought: t\nAction: calculator\nAction Input: {ADD_JSON}\n\nLet me wait.",
     act(thought="t")),
    ("an extra closing brace", f"Action: calculator\nAction Input: {ADD_JSON}}}", act()),
    ("multi-line json", 'Action: calculator\nAction Input: {\n  "operation": "add",\n  "a": 15,\n  "b": 27\n}', act()),
    ("nested json with a brace in a string",
     'Action: search\nAction Input: {"query": "a } b", "filters": {"tags": [1, {"x": [2, 3]}]}}',
     act({"query": "a } b", "filters": {"tags": [1, {"x": [2, 3]}]}}, tool="search")),
    ("unicode in arguments", 'Action: search\nAction Input: {"query": "北京天气 ☀️", "filters": {"城市": "北京"}}',
     act({"query": "北京天气 ☀️", "filters": {"城市": "北京"}}, tool="search")),
    ("floats and negatives", 'Action: calculator\nAction Input: {"operation": "add", "a": 1.5e2, "b": -2}',
     act({"operation": "add", "a": 150.0, "b": -2})),
    ("key=value input", 'Action: calculator\nAction Input: operation="add", a=15, b=27', act()),
    # -- label drift
    ("full-width colons", f"Thought：加起来\nAction：calculator\nAction Input：{ADD_JSON}", act(thought="加起来")),
    ("bold labels", f"**Thought:** add\n**Action:** calculator\n**Action Input:** {ADD_JSON}", act(thought="add")),
    ("bold labels, colon outside", f"**Thought**: add\n**Action**: calculator\n**Action Input**: {ADD_JSON}",
     act(thought="add")),
    ("markdown headings", f"## Thought: add\n## Action: calculator\n## Action Input: {ADD_JSON}", act(thought="add")),
    ("quoted block", f"> Thought: add\n> Action: calculator\n> Action Input: {ADD_JSON}", act(thought="add")),
    ("lowercase labels", f"thought: add\naction: calculator\naction input: {ADD_JSON}", act(thought="add")),
    ("uppercase labels", f"THOUGHT: add\nACTION: calculator\nACTION INPUT: {ADD_JSON}", act(thought="add")),
    ("underscore label", f"Thought: add\nAction: calculator\nAction_Input: {ADD_JSON}", act(thought="add")),
    ("chinese labels", f"思考：先把两个数相加\n行动：calculator\n行动输入：{ADD_JSON}", act(thought="先把两个数相加")),
    ("chinese final answer", "思考：我已经知道最终答案了\n最终答案：他还剩 4 元", ParsedFinal("他还剩 4 元", "我已经知道最终答案了")),
    ("full-width colon on final answer", "Thought: done\nFinal Answer：42", ParsedFinal("42", "done")),
    # -- tool name drift
    ("tool name in backticks", f"Action: `calculator`\nAction Input: {ADD_JSON}", act()),
    ("tool name in brackets", f"Action: [calculator]\nAction Input: {ADD_JSON}", act()),
    ("tool name in quotes", f'Action: "calculator"\nAction Input: {ADD_JSON}', act()),
    ("tool name in wrong case", f"Action: Calculator\nAction Input: {ADD_JSON}", act()),
    ("tool name shouting", f"Action: CALCULATOR\nAction Input: {ADD_JSON}", act()),
    ("tool name with a full stop", f"Action: calculator.\nAction Input: {ADD_JSON}", act()),
    ("unknown tool is kept for the toolbox to answer", f"Action: weather\nAction Input: {{\"city\": \"北京\"}}",
     act({"city": "北京"}, tool="weather")),
    # -- call syntax and bare values
    ("keyword call syntax", 'Thought: t\nAction: calculator(operation="add", a=15, b=27)', act(thought="t")),
    ("positional call syntax", 'Thought: t\nAction: calculator("add", 15, 27)', act(thought="t")),
    ("single-quoted call syntax", "Action: calculator(operation='add', a=15, b=27)", act()),
    ("call syntax for a one-parameter tool", 'Action: calculate("15 + 27")', act({"expression": "15 + 27"}, tool="calculate")),
    ("bare value for a one-parameter tool", "Action: calculate\nAction Input: 15 + 27",
     act({"expression": "15 + 27"}, tool="calculate")),
    ("quoted bare value", 'Action: calculate\nAction Input: "50 - 3*12 - 2*5"',
     act({"expression": "50 - 3*12 - 2*5"}, tool="calculate")),
    ("fenced bare value", "Action: calculate\nAction Input: ```\n2*3\n```", act({"expression": "2*3"}, tool="calculate")),
    ("a tool without parameters needs no input", "Thought: what time is it\nAction: now", act({}, "what time is it", "now")),
    ("empty object for a tool without parameters", "Action: now\nAction Input: {}", act({}, tool="now")),
    # -- invented observations and both action and answer
    ("invented observation is cut off with the fake answer after it",
     f"Thought: t\nAction: calculator\nAction Input: {ADD_JSON}\nObservation: 43\nThought: done\nFinal Answer: 43",
     act(thought="t")),
    ("invented observation with a full-width colon",
     f"Action: calculator\nAction Input: {ADD_JSON}\nObservation：43", act()),
    ("action and final answer in one reply: the action wins",
     f"Thought: t\nAction: calculator\nAction Input: {ADD_JSON}\nFinal Answer: 42", act(thought="t")),
    ("a reply that starts with an observation has nothing left", "Observation: 42\nFinal Answer: 42",
     ParseFailure("empty")),
    # -- final answers
    ("final answer", "Thought: I now know the final answer\nFinal Answer: 42",
     ParsedFinal("42", "I now know the final answer")),
    ("final answer alone", "Final Answer: 42", ParsedFinal("42")),
    ("multi-line final answer", "Thought: t\nFinal Answer: Step 1: 3*12 = 36\n\nHe has 4 yuan left.",
     ParsedFinal("Step 1: 3*12 = 36\n\nHe has 4 yuan left.", "t")),
    ("final answer in a fence", "Thought: t\nFinal Answer:\n```\n42\n```", ParsedFinal("42", "t")),
    ("colon inside the thought", "Thought: the plan: add\nFinal Answer: 42", ParsedFinal("42", "the plan: add")),
    ("first final answer wins", "Final Answer: 42\nFinal Answer: 43", ParsedFinal("42")),
    # -- what cannot be used: a reason the agent turns into a corrective observation
    ("empty reply", "", ParseFailure("empty")),
    ("whitespace only", "  \n\n\t ", ParseFailure("empty")),
    ("only prose", "I think the answer is probably 42.",
     ParseFailure("no_action", thought="I think the answer is probably 42.")),
    ("action without input", "Thought: t\nAction: calculator", ParseFailure("no_input", {"tool": "calculator"}, "t")),
    ("action with an empty input", "Thought: t\nAction: calculator\nAction Input:   ",
     ParseFailure("no_input", {"tool": "calculator"}, "t")),
    ("input without action", f"Thought: t\nAction Input: {ADD_JSON}", ParseFailure("no_action", thought="t")),
    ("empty action", f"Thought: t\nAction:\nAction Input: {ADD_JSON}", ParseFailure("no_action", thought="t")),
    ("empty final answer", "Thought: t\nFinal Answer:", ParseFailure("empty_answer", thought="t")),
    ("blank final answer", "Thought: t\nFinal Answer:    \n\n", ParseFailure("empty_answer", thought="t")),
]

FAILURES = [  # the exact wording of JSON errors is the json module's; the reason is ours
    ("invalid json", 'Action: calculator\nAction Input: {"operation": "add", "a": 15, "b": }'),
    ("truncated json", 'Action: calculator\nAction Input: {"operation": "add", "a": 15,'),
    ("unquoted keys and values", "Action: calculator\nAction Input: {operation: add, a: 15, b: 27}"),
    ("json array instead of object", "Action: calculator\nAction Input: [\"add\", 15, 27]"),
    ("a string instead of an object", 'Action: calculator\nAction Input: "add 15 and 27"'),
    ("too many positional arguments", 'Action: calculator("add", 1, 2, 3)'),
    ("unhashable key", "Action: calculator\nAction Input: {[1]: 2}"),
]


@pytest.mark.parametrize("reply, expected", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_parse_reply(reply, expected):
    assert parse_reply(reply, PARAMS) == expected


@pytest.mark.parametrize("reply", [c[1] for c in FAILURES], ids=[c[0] for c in FAILURES])
def test_unusable_input_is_a_bad_input_failure(reply):
    parsed = parse_reply(reply, PARAMS)
    assert isinstance(parsed, ParseFailure)
    assert parsed.reason == "bad_input"
    assert parsed.values["error"]


def test_json_error_says_where():
    parsed = parse_reply('Action: calculator\nAction Input: {"operation": "add", "a": 15, "b": }', PARAMS)
    assert parsed.values["error"].startswith("Expecting value at character")


def test_without_params_tool_names_are_kept_as_written():
    assert parse_reply(f"Action: Calculator\nAction Input: {ADD_JSON}") == act(tool="Calculator")
    assert parse_reply("Action: calculate\nAction Input: 2*3") == ParseFailure("bad_input", {"error": "no JSON object found"})


def test_the_docstring_documents_that_the_action_wins():
    import tao.agents.text_parser as module

    assert "both an Action and a Final Answer runs the Action" in module.__doc__


def test_cut_invented_observation():
    assert cut_invented_observation("Action: x\nObservation: 1\nFinal Answer: 1") == "Action: x"
    assert cut_invented_observation("no labels here") == "no labels here"
    assert cut_invented_observation("The word observation: inline stays") == "The word observation: inline stays"


@pytest.mark.parametrize("raw, names, expected", [
    ("", ["a"], (None, None)),
    ('{"a": 1}', ["a"], ({"a": 1}, None)),
    ("a=1, b='x'", ["a", "b"], ({"a": 1, "b": "x"}, None)),
    ("(1, 'x')", ["a", "b"], ({"a": 1, "b": "x"}, None)),
    ("hello", ["text"], ({"text": "hello"}, None)),
    ("hello", ["a", "b"], (None, "no JSON object found")),
])
def test_parse_arguments(raw, names, expected):
    assert parse_arguments(raw, names) == expected


# -- never raises ---------------------------------------------------------------------------

FRAGMENTS = [
    "Thought:", "Action:", "Action Input:", "Final Answer:", "Observation:", "思考：", "行动：", "行动输入：",
    "最终答案：", "**Action**:", "action input：", "{", "}", "[", "]", "(", ")", "'", '"', "```", "```json",
    "\n", "\r\n", " ", "\t", "=", ",", ":", "：", "*", "#", ">", "`", "\\", "\x00", "calculator", "calculate",
    "now", "Calculator(", "true", "null", "None", "{[1]: 2}", "{{1}: 2}", "a=", "1", "-" * 50, "(" * 60,
    "[" * 60, "1e999", "😀", "\ud800", "\u200b", "\ufeff", "lambda", "__import__('os')", '{"a": ',
]


def garbage(rng: random.Random) -> str:
    parts = []
    for _ in range(rng.randint(0, 30)):
        r = rng.random()
        if r < 0.6:
            parts.append(rng.choice(FRAGMENTS))
        elif r < 0.8:  # any code point, surrogates and astral planes included
            parts.append("".join(chr(rng.randint(0, 0x2FFFF)) for _ in range(rng.randint(1, 6))))
        else:
            parts.append("".join(chr(rng.randint(32, 126)) for _ in range(rng.randint(1, 10))))
    return "".join(parts)


def test_random_garbage_never_raises():
    rng = random.Random(20240501)
    for i in range(600):
        text = garbage(rng)
        params = PARAMS if i % 3 else None
        parsed = parse_reply(text, params)
        assert isinstance(parsed, (ParsedAction, ParsedFinal, ParseFailure)), text
        if isinstance(parsed, ParsedAction):
            assert isinstance(parsed.arguments, dict)


@pytest.mark.parametrize("text", [
    "Action: calculator\nAction Input: {'a': " + "-" * 5000 + "1}",
    "Action: calculator(a=" + "-" * 5000 + "1)",
    "Action: calculator(a=" + "[" * 100 + "]" * 100 + ")",
    "Action: calculator\nAction Input: {'a': " + "[" * 3000 + "}",
    "Action: calculate(" + "(" * 1000 + ")",
    "Action: calculator(\ud800)",
    "Action: calculator\nAction Input: {{1}: 2}",
    "Action: calculator(a={[1]: 2})",
    "Action: calculator\nAction Input: a=\x00",
    "Thought: " + "x" * 100_000 + "\nFinal Answer: 1",
])
def test_hostile_replies_do_not_raise(text):
    assert isinstance(parse_reply(text, PARAMS), (ParsedAction, ParsedFinal, ParseFailure))
