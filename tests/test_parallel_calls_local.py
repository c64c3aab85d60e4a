"""Several tool calls in one reply of the embedded model: a ``calls`` list the model picks after
its thought, as the grammar allows (BFCL's parallel categories; an OpenAI model returns several
``tool_calls`` the same way). The grammar is checked with llama.cpp's own engine
(``grammar_check``), no model decoded."""

from __future__ import annotations

import json

from grammar_check import accepts

from tao import ReActAgent, calculate, calculator, tool
from tao import grammar as grammars
from tao.messages import Message
from tao.models.base import Model, ModelResponse
from tao.models.local import LocalModel, _read_action

CALL = '{"thought": "%s", "tool": "calculate", "arguments": {"expression": "%s"}}'
FINAL = '{"thought": "done", "final_answer": "42"}'


def calls(*expressions, thought="at once"):
    inner = ", ".join('{"tool": "calculate", "arguments": {"expression": "%s"}}' % e
                      for e in expressions)
    return '{"thought": "%s", "calls": [%s]}' % (thought, inner)


def test_the_grammar_takes_one_call_a_list_of_calls_or_a_final_answer():
    gbnf = grammars.action_grammar([calculate.spec, calculator.spec])
    assert accepts(gbnf, CALL % ("a", "1+1"))
    assert accepts(gbnf, calls("1", "2"))
    assert accepts(gbnf, calls(*[str(i) for i in range(grammars.MAX_CALLS)]))
    assert not accepts(gbnf, calls(*[str(i) for i in range(grammars.MAX_CALLS + 1)]))
    assert not accepts(gbnf, calls("1"))  # one call is written as one call
    assert accepts(gbnf, FINAL)
    assert not accepts(gbnf, CALL % ("a", "1") + "\n" + CALL % ("b", "2"))  # one object a reply
    assert not accepts(gbnf, CALL % ("a", "1") + "\n")  # a newline after it is not a new call


def test_the_json_decision_protocol_has_no_list_of_calls():
    gbnf = grammars.decision_grammar([calculate.spec])
    one = '{"thought": "t", "action": "calculate", "action_input": {"expression": "1"}}'
    assert accepts(gbnf, one)
    assert not accepts(gbnf, calls("1", "2"))


def test_a_list_of_calls_is_several_calls_in_order():
    reply = _read_action(calls("17*23", "144/12", thought="both at once"))
    assert reply.content == "both at once"
    assert [(c.name, c.arguments) for c in reply.tool_calls] == [
        ("calculate", {"expression": "17*23"}), ("calculate", {"expression": "144/12"})]


def test_the_same_call_twice_in_one_reply_runs_once():
    reply = _read_action(calls("1+1", "1+1", "2"))
    assert [c.arguments for c in reply.tool_calls] == [{"expression": "1+1"}, {"expression": "2"}]


def test_a_list_of_calls_cut_off_or_malformed_asks_again():
    assert _read_action(calls("1", "2")[:-10]).content == ""
    reply = _read_action('{"thought": "t", "calls": [1, "x"]}')  # not calls: nothing to run
    assert reply.tool_calls == [] and reply.content == "t"


def test_the_history_shows_several_calls_as_the_model_wrote_them():
    reply = _read_action(calls("1", "2", thought="both"))
    wire = LocalModel._wire(object.__new__(LocalModel), [Message.user("q"), reply], None)
    assert json.loads(wire[1]["content"]) == json.loads(calls("1", "2", thought="both"))
    one = _read_action(CALL % ("one", "3"))
    wire = LocalModel._wire(object.__new__(LocalModel), [Message.user("q"), one], None)
    assert json.loads(wire[1]["content"]) == json.loads(CALL % ("one", "3"))


class LocalLike(Model):
    """The embedded model's reply path without the weights: text in, ``_read_action`` out."""

    name, supports_grammar = "local-like", True

    def __init__(self, replies):
        self.replies = list(replies)

    async def stream(self, messages, **kwargs):
        from tao.messages import Usage

        text = self.replies.pop(0)
        yield text
        message = _read_action(text)
        yield ModelResponse(message, Usage(1, 1), "tool_calls" if message.tool_calls else "stop")


def test_react_runs_every_call_of_one_reply_and_answers_from_all_results():
    seen = []

    @tool(side_effects=False)
    def weather(city: str) -> str:
        """Today's weather in a city."""
        seen.append(city)
        return {"Paris": "sunny, 21 C", "Oslo": "rain, 9 C"}[city]

    two = ('{"thought": "both cities", "calls": [{"tool": "weather", "arguments": {"city": "Paris"}}, '
           '{"tool": "weather", "arguments": {"city": "Oslo"}}]}')
    model = LocalLike([two, '{"thought": "t", "final_answer": "Paris"}'])
    result = ReActAgent(model, [weather]).run("Paris or Oslo for a walk today?")
    assert seen == ["Paris", "Oslo"] and result.answer == "Paris"
    assert (result.turns, result.tool_calls) == (2, 2)


def test_the_prompt_tells_of_several_calls_only_when_asked():
    """Off by default: with such lines the 1.5B solved 11-12 of the 16 calculator tasks, not 13."""
    off = LocalModel._tool_section([calculate.spec], "en")
    on = LocalModel._tool_section([calculate.spec], "en", parallel=True)
    assert '"calls"' not in off and "{parallel}" not in off
    assert '"calls": [' in on and on.replace(on[on.index("\nSeveral"):on.index("...]}") + 5], "") == off
    assert "同时调用" in LocalModel._tool_section([calculate.spec], "zh", parallel=True)
