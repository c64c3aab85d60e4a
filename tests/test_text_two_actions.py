"""Of two Actions in one text reply, the first runs (``tao.agents.text_parser``'s rules): the
second was written before the observation of the first, so it is a guess about a result the
model had not seen yet - and only one call runs per turn. Each Action keeps its own input: the
first tool never runs with the second one's arguments."""

from __future__ import annotations

import json

from tao import ReActAgent, ScriptedModel, calculator
from tao.agents.text_parser import ParsedAction, parse_reply

PARAMS = {"calculator": ["operation", "a", "b"], "write_file": ["path", "content"]}
ADD = {"operation": "add", "a": 15, "b": 27}
TIMES = {"operation": "multiply", "a": 42, "b": 2}


def two_actions(first: dict, second: dict) -> str:
    return (f"Thought: add first, then double it\n"
            f"Action: calculator\nAction Input: {json.dumps(first)}\n"
            f"Action: calculator\nAction Input: {json.dumps(second)}")


def test_the_first_of_two_actions_is_the_one_read_with_its_own_input():
    assert parse_reply(two_actions(ADD, TIMES), PARAMS) == ParsedAction(
        "calculator", ADD, "add first, then double it")
    assert parse_reply(two_actions(TIMES, ADD), PARAMS) == ParsedAction(
        "calculator", TIMES, "add first, then double it")


def test_the_first_of_two_different_tools_runs_even_when_the_second_has_no_input():
    reply = ("Thought: look, then write\nAction: calculator\nAction Input: "
             f"{json.dumps(ADD)}\nAction: write_file")
    assert parse_reply(reply, PARAMS) == ParsedAction("calculator", ADD, "look, then write")


def test_in_seed_002_s_form_the_first_file_is_written():
    reply = ("Thought: two files at once\nAction: write_file【a.txt】\n```\nfirst\n```\n"
             "Action: write_file【b.txt】\n```\nsecond\n```")
    assert parse_reply(reply, PARAMS) == ParsedAction(
        "write_file", {"path": "a.txt", "content": "first"}, "two files at once")


def test_a_react_run_runs_the_first_action_once_and_the_model_reads_its_result():
    model = ScriptedModel([two_actions(ADD, TIMES), "Thought: done\nFinal Answer: 42"])
    result = ReActAgent(model, [calculator], protocol="text").run("15 + 27, then double it")
    assert result.answer == "42" and result.tool_calls == 1
    assert model.calls[1][-1].content.startswith("Observation: 42")  # 15 + 27, not 42 × 2
