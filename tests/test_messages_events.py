"""Messages and events survive a trip through JSON: a JSONL trace can be replayed into any sink."""

from __future__ import annotations

import dataclasses
import json

import pytest

from tao import Message, Result, ToolCall, Usage, events
from tao.events import (EVENT_TYPES, Action, Error, Event, FinalAnswer, ModelRetry, Observation,
                        RunFinished, RunStarted, Thought, TokenDelta, TurnStarted, event_from_dict)


def through_json(d: dict) -> dict:
    return json.loads(json.dumps(d, ensure_ascii=False))


CALL = ToolCall("call_1", "calculator", {"operation": "add", "a": 15, "b": 27})
BAD_CALL = ToolCall("call_2", "calculator", {}, parse_error="Expecting value: line 1 column 9")


# -- messages ---------------------------------------------------------------------------------

def test_tool_call_round_trip():
    assert CALL.to_dict() == {"id": "call_1", "name": "calculator",
                              "arguments": {"operation": "add", "a": 15, "b": 27}}
    assert ToolCall.from_dict(through_json(CALL.to_dict())) == CALL
    assert BAD_CALL.to_dict()["parse_error"] == "Expecting value: line 1 column 9"
    assert ToolCall.from_dict(through_json(BAD_CALL.to_dict())) == BAD_CALL


def test_usage_adds_and_round_trips():
    usage = Usage()
    usage.add(Usage(100, 7))
    usage.add(Usage(120, 9))
    usage.add(None)
    assert usage == Usage(220, 16) and usage.total_tokens == 236
    assert usage.to_dict() == {"prompt_tokens": 220, "completion_tokens": 16, "total_tokens": 236}
    assert Usage.from_dict(through_json(usage.to_dict())) == usage


MESSAGES = [
    Message.system("You are a careful assistant."),
    Message.user("小明有 50 元，还剩多少钱？"),
    Message.assistant("I should multiply first.", [CALL]),
    Message.assistant("", [CALL, BAD_CALL]),
    Message.tool("36", "call_1", "calculator"),
    Message.tool('{"city": "北京"}', "call_9"),
    Message.assistant("他还剩 4 元"),
    Message("user", ""),
]


@pytest.mark.parametrize("message", MESSAGES, ids=[f"{m.role}-{i}" for i, m in enumerate(MESSAGES)])
def test_message_round_trip(message):
    assert Message.from_dict(through_json(message.to_dict())) == message


def test_message_dicts_are_compact_and_readable():
    assert Message.user("hi").to_dict() == {"role": "user", "content": "hi"}
    assert Message.tool("36", "call_1", "calculator").to_dict() == {
        "role": "tool", "content": "36", "tool_call_id": "call_1", "name": "calculator"}
    assert Message.assistant("", [CALL]).to_dict()["tool_calls"] == [CALL.to_dict()]
    # OpenAI-style null content reads as empty text
    assert Message.from_dict({"role": "assistant", "content": None}) == Message.assistant("")


def test_message_constructors():
    m = Message.assistant("thinking", [CALL])
    assert (m.role, m.content, m.tool_calls, m.tool_call_id, m.name) == ("assistant", "thinking", [CALL], None, None)
    assert Message.assistant().tool_calls == []
    assert Message.assistant().tool_calls is not Message.assistant().tool_calls


# -- results ----------------------------------------------------------------------------------

RESULT = Result("他还剩 4 元", "done", 5, 4, Usage(1200, 80), 0.125, MESSAGES[:3] + [MESSAGES[4]])


def test_result_round_trip():
    d = RESULT.to_dict(with_messages=True)
    assert Result.from_dict(through_json(d)) == RESULT
    assert "messages" not in RESULT.to_dict()
    assert RESULT.ok


def test_result_to_dict_rounds_duration_and_keeps_the_error():
    failed = Result(None, "error", 2, 1, Usage(), 0.1234567891, [], "ScriptExhausted: ran out")
    d = failed.to_dict()
    assert d == {"answer": None, "status": "error", "turns": 2, "tool_calls": 1,
                 "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
                 "duration_s": 0.123457, "error": "ScriptExhausted: ran out"}
    back = Result.from_dict(through_json(d))
    assert back == dataclasses.replace(failed, duration_s=0.123457)
    assert not back.ok


# -- events -----------------------------------------------------------------------------------

EVENTS = [
    RunStarted("小明有 50 元，还剩多少钱？", "react", "scripted"),
    TurnStarted(1),
    TokenDelta("Thought: 先算", 1),
    ModelRetry(1, 2, "HTTP 503", 0.5),
    Thought("先算 3 本书的钱", 1),
    Action(CALL, 1),
    Action(BAD_CALL, 2),
    Observation("call_1", "calculator", "36", False, 1, 0.0012),
    Observation("call_2", "calculator", "Error: not valid JSON", True, 2),
    FinalAnswer("他还剩 4 元", 5),
    Error("the reply is empty", 3, recoverable=True),
    Error("ScriptExhausted: ran out", 4),
    RunFinished(RESULT),
    RunFinished(Result(None, "max_turns", 10, 10)),
]

PLAN_STEPS = [{"id": "step1", "description": "3 本书的钱", "tool": "calculator",
               "args": {"operation": "multiply", "a": 3, "b": 12}, "depends_on": []},
              {"id": "step2", "description": "还剩", "instruction": "50 - $step1", "depends_on": ["step1"]}]
EVENTS += [  # Plan-and-Execute (tests/test_plan*.py cover how they are emitted)
    events.PlanCreated(PLAN_STEPS, 1, "他还剩 $step2 元"),
    events.PlanCreated(PLAN_STEPS[:1], 2),
    events.StepStarted("step1", "3 本书的钱", "calculator", {"operation": "multiply", "a": 3, "b": 12}),
    events.StepStarted("step2", "还剩", None, {"instruction": "50 - 36"}, attempt=2),
    events.StepFinished("step1", "36", 1, 0.0012),
    events.StepRetried("step1", 1, "Error: ConnectionError: reset", 0.5),
    events.StepFailed("step1", "Error: KeyError: 'pencil'", 4),
    events.StepSkipped("step2", "step1 failed: Error: KeyError: 'pencil'"),
    events.Replanned(1, "- step1 failed", PLAN_STEPS[1:], 2, "$step2"),
    events.Nested("step2", 1, Action(CALL, 1)),
    events.Nested("step2/step1", 2, events.StepFinished("step1", "14")),
]
EVENTS += [  # handoffs (tests/test_handoffs.py covers how it is emitted)
    events.HandedOff("triage", "analyst", "需要写代码", 1),
]
EVENTS += [  # Agent.checklist (tests/test_checklist.py covers how it is emitted)
    events.Checklist(["点击“加一”：显示 1", "type 3, click Double: 6 shows"]),
    events.Checklist([]),
    events.Checked(1, 3, ["index.html threw: app.js:3: Uncaught ReferenceError"], True, "第 1/3 次尝试"),
    events.Checked(2, 3, []),
]
EVENTS += [  # CodeAct (tests/test_codeact.py covers how they are emitted)
    events.CodeExecution("spent = 3 * 12 + 2 * 5\nprint(50 - spent)", 1),
    events.ExecutionFinished("4\n", None, 1, 0.003, observation="4"),
    events.ExecutionFinished("", "Traceback ...\nNameError: name 'x' is not defined", 2, 0.01,
                             "warning", "timeout after 30 s", "..."),
]
EVENTS += [  # approval (tests/test_guard_*.py cover how they are emitted)
    events.ApprovalRequested("c1", "run_command", {"command": "rm -rf build"},
                             "its arguments match the approval rule", "ab" * 32),
    events.ApprovalDecided("c1", "run_command", "edited", "", {"command": "rm -rf build/tmp"},
                           "ab" * 32, "terminal"),
]


@pytest.mark.parametrize("event", EVENTS, ids=[f"{e.kind}-{i}" for i, e in enumerate(EVENTS)])
def test_event_round_trip(event):
    d = event.to_dict()
    assert d["type"] == event.kind
    assert event_from_dict(through_json(d)) == event


def test_every_event_type_is_covered_and_registered():
    defined = {obj for obj in vars(events).values()
               if isinstance(obj, type) and issubclass(obj, Event) and obj is not Event}
    assert set(EVENT_TYPES.values()) == defined
    assert {type(e) for e in EVENTS} == set(EVENT_TYPES.values())
    assert all(EVENT_TYPES[cls.kind] is cls for cls in EVENT_TYPES.values())


def test_event_dicts_are_flat_and_readable():
    assert Observation("call_1", "calculator", "36", False, 1, 0.5).to_dict() == {
        "type": "observation", "call_id": "call_1", "name": "calculator", "content": "36",
        "is_error": False, "turn": 1, "duration_s": 0.5}
    assert Action(CALL, 1).to_dict() == {"type": "action", "call": CALL.to_dict(), "turn": 1}
    finished = RunFinished(RESULT).to_dict()
    assert finished["type"] == "run_finished" and len(finished["result"]["messages"]) == 4


def test_events_are_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        TurnStarted(1).turn = 2  # type: ignore[misc]


def test_event_from_dict_does_not_modify_its_input():
    d = through_json(Action(CALL, 1).to_dict())
    snapshot = json.dumps(d)
    event_from_dict(d)
    assert json.dumps(d) == snapshot


def test_a_trace_replays_from_jsonl(tmp_path):
    path = tmp_path / "trace.jsonl"
    path.write_text("".join(json.dumps(e.to_dict(), ensure_ascii=False) + "\n" for e in EVENTS), encoding="utf-8")
    replayed = [event_from_dict(json.loads(line)) for line in path.read_text(encoding="utf-8").splitlines()]
    assert replayed == EVENTS
