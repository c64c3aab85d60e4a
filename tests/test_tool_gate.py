"""The embedded model's tool gate (``tao.models.tool_gate``): before it answers a user's message
with tools at hand, the model is asked whether one of them fits, and below
``LocalModel.tool_gate`` its reply may only be a final answer. The engine is a stand-in here,
so what is checked is the decision and what reaches llama.cpp; the real model's side is the
last test."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from tao import ReActAgent, calculate, calculator
from tao.messages import Message, ToolCall
from tao.models import tool_gate
from tao.models.local import LocalModel


class Engine:
    """Answers ``first_token`` with a fixed P("yes") and ``generate`` with a fixed reply,
    keeping every request."""

    def __init__(self, p_yes: float, reply: str):
        self.p_yes, self.reply, self.requests = p_yes, reply, []

    def call(self, op, req=None, on_text=None, cancelled=None):
        self.requests.append((op, req))
        if op == "first_token":
            return {"p": {"yes": self.p_yes * 0.9, "Yes": self.p_yes * 0.1,
                          "no": (1 - self.p_yes) * 0.9, "No": (1 - self.p_yes) * 0.1},
                    "prompt_tokens": 50}
        if op == "generate":
            on_text(self.reply)
            return {"prompt_tokens": 100, "completion_tokens": 10, "finish": "stop"}
        if op == "count":
            return len(req["text"]) // 4
        if op == "render":
            return json.dumps(req["wire"])
        raise AssertionError(f"unexpected engine request {op}")


@pytest.fixture
def model(monkeypatch):
    monkeypatch.setattr("tao.models.local.ensure_gguf", lambda name: Path(__file__))
    monkeypatch.delenv("TAO_LOCAL_TOOL_GATE", raising=False)
    monkeypatch.delenv("TAO_LOCAL_TOOLS", raising=False)

    def make(p_yes: float, reply: str, **kw) -> tuple[LocalModel, Engine]:
        m, engine = LocalModel(**kw), Engine(p_yes, reply)
        m.engine = lambda: engine  # type: ignore[method-assign]
        return m, engine
    return make


ANSWER = json.dumps({"thought": "I know this.", "final_answer": "Paris"})
CALL = json.dumps({"thought": "", "tool": "calculate", "arguments": {"expression": "17*23"}})


def grammar_of(engine: Engine) -> str:
    return next(req["grammar"] for op, req in engine.requests if op == "generate")


def test_a_question_no_tool_fits_is_answered_without_a_call(model):
    m, engine = model(0.4, ANSWER, tool_gate=0.72)
    result = ReActAgent(m, tools=[calculate, calculator]).run("What is the capital of France?")
    assert result.answer == "Paris" and result.tool_calls == 0
    assert m.gate_log == [pytest.approx(0.4)]
    assert '"tool"' not in grammar_of(engine)  # the reply could not have been a call
    asked = next(req for op, req in engine.requests if op == "first_token")
    assert "What is the capital of France?" in asked["wire"][-1]["content"]
    assert "- calculate:" in asked["wire"][-1]["content"]


def test_a_question_a_tool_fits_keeps_every_tool(model):
    m, engine = model(0.9, CALL, tool_gate=0.72)
    messages = [Message.system("s"), Message.user("What is 17*23?")]
    reply = asyncio.run(m.complete(messages, tools=[calculate.spec, calculator.spec]))
    assert [c.name for c in reply.message.tool_calls] == ["calculate"]
    assert '\\"calculate\\"' in grammar_of(engine)


def test_after_a_tool_result_the_model_is_not_asked_again(model):
    m, engine = model(0.1, ANSWER, tool_gate=0.72)
    messages = [Message.system("s"), Message.user("What is 17*23?"),
                Message.assistant("", [ToolCall("1", "calculate", {"expression": "17*23"})]),
                Message.tool("391", "1", "calculate")]
    asyncio.run(m.complete(messages, tools=[calculate.spec]))
    assert [op for op, _ in engine.requests] == ["generate"]
    assert '\\"calculate\\"' in grammar_of(engine)


def test_the_gate_is_a_setting_with_a_clear_error(model, monkeypatch):
    m, engine = model(0.1, CALL, tool_gate=0)  # off: never asked, the tools stay
    asyncio.run(m.complete([Message.user("What is 17*23?")], tools=[calculate.spec]))
    assert [op for op, _ in engine.requests] == ["generate"] and m.gate_log == []
    assert model(0.5, ANSWER)[0].tool_gate == 0  # opt-in until measured beyond BFCL
    monkeypatch.setenv("TAO_LOCAL_TOOL_GATE", "0.5")
    assert model(0.5, ANSWER)[0].tool_gate == 0.5
    with pytest.raises(ValueError, match="tool_gate is a probability"):
        model(0.5, ANSWER, tool_gate=1.5)
    monkeypatch.setenv("TAO_LOCAL_TOOL_GATE", "high")
    with pytest.raises(ValueError, match="TAO_LOCAL_TOOL_GATE is a probability.*'high'"):
        model(0.5, ANSWER)


def test_the_question_is_asked_in_the_users_language():
    tools = [calculate.spec]
    zh = tool_gate.wire([Message.user("《静夜思》的作者是谁？")], tools)
    assert "回答这个问题需要调用上面的某个函数吗" in zh[-1]["content"]
    assert "《静夜思》的作者是谁？" in zh[-1]["content"]
    en = tool_gate.wire([Message.user("Who wrote Hamlet?")], tools)
    assert "Does answering this question need a call" in en[-1]["content"]
    assert tool_gate.p_yes({"p": {"yes": 0.3, "Yes": 0.0, "no": 0.1, "No": 0.0}}) == pytest.approx(0.75)
    assert tool_gate.p_yes({"p": {"yes": 0, "Yes": 0, "no": 0, "No": 0}}) == 1.0  # no signal: tools stay


@pytest.mark.local_model
def test_the_real_model_answers_a_question_of_knowledge_with_no_tool_call(local_model):
    gated = LocalModel(tool_gate=0.72)  # shares the fixture's loaded weights (same file)
    result = ReActAgent(gated, tools=[calculate, calculator]).run("日本的首都是哪座城市？")
    assert result.tool_calls == 0 and "东京" in (result.answer or "")


# -- tool_choice="none": the reply may only answer, whatever the gate says ---------------------

def test_tool_choice_none_keeps_the_tools_in_the_prompt_but_the_reply_may_only_answer(model):
    """What a run asks once a model keeps making a call whose result it already has
    (``LoopContext.answer_now``, tests/test_answer_now.py)."""
    m, engine = model(1.0, json.dumps({"thought": "I have it", "final_answer": "30"}))
    messages = [Message.system("s"), Message.user("48 - 18?")]
    reply = asyncio.run(m.complete(messages, tools=[calculate.spec], tool_choice="none"))
    assert (reply.message.content, reply.message.tool_calls) == ("30", [])
    req = next(req for op, req in engine.requests if op == "generate")
    assert '"tool"' not in req["grammar"] and "final_answer" in req["grammar"]
    assert "calculate" in json.dumps(req["wire"], ensure_ascii=False)  # still shown


def test_tool_choice_none_in_the_native_form_is_free_text(model):
    m, engine = model(1.0, "The answer is 30.", tool_format="native")
    messages = [Message.system("s"), Message.user("48 - 18?")]
    reply = asyncio.run(m.complete(messages, tools=[calculate.spec], tool_choice="none"))
    assert (reply.message.content, reply.message.tool_calls) == ("The answer is 30.", [])
    assert next(req for op, req in engine.requests if op == "generate")["grammar"] is None
