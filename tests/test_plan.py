"""Plan-and-Execute, driven by the public ScriptedModel: the planner's replies are scripted, the
tools are real, so every number after the plan comes from the calculator.
"""

from __future__ import annotations

import asyncio
import json
import time

import pytest
from plan_scripts import (
    SEED_PLAN,
    SEED_TASK,
    of,
    plan_reply,
    price,
    price_plans,
    sleep_step,
    sleepy_tools,
    step,
)

from tao import ReActAgent, ScriptedModel, calculate, calculator, tool, tool_call
from tao.events import (
    Error,
    Nested,
    PlanCreated,
    Replanned,
    RunFinished,
    StepFailed,
    StepFinished,
    StepRetried,
    StepSkipped,
    StepStarted,
    TurnStarted,
    event_from_dict,
)
from tao.models.base import Model
from tao.plan.agent import PlanExecuteAgent
from tao.tools.base import Toolbox


def run(agent, task=SEED_TASK):
    events = []
    result = agent.run(task, sinks=[events.append])
    return result, events


@pytest.mark.parametrize("task_id", ["seed-3-zh", "seed-3-en"])
def test_seed_plan_runs_step1_and_step2_in_parallel_then_step3_then_step4(seed_tasks, task_id):
    task = seed_tasks[task_id]
    model = ScriptedModel([plan_reply(SEED_PLAN)])

    result, events = run(PlanExecuteAgent(model, [calculator]), task["question"])

    assert result.status == "done" and task["answer"] in result.answer
    assert result.answer == "他还剩 4 元"  # the plan's answer template: no synthesis call
    assert result.turns == task["expect"]["plan_llm_calls"] == 1  # LLM calls
    assert result.tool_calls == task["expect"]["plan_steps"] == 4
    assert model.remaining == 0
    order = [(type(e).__name__, e.step_id) for e in events if type(e) in (StepStarted, StepFinished)]
    assert order[:2] == [("StepStarted", "step1"), ("StepStarted", "step2")]  # both before either ends
    assert {o for o in order[2:4]} == {("StepFinished", "step1"), ("StepFinished", "step2")}
    assert order[4:] == [("StepStarted", "step3"), ("StepFinished", "step3"),
                         ("StepStarted", "step4"), ("StepFinished", "step4")]
    results = {e.step_id: e.result for e in of(events, StepFinished)}
    assert results == {"step1": "36", "step2": "10", "step3": "46", "step4": "4"}
    # references were resolved to the values the calculator returned, types kept
    started = {e.step_id: e.args for e in of(events, StepStarted)}
    assert started["step3"] == {"operation": "add", "a": 36.0, "b": 10.0}
    assert started["step4"] == {"operation": "subtract", "a": 50, "b": 46.0}
    [created] = of(events, PlanCreated)
    assert [s["id"] for s in created.steps] == ["step1", "step2", "step3", "step4"]
    assert created.steps[2]["depends_on"] == ["step1", "step2"] and created.answer == "他还剩 $step4 元"
    assert [e.kind for e in events][:3] == ["run_started", "turn_started", "token"]
    assert [e.kind for e in events][-2:] == ["final_answer", "run_finished"]


def test_the_seeds_own_plan_shape_is_the_calculator():
    seed_shape = [
        {"id": 1, "description": "书的钱", "operation": "multiply", "operandA": 3, "operandB": 12, "dependencies": []},
        {"id": 2, "description": "笔的钱", "operation": "multiply", "operandA": 2, "operandB": 5, "dependencies": []},
        {"id": 3, "description": "总花费", "operation": "add", "operandA": "$1", "operandB": "$2", "dependencies": [1, 2]},
        {"id": 4, "description": "剩下的钱", "operation": "subtract", "operandA": 50, "operandB": "step3",
         "dependencies": [3], "final": True},
    ]
    model = ScriptedModel([json.dumps(seed_shape, ensure_ascii=False)])
    result, events = run(PlanExecuteAgent(model, [calculator]))
    assert (result.status, result.answer, result.turns, result.tool_calls) == ("done", "4", 1, 4)
    assert of(events, PlanCreated)[0].steps[2] == step(3, "add", "$step1", "$step2", 1, 2, description="总花费")


class RecordingModel(Model):
    """ScriptedModel's replies; keeps the keyword arguments of every call."""

    name = "recording"

    def __init__(self, replies):
        self.inner = ScriptedModel(replies)
        self.kwargs = []

    @property
    def calls(self):
        return self.inner.calls

    async def stream(self, messages, **kwargs):
        self.kwargs.append(kwargs)
        async for chunk in self.inner.stream(messages, **kwargs):
            yield chunk


def test_the_plan_is_asked_for_with_a_json_schema_response_format():
    model = RecordingModel([plan_reply(SEED_PLAN)])
    run(PlanExecuteAgent(model, [calculator]))
    fmt = model.kwargs[0]["response_format"]
    assert fmt["type"] == "json_schema" and fmt["json_schema"]["name"] == "plan"
    item = fmt["json_schema"]["schema"]["properties"]["steps"]["items"]
    assert item["properties"]["tool"] == {"const": "calculator"}
    assert {"$ref", "anyOf"} & set(item["properties"]["args"]["properties"]["a"])
    assert "tools" not in model.kwargs[0]


def test_without_an_answer_template_one_synthesis_call_writes_the_answer():
    plan = {"steps": SEED_PLAN["steps"]}
    model = ScriptedModel([plan_reply(plan), "He has 4 yuan left."])
    result, events = run(PlanExecuteAgent(model, [calculator]), "Xiao Ming has 50 yuan ...")
    assert (result.answer, result.turns, result.tool_calls) == ("He has 4 yuan left.", 2, 4)
    synthesis = model.calls[1][-1].content
    assert "- step4 (还剩的钱): 4" in synthesis and "- step1 (3 本书的钱): 36" in synthesis
    assert [e.turn for e in of(events, TurnStarted)] == [1, 2]
    # the system prompt and the worked example (a user turn and its plan), then the run's own turns
    assert [m.role for m in result.messages] == ["system", "user", "assistant",
                                                 "user", "assistant", "user", "assistant"]


# -- invalid plans go back to the planner -----------------------------------------------------

BAD_PLANS = {
    "unknown tool": ({"steps": [{"id": "step1", "description": "weather", "tool": "weather",
                                 "args": {"city": "Beijing"}, "depends_on": []}]},
                     "step1 uses the unknown tool 'weather'; the tools are: calculator"),
    "missing dependency": ({"steps": [step(1, "add", 1, 2), step(2, "add", "$step1", 1, 1, 7)]},
                           "step2 depends on step7, which is not a step of the plan"),
    "extra dependency": ({"steps": [step(1, "add", 1, 2), step(2, "add", 2, 3),
                                    step(3, "add", "$step1", 1, 1, 2)]},
                         "step3 depends on step2 but its args never use $step2"),
    "reference not a dependency": ({"steps": [step(1, "add", 1, 2), step(2, "add", "$step1", 1)]},
                                   "step2 uses $step1 but step1 is not in its depends_on; add it"),
    "cycle": ({"steps": [step(1, "add", "$step3", 1, 3), step(2, "add", "$step1", 1, 1),
                         step(3, "add", "$step2", 1, 2)]},
              "the steps depend on each other in a cycle: step1 → step3 → step2 → step1"),
    "not JSON": ("Sure! Here is my plan: step 1 multiply...", "the reply is not valid JSON"),
    "wrong shape": ({"steps": [{"description": "no id", "tool": "calculator"}]},
                    "- steps[0].id: Field required"),
    "bad argument": ({"steps": [{"id": "step1", "description": "x", "tool": "calculator",
                                 "args": {"operation": "add", "x": 1, "b": 2}, "depends_on": []}]},
                     "step1: calculator has no argument 'x'; its arguments are operation, a, b"),
}


@pytest.mark.parametrize("problem", list(BAD_PLANS))
def test_an_invalid_plan_goes_back_with_the_precise_error_and_the_fix_runs(problem):
    bad, message = BAD_PLANS[problem]
    model = ScriptedModel([bad if isinstance(bad, str) else plan_reply(bad), plan_reply(SEED_PLAN)])

    result, events = run(PlanExecuteAgent(model, [calculator]))

    correction = model.calls[1][-1]
    assert correction.role == "user" and message in correction.content
    assert correction.content.startswith("这个计划无法执行")  # the task is Chinese
    errors = of(events, Error)
    assert len(errors) == 1 and errors[0].recoverable and message in errors[0].message
    assert (result.status, result.answer, result.turns, result.tool_calls) == ("done", "他还剩 4 元", 2, 4)
    assert len(of(events, PlanCreated)) == 1


def test_a_result_named_without_its_dollar_goes_back_before_anything_runs():
    def plan(expression):
        return plan_reply({"steps": [
            {"id": "step1", "description": "sold in the morning", "tool": "calculate",
             "args": {"expression": "0.35*480"}, "depends_on": []},
            {"id": "step2", "description": "apples left", "tool": "calculate",
             "args": {"expression": expression}, "depends_on": ["step1"] if "$" in expression else []}],
            "answer": "$step2 apples are left"})

    model = ScriptedModel([plan("480 - step1.result - 120"), plan("480 - $step1 - 120")])
    result, events = run(PlanExecuteAgent(model, [calculate]), "A store had 480 apples ...")
    assert (result.answer, result.turns, result.tool_calls) == ("192 apples are left", 2, 2)
    [error] = of(events, Error)
    assert ("step2's expression writes 'step1.result', which the tool would get as it is; write "
            "$step1 where the result of step1 belongs") in error.message
    # nothing ran before the fix: each step started once
    assert sorted(e.step_id for e in of(events, StepStarted)) == ["step1", "step2"]


def test_invalid_plans_are_bounded_then_the_run_fails_clearly():
    bad = plan_reply(BAD_PLANS["cycle"][0])
    model = ScriptedModel([bad] * 5)

    result, events = run(PlanExecuteAgent(model, [calculator], max_fixes=2))

    assert result.status == "error" and result.answer is None
    assert result.turns == 3 and model.remaining == 2 and result.tool_calls == 0
    assert result.error.startswith("no valid plan after 3 tries")
    assert "cycle: step1 → step3 → step2 → step1" in result.error
    assert [e.recoverable for e in of(events, Error)] == [True, True, False]
    assert not of(events, PlanCreated) and not of(events, StepStarted)


def test_instruction_steps_need_a_step_agent():
    plan = {"steps": [{"id": "step1", "description": "think", "instruction": "think hard", "depends_on": []}]}
    model = ScriptedModel([plan_reply(plan), plan_reply(SEED_PLAN)])
    result, _ = run(PlanExecuteAgent(model, [calculator]))
    assert "step1 has an instruction, but this agent has no step agent" in model.calls[1][-1].content
    assert result.ok


# -- retries, failures and re-planning ---------------------------------------------------------

def flaky_tool(failures: int):
    calls = []

    @tool
    def fetch(x: int) -> int:
        """Fetch a number from a flaky service."""
        calls.append(x)
        if len(calls) <= failures:
            raise ConnectionError("service unavailable")
        return x * 2

    return fetch, calls


def test_a_failing_step_is_retried_then_succeeds():
    fetch, calls = flaky_tool(failures=2)
    plan = {"steps": [{"id": "step1", "description": "fetch", "tool": "fetch", "args": {"x": 21},
                       "depends_on": []}], "answer": "$step1"}
    agent = PlanExecuteAgent(ScriptedModel([plan_reply(plan)]), [fetch], retry_backoff=0.01)

    result, events = run(agent, "fetch 21")

    assert (result.status, result.answer, result.turns) == ("done", "42", 1)
    assert result.tool_calls == 3 and calls == [21, 21, 21]
    retried = of(events, StepRetried)
    assert [(e.step_id, e.attempt) for e in retried] == [("step1", 1), ("step1", 2)]
    assert "ConnectionError: service unavailable" in retried[0].error
    assert 0.008 <= retried[0].delay_s <= 0.012 and 0.016 <= retried[1].delay_s <= 0.024  # backoff doubles
    assert [e.attempt for e in of(events, StepStarted)] == [1, 2, 3]
    assert of(events, StepFinished)[0].attempt == 3


def test_invalid_arguments_are_not_retried():
    plan = {"steps": [step(1, "add", "fifteen", 27)], "answer": "$step1"}
    agent = PlanExecuteAgent(ScriptedModel([plan_reply(plan)]), [calculator], max_replans=0)
    result, events = run(agent, "15+27?")
    assert result.status == "error" and result.tool_calls == 1
    [failed] = of(events, StepFailed)
    assert failed.attempts == 1 and "invalid arguments for calculator" in failed.error
    assert not of(events, StepRetried)


def test_a_tool_error_that_says_it_is_not_retryable_goes_straight_to_a_replan():
    """calculate's CalculationError says retrying the same expression cannot help (seen with the
    1.5B model: an expression calculate refuses, four times per plan, three plans in a row)."""
    from tao import calculate

    bad = {"steps": [{"id": "step1", "description": "the sum", "tool": "calculate",
                      "args": {"expression": "fsum([12, 24])"}, "depends_on": []}], "answer": "$step1"}
    good = {"steps": [{"id": "step2", "description": "the sum", "tool": "calculate",
                       "args": {"expression": "12 + 24"}, "depends_on": []}], "answer": "$step2"}
    agent = PlanExecuteAgent(ScriptedModel([plan_reply(bad), plan_reply(good)]), [calculate])
    result, events = run(agent, "12 + 24?")
    assert (result.status, result.answer, result.tool_calls) == ("done", "36", 2)
    [failed] = of(events, StepFailed)
    assert failed.attempts == 1 and "not allowed in an expression" in failed.error
    assert not of(events, StepRetried) and len(of(events, Replanned)) == 1


def test_a_failed_step_skips_its_dependents_and_the_replan_finishes_the_task():
    first, second = price_plans()
    model = ScriptedModel([plan_reply(first), plan_reply(second)])
    agent = PlanExecuteAgent(model, [price, calculator], retry_backoff=0, max_retries=1)

    result, events = run(agent, "What do a book and a pen cost together?")

    assert (result.status, result.answer, result.turns) == ("done", "Together: 17", 2)
    assert result.tool_calls == 1 + 2 + 2  # book, pencil twice (one retry), pen, add
    [failed] = of(events, StepFailed)
    assert failed.step_id == "step2" and "KeyError: 'pencil'" in failed.error and failed.attempts == 2
    [skipped] = of(events, StepSkipped)
    assert skipped.step_id == "step3" and skipped.reason.startswith("step2 failed")
    [replanned] = of(events, Replanned)
    assert replanned.replan == 1 and [s["id"] for s in replanned.steps] == ["step4", "step5"]
    assert "KeyError" in replanned.reason and replanned.answer == "Together: $step5"
    # the planner saw the goal, what finished (with its result) and what went wrong
    ask = model.calls[1][-1].content
    assert "Task: What do a book and a pen cost together?" in ask
    assert "- step1 (price of a book): 12" in ask
    assert "- step2 (price of a pencil) failed: Error: KeyError: 'pencil'" in ask
    assert "- step3 (both) did not run: step2 failed" in ask and "number new steps from step4" in ask
    kinds = [e.kind for e in events]
    assert kinds.index("step_failed") < kinds.index("replanned") < kinds.index("final_answer")


def test_when_the_replans_run_out_the_run_fails_with_the_step_error():
    plan = {"steps": [{"id": "step1", "description": "pencil", "tool": "price", "args": {"item": "pencil"},
                       "depends_on": []}], "answer": "$step1"}
    model = ScriptedModel([plan_reply(plan), plan_reply(plan)])
    agent = PlanExecuteAgent(model, [price], max_replans=1, max_retries=0)

    result, events = run(agent, "pencil?")

    assert result.status == "error" and result.turns == 2 and result.tool_calls == 2
    assert result.error == "step1 failed after 1 attempt(s): Error: KeyError: 'pencil' (no re-plans left: 1 made)"
    assert len(of(events, Replanned)) == 1 and of(events, Error)[-1].message == result.error


def test_a_step_timeout_is_a_failed_attempt():
    @tool
    async def slow() -> str:
        """Never answers in time."""
        await asyncio.sleep(5)
        return "late"

    plan = {"steps": [{"id": "step1", "description": "slow", "tool": "slow", "args": {}, "depends_on": []}]}
    agent = PlanExecuteAgent(ScriptedModel([plan_reply(plan)]), [slow], step_timeout=0.05,
                             max_retries=1, retry_backoff=0, max_replans=0)
    start = time.perf_counter()
    result, events = run(agent, "slow")
    assert time.perf_counter() - start < 1
    assert result.status == "error" and "timed out after 0.05 s" in result.error
    assert [e.attempt for e in of(events, StepRetried)] == [1]


# -- parallelism -------------------------------------------------------------------------------

@pytest.mark.parametrize("tool_name", ["wait", "block"])
def test_wall_time_follows_the_critical_path_not_the_sum(tool_name):
    # step1 ─┬─ step3 ─┐
    # step2 ─┘         ├─ step6          sum 1.2 s, critical path 0.2 + 0.2 + 0.2 = 0.6 s...
    # step4 ── step5 ──┘                 ...and step5 must not wait for step3's "level"
    plan = {"steps": [sleep_step(1, tool_name, 0.2), sleep_step(2, tool_name, 0.2),
                      sleep_step(3, tool_name, 0.2, 1, 2), sleep_step(4, tool_name, 0.1),
                      sleep_step(5, tool_name, 0.3, 4), sleep_step(6, tool_name, 0.2, 3, 5)],
            "answer": "$step6"}
    agent = PlanExecuteAgent(ScriptedModel([plan_reply(plan)]), sleepy_tools())

    start = time.perf_counter()
    result, events = run(agent, "sleep")
    elapsed = time.perf_counter() - start

    assert result.answer == "s6 s3 s1 s2 s5 s4"
    assert 0.6 <= elapsed < 0.75, f"critical path 0.6 s, sum 1.2 s, took {elapsed:.3f} s"
    started = {e.step_id: i for i, e in enumerate(events) if type(e) is StepStarted}
    finished = {e.step_id: i for i, e in enumerate(events) if type(e) is StepFinished}
    assert started["step5"] < finished["step3"]  # event-driven, not level by level


def test_concurrency_bounds_the_steps_running_at_once():
    running, peak = [0], [0]

    @tool
    async def work(n: int) -> int:
        """Work a while."""
        running[0] += 1
        peak[0] = max(peak[0], running[0])
        await asyncio.sleep(0.05)
        running[0] -= 1
        return n

    plan = {"steps": [{"id": f"step{i}", "description": "w", "tool": "work", "args": {"n": i},
                       "depends_on": []} for i in range(1, 7)], "answer": "$step6"}
    agent = PlanExecuteAgent(ScriptedModel([plan_reply(plan)]), [work], concurrency=2)
    start = time.perf_counter()
    result, _ = run(agent, "work")
    assert result.answer == "6" and peak[0] == 2
    assert 0.15 <= time.perf_counter() - start < 0.3


# -- hybrids: a ReAct agent runs steps; agents as tools ----------------------------------------

def test_a_react_step_agent_runs_instruction_steps_and_its_events_are_nested():
    plan = {"steps": [
        step(1, "multiply", 3, 12, description="books"),
        {"id": "step2", "description": "what is left", "depends_on": ["step1"],
         "instruction": "Xiao Ming had 50 yuan and spent $step1 on books and 10 on pens; how much is left?"},
    ], "answer": "He has $step2 left"}
    planner = ScriptedModel([plan_reply(plan)])
    worker_model = ScriptedModel([tool_call("calculator", operation="subtract", a=50, b=46), "4 yuan"])
    worker = ReActAgent(worker_model, [calculator])
    agent = PlanExecuteAgent(planner, [calculator], step_agent=worker)

    result, events = run(agent, "Xiao Ming has 50 yuan ...")

    assert (result.status, result.answer) == ("done", "He has 4 yuan left")
    assert result.turns == 1 + 2 and result.tool_calls == 1 + 1  # sub-agent's calls count too
    sub_task = worker_model.calls[0][1].content
    assert sub_task.startswith("Xiao Ming had 50 yuan and spent 36 on books")  # reference resolved
    assert "- step1 (books): 36" in sub_task  # the dependency's result is given
    nested = of(events, Nested)
    assert {(e.step_id, e.depth) for e in nested} == {("step2", 1)}
    assert [e.event.kind for e in nested if e.event.kind != "token"] == [
        "run_started", "turn_started", "action", "observation", "turn_started", "final_answer",
        "run_finished"]
    assert nested[0].event.agent == "react"
    started = next(e for e in of(events, StepStarted) if e.step_id == "step2")
    assert started.tool is None and started.args["instruction"].endswith("how much is left?")
    assert "instruction" in planner.calls[0][0].content  # the planner is told it may use one


def test_a_step_agent_factory_makes_one_agent_per_step():
    made = []

    def make():
        made.append(ReActAgent(ScriptedModel(["done"]), [calculator]))
        return made[-1]

    plan = {"steps": [{"id": f"step{i}", "description": "d", "instruction": f"task {i}", "depends_on": []}
                      for i in (1, 2)], "answer": "$step1 $step2"}
    result, events = run(PlanExecuteAgent(ScriptedModel([plan_reply(plan)]), [calculator], step_agent=make))
    assert result.answer == "done done" and len(made) == 2 and result.turns == 3


def test_a_failing_sub_agent_fails_its_step():
    worker = ReActAgent(ScriptedModel([tool_call("calculator", operation="add", a=1, b=1)] * 2), [calculator],
                        max_turns=2)
    plan = {"steps": [{"id": "step1", "description": "d", "instruction": "loop", "depends_on": []}]}
    agent = PlanExecuteAgent(ScriptedModel([plan_reply(plan)]), [calculator], step_agent=worker,
                             max_retries=0, max_replans=0)
    result, events = run(agent, "x")
    assert result.status == "error" and "stopped at its turn limit" in result.error
    assert result.turns == 3 and result.tool_calls == 2


def test_agent_as_tool_nests_the_inner_agents_events():
    from tao.plan import agent_as_tool

    inner = ReActAgent(ScriptedModel([tool_call("calculator", operation="multiply", a=6, b=7), "42"]),
                       [calculator])
    helper = agent_as_tool(inner, "helper", "A helper that can calculate")
    plan = {"steps": [{"id": "step1", "description": "ask the helper", "tool": "helper",
                       "args": {"task": "What is 6 times 7?"}, "depends_on": []}],
            "answer": "The helper says $step1"}
    result, events = run(PlanExecuteAgent(ScriptedModel([plan_reply(plan)]), [helper]), "6*7?")
    assert result.answer == "The helper says 42" and result.turns == 3 and result.tool_calls == 2
    assert {(e.step_id, e.depth) for e in of(events, Nested)} == {("step1", 1)}


def test_an_agent_tool_works_for_a_react_agent_too():
    from tao.plan import agent_as_tool

    seen = []
    inner = ReActAgent(ScriptedModel(["Paris"]), [])
    helper = agent_as_tool(inner, "geographer", "Knows capitals", sinks=[seen.append])
    outer = ReActAgent(ScriptedModel([tool_call("geographer", task="Capital of France?"), "Paris!"]), [helper])
    result = outer.run("Capital of France?")
    assert result.answer == "Paris!" and result.messages[3].content == "Paris"
    assert type(seen[-1]) is RunFinished and seen[0].task == "Capital of France?"
    assert helper.spec.parameters["required"] == ["task"]


def test_a_plan_agent_inside_a_plan_agent_nests_two_deep():
    # outer plan -> step1 run by an inner plan agent -> its step1 run by a ReAct agent
    react = ReActAgent(ScriptedModel([tool_call("calculator", operation="add", a=40, b=2), "42"]), [calculator])
    inner_plan = {"steps": [{"id": "step1", "description": "add", "instruction": "add 40 and 2",
                             "depends_on": []}], "answer": "$step1"}
    inner = PlanExecuteAgent(ScriptedModel([plan_reply(inner_plan)]), [calculator], step_agent=react)
    outer_plan = {"steps": [{"id": "step1", "description": "d", "instruction": "what is 40 + 2?",
                             "depends_on": []}], "answer": "It is $step1"}
    outer = PlanExecuteAgent(ScriptedModel([plan_reply(outer_plan)]), [calculator], step_agent=inner)

    result, events = run(outer, "x")

    assert result.answer == "It is 42" and result.turns == 1 + 1 + 2 and result.tool_calls == 1
    seen = {(e.step_id, e.depth, e.event.kind) for e in of(events, Nested)}
    assert ("step1", 1, "plan_created") in seen and ("step1", 1, "step_started") in seen
    assert ("step1/step1", 2, "action") in seen and ("step1/step1", 2, "run_finished") in seen
    assert all(type(e.event) is not Nested for e in of(events, Nested))  # flat, never nested twice


# -- events, facade, configuration -------------------------------------------------------------

def test_every_event_of_a_run_survives_a_trip_through_json():
    planner = ScriptedModel([plan_reply({"steps": [step(1, "multiply", 3, 12),
                                                   {"id": "step2", "description": "d", "instruction": "x $step1",
                                                    "depends_on": ["step1"]}]})])
    worker = ReActAgent(ScriptedModel([tool_call("calculator", operation="add", a=36, b=1), "37"]), [calculator])
    _, events = run(PlanExecuteAgent(planner, [calculator], step_agent=worker))
    # no answer template: the synthesis call runs out of script and ends the run with an error
    assert type(events[-1]) is RunFinished and events[-1].result.status == "error"
    for event in events:  # (a Result's duration is rounded in JSON, so compare the dicts)
        d = json.loads(json.dumps(event.to_dict(), ensure_ascii=False))
        back = event_from_dict(d)
        assert type(back) is type(event) and back.to_dict() == d
        if RunFinished not in (type(event), type(getattr(event, "event", None))):
            assert back == event


async def test_stream_and_arun():
    agent = PlanExecuteAgent(ScriptedModel([plan_reply(SEED_PLAN)] * 2), [calculator])
    kinds = [e.kind async for e in agent.stream("小明 ...")]
    assert kinds.count("step_started") == 4 and kinds[-1] == "run_finished"
    result = await agent.arun("小明 ...")
    assert result.answer == "他还剩 4 元"


async def test_closing_the_stream_early_stops_the_run():
    plan = {"steps": [sleep_step(1, "wait", 5)]}
    agent = PlanExecuteAgent(ScriptedModel([plan_reply(plan)]), sleepy_tools())
    start = time.perf_counter()
    stream = agent.stream("sleep")
    async for event in stream:
        if type(event) is StepStarted:
            break
    await stream.aclose()
    assert time.perf_counter() - start < 1


def test_user_mistakes_are_exceptions_at_once():
    with pytest.raises(ValueError, match="executor='dask' is not available"):
        PlanExecuteAgent(ScriptedModel([]), [calculator], executor="dask")
    with pytest.raises(ValueError, match="concurrency"):
        PlanExecuteAgent(ScriptedModel([]), [calculator], concurrency=0)
    with pytest.raises(ValueError, match="max_replans"):
        PlanExecuteAgent(ScriptedModel([]), [calculator], max_replans=-1)
    with pytest.raises(TypeError, match="step_agent"):
        PlanExecuteAgent(ScriptedModel([]), [calculator], step_agent="react")


def test_english_task_gets_english_planner_prompt_with_an_example():
    model = ScriptedModel([plan_reply(SEED_PLAN)])
    run(PlanExecuteAgent(model, [calculator]), "Xiao Ming has 50 yuan ...")
    system = model.calls[0][0].content
    assert system.startswith("You are a planner") and "calculator(operation:" in system
    assert "instruction" not in system  # no step agent, no instruction steps offered
    # the worked example comes as an exchange before the task, in the task's language
    example, plan, task = model.calls[0][1:]
    assert example.role == "user" and example.content.startswith("A rectangular garden is 8 m")
    assert plan.role == "assistant" and '"answer": "The rectangular garden is $step3' in plan.content
    assert task.content == "Xiao Ming has 50 yuan ..."
    # a planner prompt of one's own replaces both
    model = ScriptedModel([plan_reply(SEED_PLAN)])
    run(PlanExecuteAgent(model, [calculator], system_prompt="Plan it."), "Xiao Ming ...")
    assert [m.content for m in model.calls[0]] == ["Plan it.", "Xiao Ming ..."]


class FormatRecorder(ScriptedModel):
    """Records the ``response_format`` and the ``grammar`` each call asks for."""

    def __init__(self, replies, grammar: bool):
        super().__init__(replies)
        self.supports_grammar = grammar
        self.formats: list = []
        self.grammars: list = []

    def stream(self, messages, **kwargs):
        self.formats.append(kwargs.get("response_format"))
        self.grammars.append(kwargs.get("grammar"))
        return super().stream(messages, **kwargs)


@pytest.mark.parametrize("grammar", [True, False])
def test_a_grammar_model_gets_the_plan_grammar_an_endpoint_the_schema(grammar):
    from tao.plan.grammar import plan_grammar

    model = FormatRecorder([json.dumps(SEED_PLAN)], grammar)
    assert run(PlanExecuteAgent(model, [calculator], plan_form="json"))[0].answer == "他还剩 4 元"
    if grammar:  # steps numbered from step1, references only backwards (test_plan_grammar)
        assert model.formats == [None]
        assert model.grammars == [plan_grammar(Toolbox([calculator]))]
    else:
        assert model.grammars == [None]
        steps = model.formats[0]["json_schema"]["schema"]["properties"]["steps"]
        assert "maxItems" not in steps and "depends_on" in json.dumps(steps)
    example_plan = model.calls[0][2].content  # its worked example shows the plan as it may write it
    assert ("depends_on" in example_plan) is not grammar and '"$step1"' in example_plan
    assert ('"answer"' in example_plan) is not grammar


def test_a_replan_under_the_grammar_continues_the_numbering_and_may_use_finished_steps():
    from tao.plan.grammar import plan_grammar

    @tool
    def lookup(city: str) -> str:
        """Look a city up.

        Args:
            city: the city
        """
        raise ConnectionError("the lookup service is down")

    first = {"steps": [
        {"id": "step1", "description": "3 本书", "tool": "calculator",
         "args": {"operation": "multiply", "a": 3, "b": 12}},
        {"id": "step2", "description": "查询", "tool": "lookup", "args": {"city": "北京"}}]}
    second = {"steps": [{"id": "step3", "description": "剩下的钱", "tool": "calculator",
                         "args": {"operation": "subtract", "a": 50, "b": "$step1"}}]}
    model = FormatRecorder([json.dumps(first), json.dumps(second)], True)
    agent = PlanExecuteAgent(model, [calculator, lookup], max_retries=0, plan_form="json")
    assert run(agent)[0].answer == "14"
    tools = Toolbox([calculator, lookup])
    assert model.grammars == [plan_grammar(tools),
                              plan_grammar(tools, first=3, finished=["step1"])]


def test_a_dollar_number_is_money_unless_a_step_has_that_number():
    from tao.plan.schema import PlanInvalid, parse_plan

    def plan(expression):
        return plan_reply({"steps": [
            {"id": "step1", "description": "discount", "tool": "calculate",
             "args": {"expression": "0.25 * 40"}, "depends_on": []},
            {"id": "step2", "description": "change", "tool": "calculate",
             "args": {"expression": expression}, "depends_on": []}]})

    tools = Toolbox([calculate])
    assert parse_plan(plan("$50 - 30"), tools).steps[1].args == {"expression": "$50 - 30"}
    with pytest.raises(PlanInvalid, match=r"writes '\$1': write \$step1 for the result of step1, "
                                          r"or 1 for the number"):
        parse_plan(plan("$50 - $1"), tools)
