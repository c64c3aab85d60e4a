"""PlanView: the DAG and its live progress, rendered on a rich Console writing to a StringIO (a
non-terminal: the plan once, then one line per change) or forced to be a terminal (the live tree)."""

from __future__ import annotations

import io
import json
import subprocess
import sys

import pytest
from plan_scripts import SEED_PLAN, SEED_TASK, price, price_plans, step

from tao import ReActAgent, ScriptedModel, calculator, tool_call
from tao.events import (
    Nested,
    PlanCreated,
    RunStarted,
    StepFailed,
    StepFinished,
    StepRetried,
    StepSkipped,
    StepStarted,
    Thought,
)
from tao.plan.agent import PlanExecuteAgent
from tao.sinks.plan_view import PlanView, nested_line, runs


def console(terminal=False):
    from rich.console import Console

    return Console(file=io.StringIO(), width=160, force_terminal=terminal, color_system=None)


def render(renderable, width=160) -> str:
    c = console()
    c.print(renderable)
    return c.file.getvalue()


def run_with_view(agent, task=SEED_TASK, terminal=False):
    view = PlanView(console(terminal))
    result = agent.run(task, sinks=[view])
    return result, view, view.console.file.getvalue()


def test_the_seed_plan_is_drawn_then_each_step_reports_as_it_runs():
    agent = PlanExecuteAgent(ScriptedModel([json.dumps(SEED_PLAN, ensure_ascii=False)]), [calculator])
    result, view, out = run_with_view(agent)
    assert result.answer == "他还剩 4 元" and not view.live
    lines = out.splitlines()
    assert lines[0].startswith("Task: 小明有 50 元") and "(plan · scripted)" in lines[0]
    assert lines[1] == "Plan · 4 steps · answer: 他还剩 $step4 元"
    # the DAG: every step pending, with what runs it and what it depends on
    assert lines[2] == '├── ○ step1  3 本书的钱  calculator(operation="multiply", a=3, b=12)'
    assert lines[4] == ('├── ○ step3  一共花的钱  calculator(operation="add", a=$step1, b=$step2)'
                        "  ← step1, step2")
    assert lines[5].startswith("└── ○ step4") and lines[5].endswith("← step3")
    # then the progress, one line per change, references resolved when the step starts
    progress = lines[6:-2]
    assert progress[:2] == ['◐ step1 started: calculator(operation="multiply", a=3, b=12)',
                            '◐ step2 started: calculator(operation="multiply", a=2, b=5)']
    assert '◐ step3 started: calculator(operation="add", a=36.0, b=10.0)' in progress
    assert [line.split(" → ")[1] for line in progress if line.startswith("✔")] in (
        ["36", "10", "46", "4"], ["10", "36", "46", "4"])
    assert lines[-2] == "Final Answer: 他还剩 4 元"
    assert lines[-1].startswith("done: 1 LLM call, 4 tool calls, 4 done, tokens ")
    # and the state the live view draws has every step done with its result
    final = render(view)
    assert "✔ step4  还剩的钱" in final and "→ 4" in final and "○" not in final


def test_retries_failures_skips_and_a_replan_show_their_marks():
    first, second = price_plans(lambda item: item)
    agent = PlanExecuteAgent(ScriptedModel([json.dumps(first), json.dumps(second)]), [price, calculator],
                             retry_backoff=0, max_retries=1)
    result, view, out = run_with_view(agent, "book and pen?")
    assert result.answer == "Together: 17"
    assert "↻ step2 attempt 1 failed: Error: KeyError: 'pencil'; retry in 0.00 s" in out
    assert "◐ step2 started (attempt 2): price(item=\"pencil\")" in out
    assert "✘ step2 failed after 2 attempt(s): Error: KeyError: 'pencil'" in out
    assert "⊘ step3 skipped: step2 failed" in out
    assert "Re-plan 1 · 2 steps · because " in out and "└── ○ step5" in out
    assert out.splitlines()[-1].startswith("done: 2 LLM calls, 5 tool calls, 3 done, 1 failed, 1 skipped")
    final = render(view)
    assert "✘ step2  pencil" in final and "↻ attempt 2" in final
    assert "⊘ step3  both" in final and "✔ step5" in final and "→ 17" in final


def test_a_sub_agents_events_are_indented_under_its_step():
    plan = {"steps": [
        step(1, "multiply", 3, 12, description="books"),
        {"id": "step2", "description": "what is left", "depends_on": ["step1"],
         "instruction": "50 minus $step1"},
    ], "answer": "$step2"}
    worker = ReActAgent(ScriptedModel([tool_call("calculator", operation="subtract", a=50, b=36), "14"]),
                        [calculator])
    agent = PlanExecuteAgent(ScriptedModel([json.dumps(plan)]), [calculator], step_agent=worker)
    result, view, out = run_with_view(agent, "50 - 3*12?")
    assert result.answer == "14"
    assert "└── ○ step2  what is left  agent: 50 minus $step1  ← step1" in out
    assert "◐ step2 started: agent: 50 minus 36" in out
    assert "    step2 │ Action: calculator " in out and "    step2 │ Observation: 14" in out
    assert "    step2 │ Final Answer: 14" in out
    tree = render(view)  # the live tree keeps them under the step, indented
    assert tree.index("✔ step2") < tree.index("Action: calculator") < tree.index("Final Answer: 14")
    assert "    └── Final Answer: 14" in tree


def test_two_deep_nesting_is_indented_twice():
    view = PlanView(console())
    view(PlanCreated([{"id": "step1", "description": "outer", "instruction": "go", "depends_on": []}], 1))
    view(Nested("step1/step2", 2, Thought("deep thinking", 1)))
    out = view.console.file.getvalue()
    assert "        step1/step2 │ Thought: deep thinking" in out
    assert "step2 Thought: deep thinking" in render(view)


def test_the_live_view_on_a_terminal_redraws_the_tree_and_leaves_the_final_picture():
    agent = PlanExecuteAgent(ScriptedModel([json.dumps(SEED_PLAN, ensure_ascii=False)]), [calculator])
    result, view, out = run_with_view(agent, terminal=True)
    assert view.live and view._live is None  # stopped when the answer came
    assert result.answer == "他还剩 4 元"
    last = out[out.rindex("Plan · 4 steps"):]  # the last frame drawn
    for n, value in ((1, "36"), (2, "10"), (3, "46"), (4, "4")):
        assert f"✔ step{n}" in last and f"→ {value}" in last
    assert "◐ step1 started" not in out  # no log lines: the tree says it
    assert "Final Answer: 他还剩 4 元" in last and "done: 1 LLM call" in last


def test_a_streamed_plans_steps_may_start_before_the_plan_is_complete():
    view = PlanView(console())
    view(RunStarted("t", "plan", "m"))
    view(StepStarted("step1", "first", "calculator", {"operation": "add", "a": 1, "b": 2}))
    view(StepFinished("step1", "3", 1, 0.01))
    view(PlanCreated([step(1, "add", 1, 2, description="first"), step(2, "add", "$step1", 1, 1)], 1))
    out = view.console.file.getvalue()
    assert '◐ step1 started: calculator(operation="add", a=1, b=2)' in out
    assert "├── ✔ step1  first" in out and "└── ○ step2" in out  # drawn with its state so far


def test_every_mark_is_drawn():
    view = PlanView(console())
    view(PlanCreated([step(n, "add", 1, 1) for n in range(1, 7)], 1))
    view(StepStarted("step2", "", "calculator", {}))
    view(StepStarted("step3", "", "calculator", {}))
    view(StepFinished("step3", "2", 1, 0.5))
    view(StepStarted("step4", "", "calculator", {}))
    view(StepRetried("step4", 1, "Error: flaky", 0.5))
    view(StepStarted("step5", "", "calculator", {}))
    view(StepFailed("step5", "Error: broken", 1))
    view(StepSkipped("step6", "step5 failed: Error: broken"))
    lines = render(view).splitlines()
    assert [line[4] for line in lines[1:]] == ["○", "◐", "✔", "↻", "✘", "⊘"]
    assert lines[2].endswith("s…") and "0.50 s  → 2" in lines[3]
    assert "↻ attempt 1" in lines[4] and "Error: flaky" in lines[4]
    assert lines[5].endswith("Error: broken") and lines[6].endswith("step5 failed: Error: broken")


def test_helpers():
    assert runs({"tool": "calculator", "args": {"operation": "add", "a": "$step1", "b": 2}}) == \
        'calculator(operation="add", a=$step1, b=2)'
    assert runs({"tool": None, "instruction": "look it up"}) == "agent: look it up"
    assert nested_line(Thought("x " * 200, 1)).endswith("…") and len(nested_line(Thought("x " * 200, 1))) < 120


@pytest.mark.parametrize("module", ["tao", "tao.sinks.plan_view"])
def test_importing_does_not_import_rich(module):
    code = f"import sys, {module}; assert 'rich' not in sys.modules, 'rich imported'"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_the_live_view_shows_the_model_writing_before_the_plan_arrives():
    from tao.events import TokenDelta, TurnStarted

    view = PlanView(console(terminal=True))
    view(RunStarted("t", "plan", "m"))
    view(TurnStarted(1))
    view(TokenDelta('{"steps": [', 1))
    assert view._live is not None and "the model is writing… 11 characters" in render(view)
    view(PlanCreated([step(1, "add", 1, 2)], 1))
    assert "writing" not in render(view) and "○ step1" in render(view)
    view.close()
    assert view._live is None
