"""The embedded model's own tool-calling form (``LocalModel(tool_format="native")``): the chat
template's tools section, ``<tool_call>`` blocks held by a grammar, or an answer in plain text.
The grammar is checked with llama.cpp's own engine (``grammar_check``), no model decoded."""

from __future__ import annotations

from pathlib import Path

import pytest
from grammar_check import accepts

from tao import calculate, calculator
from tao import grammar as grammars
from tao.messages import Message, ToolCall
from tao.models import native_tools


def call(name, args):
    import json

    return f'<tool_call>\n{{"name": "{name}", "arguments": {json.dumps(args)}}}\n</tool_call>'


def test_the_grammar_takes_calls_in_the_models_own_form_or_plain_text():
    gbnf = grammars.native_tools_grammar([calculate.spec, calculator.spec])
    one = call("calculate", {"expression": "2+3*4"})
    assert accepts(gbnf, one)
    assert accepts(gbnf, one + "\n" + call("calculator", {"operation": "add", "a": 1, "b": 2}))
    assert accepts(gbnf, "Li Bai wrote it.")  # no tool fits: an answer, no call
    assert accepts(gbnf, "《静夜思》的作者是李白。")
    assert not accepts(gbnf, call("search", {"q": "x"}))  # no such tool
    assert not accepts(gbnf, call("calculate", {"expr": "1"}))  # not its arguments
    assert not accepts(gbnf, "<b>bold</b>")  # an answer does not start like a tag
    many = "\n".join([one] * (grammars.MAX_CALLS + 1))
    assert not accepts(gbnf, many)


def test_a_reply_is_its_calls_in_order_or_its_text():
    reply = native_tools.read(call("calculate", {"expression": "17*23"}) + "\n"
                              + call("calculate", {"expression": "144/12"}))
    assert [(c.name, c.arguments) for c in reply.tool_calls] == [
        ("calculate", {"expression": "17*23"}), ("calculate", {"expression": "144/12"})]
    same = call("calculate", {"expression": "1"})
    assert len(native_tools.read(same + "\n" + same).tool_calls) == 1  # said twice, run once
    answer = native_tools.read("  Jupiter is the largest planet.\n")
    assert answer.content == "Jupiter is the largest planet." and not answer.tool_calls


def test_a_cut_or_broken_call_comes_back_empty_so_the_agent_asks_again():
    cut = native_tools.read('<tool_call>\n{"name": "calculate", "arguments": {"expre')
    assert cut.content == "" and not cut.tool_calls
    broken = native_tools.read('<tool_call>\n["calculate"]\n</tool_call>')
    assert broken.content == "" and not broken.tool_calls
    deep = native_tools.read("<tool_call>\n" + "[" * 5000 + "\n</tool_call>")
    assert not deep.tool_calls


def test_history_goes_to_the_template_as_tool_calls_and_tool_turns():
    messages = [Message.system("s"), Message.user("2+3*4?"),
                Message.assistant("", [ToolCall("1", "calculate", {"expression": "2+3*4"})]),
                Message.tool("14", "1", "calculate"), Message.assistant("14")]
    wire = native_tools.wire(messages)
    assert wire[2] == {"role": "assistant", "content": "", "tool_calls": [
        {"type": "function", "function": {"name": "calculate", "arguments": {"expression": "2+3*4"}}}]}
    assert wire[3] == {"role": "tool", "content": "14"} and wire[4]["content"] == "14"
    tools = native_tools.template_tools([calculate.spec])
    assert tools[0]["function"]["name"] == "calculate" and "parameters" in tools[0]["function"]


def test_an_unknown_tool_format_is_refused_by_name(monkeypatch):
    from tao.models.local import LocalModel

    monkeypatch.setattr("tao.models.local.ensure_gguf", lambda name: Path(__file__))
    with pytest.raises(ValueError, match="tool_format must be one of"):
        LocalModel(tool_format="xml")
    monkeypatch.setenv("TAO_LOCAL_TOOLS", "native")
    assert LocalModel().tool_format == "native"
