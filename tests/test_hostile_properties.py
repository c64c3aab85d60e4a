"""Property-based: whatever text a model writes and whatever arguments reach a tool - surrogates,
control characters, deep nesting, huge numbers, half-written JSON - the parsers return their
documented results and ``Toolbox.execute`` a ``ToolResult``; nothing raises."""

from __future__ import annotations

import asyncio
import io
import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tao import calculate, calculator, tool
from tao.agents.text_parser import ParsedAction, ParsedFinal, ParseFailure, parse_arguments, parse_reply
from tao.events import FinalAnswer
from tao.messages import Message, ToolCall
from tao.models.local import _read_action
from tao.plan.schema import Plan, PlanInvalid, parse_plan
from tao.safe_json import dumps, loads, too_deep
from tao.sinks import JsonlTrace, read_trace
from tao.tools.base import Toolbox, ToolResult

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

ANY_CHAR = st.characters(exclude_categories=())  # lone surrogates and control characters included
PIECES = st.sampled_from([
    "Thought:", "Action:", "Action Input:", "Final Answer:", "Observation:", "行动：", "最终答案：",
    "**Action:**", "\n", "{", "}", "[", "]", "(", ")", '"', "'", ",", ":", "=", "\\", "```",
    "```json\n", "calculator", "calculate", "lookup", "operation", '"a"', "1e999", "-0", "NaN",
    "Infinity", "true", "null", "None", "9" * 5000, "1+" * 3000 + "1", "\x00", "\x1b[31m", "\udcff",
    "\ud83d", "\u202e", "\ufeff",
])
DEEP = st.builds(lambda n, o: o * n, st.integers(1, 3000), st.sampled_from(["[", "{", "(", '{"a":', "[{"]))
TEXT = st.lists(st.one_of(st.text(ANY_CHAR, max_size=12), PIECES, DEEP), max_size=10).map("".join)
PARAMS = {"calculator": ["operation", "a", "b"], "calculate": ["expression"], "lookup": []}


def nested(depth: int) -> list:
    value: list = []
    for _ in range(depth - 1):
        value = [value]
    return value


SCALARS = (st.none() | st.booleans() | st.integers() | st.floats() | st.text(ANY_CHAR, max_size=8)
           | st.just(10**4000) | st.just(-(2**64)))
VALUES = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=3)
                      | st.dictionaries(st.text(ANY_CHAR, max_size=4), inner, max_size=3), max_leaves=12)
ARGUMENTS = st.dictionaries(st.sampled_from(["operation", "a", "b", "expression", "x", "y"])
                            | st.text(ANY_CHAR, max_size=4),
                            VALUES | st.integers(1, 3000).map(nested), max_size=4)


@tool
def echo(x: Any = None, y: list | None = None) -> Any:
    """Give ``x`` back as it came: the value the model sent becomes the observation.

    Args:
        x: any value
        y: a list
    """
    return x


TOOLBOX = Toolbox([calculator, calculate, echo])


@SETTINGS
@given(TEXT)
def test_parse_reply_gives_an_action_an_answer_or_a_failure(text):
    parsed = parse_reply(text, PARAMS)
    assert isinstance(parsed, (ParsedAction, ParsedFinal, ParseFailure))
    if isinstance(parsed, ParsedAction):
        assert isinstance(parsed.arguments, dict) and not too_deep(parsed.arguments)


@SETTINGS
@given(TEXT, st.sampled_from([[], ["expression"], ["operation", "a", "b"]]))
def test_parse_arguments_gives_arguments_or_a_reason(text, params):
    arguments, error = parse_arguments(text, params)
    assert arguments is None or error is None
    assert arguments is None or (isinstance(arguments, dict) and not too_deep(arguments))
    assert error is None or isinstance(error, str)


@SETTINGS
@given(st.sampled_from(["calculator", "calculate", "echo", "nope"]), ARGUMENTS)
def test_toolbox_execute_gives_a_tool_result_for_any_arguments(name, arguments):
    res = asyncio.run(TOOLBOX.execute(ToolCall("1", name, arguments)))
    assert isinstance(res, ToolResult) and isinstance(res.content, str)
    dumps(res.content).encode("utf-8")  # what a trace writes of it is UTF-8


@SETTINGS
@given(ARGUMENTS)
def test_what_dumps_writes_loads_reads_back(value):
    assert isinstance(loads(dumps(value)), dict)


@SETTINGS
@given(st.text(ANY_CHAR))
def test_any_text_survives_a_trip_through_a_jsonl_trace(text):
    buf = io.StringIO()
    JsonlTrace(buf)(FinalAnswer(text, 1))
    buf.getvalue().encode("utf-8")
    [event] = read_trace(io.StringIO(buf.getvalue()))
    # what JSON means by the text: a high and a low surrogate in a row read back as one character
    assert event.text == json.loads(json.dumps(text))


@SETTINGS
@given(TEXT)
def test_a_plan_reply_is_a_plan_or_an_invalid_plan(text):
    try:
        assert isinstance(parse_plan(text, TOOLBOX), Plan)
    except PlanInvalid:
        pass


@SETTINGS
@given(TEXT)
def test_a_local_models_action_reply_is_a_message(text):
    assert isinstance(_read_action(text), Message)
