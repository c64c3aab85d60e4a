"""ReplayModel: a trace's model outputs served offline, so the recorded run executes again with
the same decisions - the same tool calls, the same answer - and no model."""

from __future__ import annotations

import pytest
from plan_scripts import SEED_PLAN, SEED_TASK, plan_reply

from tao import ReActAgent, ScriptedModel, calculator, tool_call
from tao.errors import ScriptExhausted
from tao.events import Action
from tao.models.replay import ReplayModel
from tao.plan.agent import PlanExecuteAgent
from tao.sinks import JsonlTrace


def recorded(tmp_path, agent, task):
    path = tmp_path / "run.jsonl"
    events = []
    with JsonlTrace(path) as trace:
        result = agent.run(task, [trace, events.append])
    return path, result, events


def test_a_react_run_executes_again_offline_with_the_same_calls_and_answer(tmp_path):
    model = ScriptedModel([tool_call("calculator", operation="multiply", a=3, b=12),
                           ("now the pens", tool_call("calculator", operation="add", a=36, b=10)),
                           "46 in all"])
    path, first, events = recorded(tmp_path, ReActAgent(model, [calculator]), "3*12+10?")
    replay = ReplayModel(path)
    events_again = []
    result = ReActAgent(replay, [calculator]).run("3*12+10?", [events_again.append])
    assert result.answer == first.answer == "46 in all" and replay.remaining == 0
    calls = [e.call.arguments for e in events if type(e) is Action]
    assert calls == [e.call.arguments for e in events_again if type(e) is Action]
    assert replay.name == "scripted"  # the recorded run's model


def test_a_plan_replays_its_planner_offline(tmp_path):
    agent = PlanExecuteAgent(ScriptedModel([plan_reply(SEED_PLAN)]), [calculator])
    path, first, _ = recorded(tmp_path, agent, SEED_TASK)
    result = PlanExecuteAgent(ReplayModel(path), [calculator]).run(SEED_TASK)
    assert result.answer == first.answer == "他还剩 4 元"


def test_past_the_recorded_replies_it_says_so(tmp_path):
    path, _, _ = recorded(tmp_path, ReActAgent(ScriptedModel(["hi"]), []), "hello")
    replay = ReplayModel(path)
    result = ReActAgent(replay, [], max_turns=3).run("something else")
    assert result.answer == "hi"  # served in order when the conversation is another
    with pytest.raises(ScriptExhausted):
        _drain(replay)


def _drain(model):
    import asyncio

    async def one():
        async for _ in model.stream([]):
            pass

    asyncio.run(one())


def test_a_trace_cut_off_before_its_end_is_a_clear_error(tmp_path):
    path = tmp_path / "cut.jsonl"
    path.write_text('{"type": "run_started", "task": "t", "agent": "react", "model": "m"}\n')
    with pytest.raises(ValueError, match="no run_finished"):
        ReplayModel(path)
