"""Handoffs (issue 28, point 3): ``handoffs=[agent, ...]`` and ``name=`` on every agent.

The model sees ``transfer_to_<name>``; calling it ends this agent's run, a ``HandedOff`` event
says who takes over, and the target's answer is the run's. It works across architectures, the
target gets the conversation (through ``input_filter``), and a chain of handoffs is bounded.
"""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from tao import CodeActAgent, ReActAgent, ScriptedModel, calculator, tool_call
from tao.agents.handoffs import MAX_HANDOFFS, Handoff, remove_tools
from tao.events import HandedOff, RunFinished, RunStarted
from tao.plan.agent import PlanExecuteAgent


def speakers(events):
    return [e.agent for e in events if type(e) is RunStarted]


def transfer(to: str, reason: str = ""):
    return tool_call(f"transfer_to_{to}", reason=reason)


def test_a_react_triage_hands_to_a_codeact_analyst_whose_answer_ends_the_run():
    analyst = CodeActAgent(ScriptedModel(["```python\nfinal_answer(6 * 7)\n```"]), name="analyst")
    triage = ReActAgent(ScriptedModel([transfer("analyst", "needs code")]), name="triage",
                        handoffs=[analyst])
    events: list = []
    result = triage.run("What is 6 times 7?", sinks=[events.append])
    assert result.answer == "42" and result.status == "done"
    assert speakers(events) == ["triage", "analyst"]
    handed = [e for e in events if type(e) is HandedOff]
    assert [(h.source, h.target, h.reason, h.depth) for h in handed] == [
        ("triage", "analyst", "needs code", 1)]
    # one run to whoever watches: one RunFinished, the chain's whole spending in it
    finished = [e.result for e in events if type(e) is RunFinished]
    assert finished == [result] and result.handoff is None
    assert result.turns == 2  # the triage's turn and the analyst's
    assert handed[0].seq is not None


def test_the_result_counts_the_whole_chain():
    worker = ReActAgent(ScriptedModel([*[tool_call("calculator", operation="add", a=i, b=1)
                                         for i in range(4)], "done"]), [calculator], name="worker")
    alone = ReActAgent(ScriptedModel([*[tool_call("calculator", operation="add", a=i, b=1)
                                        for i in range(4)], "done"]), [calculator]).run("x")
    triage = ReActAgent(ScriptedModel([tool_call("calculator", operation="add", a=1, b=1),
                                       transfer("worker")]), [calculator], name="triage",
                        handoffs=[worker])
    result = triage.run("x")
    assert (result.answer, result.turns, result.tool_calls) == ("done", 2 + 5, 2 + 4)
    assert result.usage.total_tokens > alone.usage.total_tokens


def test_the_model_sees_one_transfer_tool_per_target():
    a, b = (ReActAgent(ScriptedModel([]), name=n) for n in ("billing", "tech support"))
    triage = ReActAgent(ScriptedModel([]), [calculator], handoffs=[a, b])
    assert triage.toolbox.names == ["calculator", "transfer_to_billing", "transfer_to_tech_support"]
    spec = triage.toolbox["transfer_to_billing"].spec
    assert "billing" in spec.description and list(spec.parameters["properties"]) == ["reason"]


def test_a_plan_agent_can_take_over():
    plan = ('{"steps": [{"id": "step1", "description": "add", "tool": "calculator", '
            '"args": {"operation": "add", "a": 40, "b": 2}}], "answer": "$step1"}')
    planner = PlanExecuteAgent(ScriptedModel([plan]), [calculator], name="planner")
    triage = ReActAgent(ScriptedModel([transfer("planner")]), name="triage", handoffs=[planner])
    events: list = []
    assert triage.run("40 + 2?", sinks=[events.append]).answer == "42"
    assert speakers(events) == ["triage", "planner"]


def test_the_target_continues_the_conversation_through_the_input_filter():
    seen: list = []

    def keep(messages):
        seen.append([m.role for m in messages])
        return messages

    helper = ReActAgent(ScriptedModel(["the answer"]), name="helper")
    script = [tool_call("calculator", operation="add", a=1, b=1), transfer("helper")]
    triage = ReActAgent(ScriptedModel(script), [calculator], name="triage",
                        handoffs=[Handoff(helper, input_filter=keep)])
    result = triage.run("1 + 1, then explain")
    assert result.answer == "the answer"
    assert seen == [["assistant", "tool"]]  # the calculator's call and result, not the transfer
    asked = helper.model.calls[0]  # what the helper's model was sent
    assert [m.role for m in asked] == ["system", "assistant", "tool", "user"]
    assert asked[2].content == "2" and asked[3].content == "1 + 1, then explain"


def test_remove_tools_keeps_only_the_words():
    from tao.messages import Message, ToolCall

    messages = [Message.assistant("let me look"), Message.assistant("", [ToolCall("1", "f", {})]),
                Message.tool("1", "f", "x")]
    assert [m.content for m in remove_tools(messages)] == ["let me look"]


def test_a_codeact_agent_hands_over_from_its_code():
    writer = ReActAgent(ScriptedModel(["a poem"]), name="writer")
    coder = CodeActAgent(ScriptedModel(['```python\ntransfer_to_writer("not code")\n```']),
                         name="coder", handoffs=[writer])
    events: list = []
    assert coder.run("write a poem", sinks=[events.append]).answer == "a poem"
    assert speakers(events) == ["coder", "writer"]


def test_two_agents_that_pass_the_task_back_are_stopped():
    ping = ReActAgent(ScriptedModel([transfer("pong")] * 3 + ["ping answers"]), name="ping")
    pong = ReActAgent(ScriptedModel([transfer("ping")] * 3 + ["pong answers"]), name="pong",
                      handoffs=[ping])
    ping.named(None, [pong])
    events: list = []
    result = ping.run("who answers?", sinks=[events.append])
    assert len([e for e in events if type(e) is HandedOff]) == MAX_HANDOFFS
    assert result.status == "done" and result.answer == "pong answers"
    refused = result.messages[-2].content
    assert f"{MAX_HANDOFFS} handoffs were made already" in refused


def test_deps_and_the_typed_output_go_along():
    class Answer(BaseModel):
        value: int

    analyst = ReActAgent(ScriptedModel(['{"value": 42}']), name="analyst")
    triage = ReActAgent(ScriptedModel([transfer("analyst")]), name="triage", handoffs=[analyst])
    assert triage.run("?", output_type=Answer).output == Answer(value=42)


def test_names_must_differ_and_not_be_empty():
    a1, a2 = ReActAgent(ScriptedModel([]), name="a"), ReActAgent(ScriptedModel([]), name="a")
    with pytest.raises(ValueError, match="transfer_to_a"):
        ReActAgent(ScriptedModel([]), handoffs=[a1, a2])
    with pytest.raises(ValueError, match="name"):
        ReActAgent(ScriptedModel([]), name=" ")


def test_the_whole_chain_is_one_run_to_whoever_watches():
    analyst = ReActAgent(ScriptedModel(["42"]), name="analyst")
    triage = ReActAgent(ScriptedModel([transfer("analyst")]), name="triage", handoffs=[analyst])
    events: list = []
    triage.run("?", sinks=[events.append])
    assert len({e.run_id for e in events}) == 1  # the web page and a trace follow one id
    assert [e.seq for e in events] == list(range(1, len(events) + 1))


def test_a_resumed_chain_does_not_run_the_targets_side_effects_again(tmp_path):
    from tao import tool

    sent: list = []

    @tool
    def send_email(to: str) -> str:
        """Send an email.

        Args:
            to: the address
        """
        sent.append(to)
        return "sent"

    journal = str(tmp_path / "runs.db")

    def build():
        mailer = ReActAgent(ScriptedModel([tool_call("send_email", to="a@b.c"), "done"]),
                            [send_email], name="mailer", journal=journal)
        return ReActAgent(ScriptedModel([transfer("mailer")]), name="triage",
                          handoffs=[mailer], journal=journal)

    build().run("mail a@b.c")
    from tao.runs import Journal

    triage_id = next(r["run_id"] for r in Journal(journal).runs() if "." not in r["run_id"])
    again = build().resume(triage_id)
    assert again.answer == "done" and sent == ["a@b.c"]


def test_the_session_reaches_the_target(tmp_path):
    from tao import Session
    from tao.messages import Message

    session = Session("s", path=tmp_path / "s.db")
    session.add([Message.user("My name is Ann."), Message.assistant("Hi Ann.")])
    helper = ReActAgent(ScriptedModel(["Ann"]), name="helper")
    triage = ReActAgent(ScriptedModel([transfer("helper")]), name="triage", handoffs=[helper])
    triage.run("What is my name?", session=session)
    assert "My name is Ann." in [m.content for m in helper.model.calls[0]]
    assert [m.content for m in session.messages()][-2:] == ["What is my name?", "Ann"]
