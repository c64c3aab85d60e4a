"""The event stream a sink reads, kind by kind, for the seed question on every agent - the same
before and after the loops moved onto one run context (issue 25; the one change since: the tool
calls CodeAct's code makes are Actions and Observations too). Sinks (the console, the web page,
the trace, OpenTelemetry) rely on this order: a turn starts, the text streams, the thought, then
approvals before the Action they decide, then its Observation; the answer; the end.
``token*19`` is 19 text deltas in a row."""

from __future__ import annotations

import itertools
import json
from collections import Counter

import pytest

import tao
from tao import CodeActAgent, ReActAgent, ScriptedModel, calculator, tool_call

TASK = "小明有 50 元，买了 3 本书每本 12 元，又买了 2 支笔每支 5 元，请问他还剩多少钱？"
STEPS = [("multiply", 3, 12), ("multiply", 2, 5), ("add", 36, 10), ("subtract", 50, 46)]
CALLS = [tool_call("calculator", operation=o, a=a, b=b) for o, a, b in STEPS]
DONE = "他还剩 4 元。"


def text(op, a, b):
    args = json.dumps({"operation": op, "a": a, "b": b})
    return f"Thought: {op}\nAction: calculator\nAction Input: {args}"


def decision(op, a, b):
    return json.dumps({"thought": op, "action": "calculator",
                       "action_input": {"operation": op, "a": a, "b": b}})


def step(n, op, a, b, *deps):
    return {"id": f"step{n}", "description": op, "tool": "calculator",
            "args": {"operation": op, "a": a, "b": b}, "depends_on": list(deps)}


PLAN = {"steps": [step(1, "multiply", 3, 12), step(2, "multiply", 2, 5),
                  step(3, "add", "$step1", "$step2", "step1", "step2"),
                  step(4, "subtract", 50, "$step3", "step3")], "answer": "他还剩 $step4 元。"}

TURNS = "turn_started action observation " * 4
AGENTS = {
    "react": (lambda tmp: ReActAgent(ScriptedModel([*CALLS, DONE], chunk_size=3), [calculator]),
              f"run_started {TURNS}turn_started token*3 final_answer run_finished"),
    "react-text": (lambda tmp: ReActAgent(ScriptedModel(
        [*(text(*s) for s in STEPS), f"Thought: done\nFinal Answer: {DONE}"], chunk_size=5),
        [calculator], protocol="text"),
        "run_started turn_started token*19 thought action observation turn_started token*19 "
        "thought action observation turn_started token*17 thought action observation "
        "turn_started token*19 thought action observation turn_started token*8 thought "
        "final_answer run_finished"),
    "react-json": (lambda tmp: ReActAgent(ScriptedModel(
        [*(decision(*s) for s in STEPS),
         json.dumps({"thought": "done", "action": "final", "action_input": DONE},
                    ensure_ascii=False)], chunk_size=7),
        [calculator], protocol="json"),
        "run_started turn_started token*16 thought action observation turn_started token*16 "
        "thought action observation turn_started token*14 thought action observation "
        "turn_started token*16 thought action observation turn_started token*10 thought "
        "final_answer run_finished"),
    "codeact": (lambda tmp: CodeActAgent(ScriptedModel(
        ["先算。\n```python\nspent = add(multiply(3, 12), multiply(2, 5))\n"
         "print(subtract(50, spent))\n```", DONE], chunk_size=9), sandbox="subprocess"),
        "run_started turn_started token*10 thought code " + "action observation " * 4 +
        "execution turn_started token final_answer run_finished"),
    "guarded": (lambda tmp: ReActAgent(ScriptedModel([*CALLS, DONE], chunk_size=3), [calculator],
                                       deny=["calculate"], require_approval=["calculator"],
                                       approve=lambda request: True, audit=tmp / "audit.jsonl",
                                       journal=tmp / "runs.db"),
                "run_started " + "turn_started approval_requested approval_decided action "
                "observation " * 4 + "turn_started token*3 final_answer run_finished"),
}


def kinds(events) -> str:
    return " ".join(f"{kind}*{n}" if (n := len(list(group))) > 1 else kind
                    for kind, group in itertools.groupby(e.kind for e in events))


@pytest.mark.parametrize("name", AGENTS)
def test_each_agent_streams_the_seed_question_in_the_order_sinks_read(name, tmp_path):
    make, expected = AGENTS[name]
    events: list = []
    result = make(tmp_path).run(TASK, sinks=[events.append])
    assert (result.status, result.answer) == ("done", DONE)
    assert kinds(events) == expected


def test_a_plan_streams_its_plan_then_its_steps_then_the_answer():
    events: list = []
    agent = tao.PlanExecuteAgent(ScriptedModel([json.dumps(PLAN, ensure_ascii=False)],
                                               chunk_size=11), [calculator])
    result = agent.run(TASK, sinks=[events.append])
    assert (result.status, result.answer) == ("done", DONE)
    order = [e.kind for e in events]
    assert order[:2] == ["run_started", "turn_started"] and order[-2:] == ["final_answer",
                                                                         "run_finished"]
    planned = order.index("plan_created")
    assert set(order[2:planned]) == {"token"}  # the plan streams in before any step starts
    steps = order[planned + 1:-2]  # steps 1 and 2 run at once: their order may interleave
    assert Counter(steps) == {"step_started": 4, "step_finished": 4}
