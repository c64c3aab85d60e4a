"""Several tool calls in one reply of the embedded model: one call object a line, as the grammar
allows (BFCL's parallel categories; an OpenAI model returns several ``tool_calls`` the same way).
The grammar is checked with llama.cpp's own engine (``grammar_check``), no model decoded."""

from __future__ import annotations

from grammar_check import accepts

from tao import ReActAgent, calculate, calculator, tool
from tao import grammar as grammars
from tao.models.local import _read_action

CALL = '{"thought": "%s", "tool": "calculate", "arguments": {"expression": "%s"}}'
FINAL = '{"thought": "done", "final_answer": "42"}'


def test_the_grammar_takes_one_call_a_line_up_to_the_limit_and_one_final_answer():
    gbnf = grammars.action_grammar([calculate.spec, calculator.spec])
    assert accepts(gbnf, CALL % ("a", "1+1"))
    assert accepts(gbnf, "\n".join(CALL % (i, f"{i}*2") for i in range(grammars.MAX_CALLS)))
    assert not accepts(gbnf, "\n".join(CALL % (i, f"{i}*2") for i in range(grammars.MAX_CALLS + 1)))
    assert accepts(gbnf, FINAL)
    assert not accepts(gbnf, FINAL + "\n" + FINAL)  # an answer is the whole reply
    assert not accepts(gbnf, CALL % ("a", "1") + "\n" + FINAL)  # no answer before the results
    assert not accepts(gbnf, CALL % ("a", "1") + CALL % ("b", "2"))  # a line each


def test_the_json_decision_protocol_stays_one_object():
    gbnf = grammars.decision_grammar([calculate.spec])
    one = '{"thought": "t", "action": "calculate", "action_input": {"expression": "1"}}'
    assert accepts(gbnf, one) and not accepts(gbnf, one + "\n" + one)


def test_a_reply_of_several_lines_is_several_calls_in_order():
    reply = _read_action(CALL % ("both at once", "17*23") + "\n" + CALL % ("b", "144/12"))
    assert reply.content == "both at once"
    assert [(c.name, c.arguments) for c in reply.tool_calls] == [
        ("calculate", {"expression": "17*23"}), ("calculate", {"expression": "144/12"})]


def test_a_newline_or_brace_inside_a_string_does_not_split_a_call():
    reply = _read_action('{"thought": "line one\nline two {", "tool": "note", "arguments": '
                         '{"text": "a}\n{b\\"c"}}\n' + CALL % ("x", "1"))
    assert [c.arguments for c in reply.tool_calls] == [{"text": "a}\n{b\"c"}, {"expression": "1"}]
    assert reply.content == "line one\nline two {"


def test_a_call_cut_off_by_max_tokens_is_dropped_and_the_whole_ones_kept():
    reply = _read_action(CALL % ("a", "1+1") + '\n{"thought": "b", "tool": "calc')
    assert [c.arguments for c in reply.tool_calls] == [{"expression": "1+1"}]
    assert _read_action('{"thought": "b", "tool": "calc').content == ""  # nothing whole: ask again


class LocalLike:
    """The embedded model's reply path without the weights: text in, ``_read_action`` out."""

    name, supports_grammar = "local-like", True

    def __init__(self, replies):
        self.replies = list(replies)

    async def stream(self, messages, **kwargs):
        from tao.messages import Usage
        from tao.models.base import ModelResponse

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

    two = "\n".join('{"thought": "both cities", "tool": "weather", "arguments": {"city": "%s"}}' % c
                    for c in ("Paris", "Oslo"))
    from tao.models.base import Model

    model = type("M", (LocalLike, Model), {})([two, '{"thought": "t", "final_answer": "Paris"}'])
    result = ReActAgent(model, [weather]).run("Paris or Oslo for a walk today?")
    assert seen == ["Paris", "Oslo"] and result.answer == "Paris"
    assert (result.turns, result.tool_calls) == (2, 2)


def test_the_same_call_twice_in_one_reply_runs_once():
    reply = _read_action(CALL % ("a", "1+1") + "\n" + CALL % ("again", "1+1") + "\n" + CALL % ("b", "2"))
    assert [c.arguments for c in reply.tool_calls] == [{"expression": "1+1"}, {"expression": "2"}]


def test_text_around_the_objects_is_not_the_grammars_form():
    assert _read_action("Sure! " + CALL % ("a", "1")).tool_calls == []
    assert _read_action("[" + CALL % ("a", "1") + "]").tool_calls == []


def test_the_history_shows_each_call_on_its_own_line_with_the_thought_once():
    from tao.messages import Message
    from tao.models.local import LocalModel

    reply = _read_action(CALL % ("both", "1") + "\n" + CALL % ("second", "2"))
    wire = LocalModel._wire(object.__new__(LocalModel), [Message.user("q"), reply], None)
    assert wire[1]["content"].splitlines() == [
        '{"thought": "both", "tool": "calculate", "arguments": {"expression": "1"}}',
        '{"thought": "", "tool": "calculate", "arguments": {"expression": "2"}}']
