"""Streamed plans: a step starts as soon as its JSON object has arrived, before the plan ends."""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from tao import ScriptedModel, Toolbox, calculator, tool
from tao.events import Error, PlanCreated, StepFinished, StepStarted, TokenDelta
from tao.models.base import Model
from tao.plan import PlanInvalid
from tao.plan.agent import PlanExecuteAgent
from tao.plan.streaming import StepScanner, read_step


class TrickleModel(Model):
    """ScriptedModel's replies, streamed ``chunk`` characters every ``pause`` seconds - the way
    a real endpoint streams, with the event loop free between pieces."""

    name = "trickle"

    def __init__(self, replies, chunk=20, pause=0.01):
        self.inner, self.chunk, self.pause = ScriptedModel(replies, chunk_size=chunk), chunk, pause

    @property
    def calls(self):
        return self.inner.calls

    async def stream(self, messages, **kwargs):
        async for piece in self.inner.stream(messages, **kwargs):
            if isinstance(piece, str):
                await asyncio.sleep(self.pause)
            yield piece


@tool
async def wait(label: str, seconds: float) -> str:
    """Sleep, then return the label."""
    await asyncio.sleep(seconds)
    return label


def wait_step(n, seconds, *deps, label=None):
    return {"id": f"step{n}", "description": f"wait {n}", "tool": "wait",
            "args": {"label": label or f"s{n}" + "".join(f" $step{d}" for d in deps), "seconds": seconds},
            "depends_on": [f"step{d}" for d in deps]}


def run(agent, task="go"):
    events = []
    result = agent.run(task, sinks=[events.append])
    return result, events


def test_the_first_step_starts_before_the_plan_has_finished_streaming():
    answer = "All four waits are done. " * 8 + "The last one said: $step4"
    plan = {"steps": [wait_step(1, 0.2), wait_step(2, 0.2), wait_step(3, 0.2),
                      wait_step(4, 0.1, 1, 2, 3)], "answer": answer}
    model = TrickleModel([json.dumps(plan)], chunk=20, pause=0.01)  # ~0.4 s to stream the plan
    agent = PlanExecuteAgent(model, [wait], stream_plan=True)
    timed = []

    result = agent.run("go", sinks=[lambda e: timed.append((time.perf_counter(), e))])

    assert (result.status, result.turns, result.tool_calls) == ("done", 1, 4)
    assert result.answer.endswith("The last one said: s4 s1 s2 s3")
    at = {}
    for t, e in timed:
        at.setdefault((type(e), getattr(e, "step_id", None)), t)
        if type(e) is TokenDelta:
            last_token = t
    first_start = at[(StepStarted, "step1")]
    assert first_start < last_token - 0.2  # step1 ran while the plan was still streaming
    assert at[(PlanCreated, None)] >= last_token
    # the whole plan has run by the time it has finished streaming (whole-plan: 0.3 s more)
    assert timed[-1][0] - last_token < 0.1, f"{timed[-1][0] - last_token:.3f} s after the last token"


def test_streamed_and_whole_plans_give_the_same_result():
    plan = {"steps": [{"id": "step1", "description": "books", "tool": "calculator",
                       "args": {"operation": "multiply", "a": 3, "b": 12}, "depends_on": []},
                      {"id": "step2", "description": "left", "tool": "calculator",
                       "args": {"operation": "subtract", "a": 50, "b": "$step1"}, "depends_on": ["step1"],
                       "final": True}]}
    for stream_plan in (False, True):
        agent = PlanExecuteAgent(TrickleModel([json.dumps(plan)], chunk=7, pause=0), [calculator],
                                 stream_plan=stream_plan)
        result, events = run(agent)
        assert (result.answer, result.turns, result.tool_calls) == ("14", 1, 2)
        assert [e.step_id for e in events if type(e) is StepFinished] == ["step1", "step2"]


def test_a_streamed_plan_that_goes_wrong_keeps_what_ran_and_plans_the_rest():
    bad = {"steps": [wait_step(1, 0.05), wait_step(2, 0.05),
                     {"id": "step3", "description": "weather", "tool": "weather", "args": {}, "depends_on": []},
                     wait_step(4, 0.05, 3)]}
    rest = {"steps": [wait_step(3, 0.05, 1, 2, label="done with $step1 and $step2")], "answer": "$step3"}
    model = TrickleModel([json.dumps(bad), json.dumps(rest)], chunk=30, pause=0.002)
    agent = PlanExecuteAgent(model, [wait], stream_plan=True)

    result, events = run(agent, "wait for it")

    assert (result.status, result.answer) == ("done", "done with s1 and s2")
    assert result.turns == 2 and result.tool_calls == 3  # step1, step2, then the new step3
    assert [e.step_id for e in events if type(e) is StepStarted] == ["step1", "step2", "step3"]
    [error] = [e for e in events if type(e) is Error]
    assert error.recoverable and "step3 uses the unknown tool 'weather'" in error.message
    ask = model.calls[1][-1].content
    assert ask.startswith("Part of this plan cannot run:")
    assert "- step1 (wait 1): s1" in ask and "- step2 (wait 2): s2" in ask
    assert "number new steps from step3" in ask
    [created] = [e for e in events if type(e) is PlanCreated]
    assert [s["id"] for s in created.steps] == ["step3"]


def test_a_streamed_step_may_only_depend_on_earlier_steps():
    forward = {"steps": [wait_step(1, 0.01, 2), wait_step(2, 0.01)], "answer": "$step1"}
    good = {"steps": [wait_step(1, 0.01), wait_step(2, 0.01, 1)], "answer": "$step2"}
    model = TrickleModel([json.dumps(forward), json.dumps(good)], chunk=50, pause=0)
    result, events = run(PlanExecuteAgent(model, [wait], stream_plan=True))
    assert result.answer == "s2 s1" and result.turns == 2
    assert "step1 depends on step2, which is not a step of the plan" in model.calls[1][-1].content
    assert model.calls[1][-1].content.startswith("This plan cannot run")  # nothing had run


def test_max_fixes_zero_makes_a_broken_stream_the_end():
    model = TrickleModel(["not a plan"], chunk=50, pause=0)
    result, _ = run(PlanExecuteAgent(model, [wait], stream_plan=True, max_fixes=0))
    assert result.status == "error" and result.error.startswith("no valid plan after 1 try")


# -- the scanner ------------------------------------------------------------------------------

STEP_A = '{"id": "step1", "tool": "wait", "args": {"label": "a } \\" ] {", "seconds": 0}, "depends_on": []}'
STEP_B = '{"id": "step2", "tool": "wait", "args": {"label": "[$step1]", "seconds": 0}, "depends_on": ["step1"]}'


@pytest.mark.parametrize("text", [
    '{"steps": [' + STEP_A + ", " + STEP_B + '], "answer": "$step2"}',
    '{"answer": "{x}", "steps": [' + STEP_A + "," + STEP_B + "]}",
    "[" + STEP_A + ",\n  " + STEP_B + "]",
    'Here it is:\n```json\n{"tasks": [' + STEP_A + ", " + STEP_B + "]}\n```",
])
def test_the_scanner_hands_out_each_step_object_when_it_closes(text):
    for size in (1, 3, len(text)):
        scanner = StepScanner()
        found = []
        for i in range(0, len(text), size):
            found += scanner.feed(text[i:i + size])
        assert found == [STEP_A, STEP_B]
    scanner = StepScanner()
    cut = text.index(STEP_B) + len(STEP_B) - 1  # all of step2 but its closing brace
    assert scanner.feed(text[:cut]) == [STEP_A] and scanner.feed(text[cut:]) == [STEP_B]


def test_objects_after_the_steps_array_are_not_steps():
    text = '{"steps": [' + STEP_A + '], "meta": {"a": [{"b": 1}]}}'
    assert StepScanner().feed(text) == [STEP_A]


def test_read_step_checks_a_step_against_the_ones_before():
    box = Toolbox([wait])
    first = read_step(STEP_A, [], box)
    assert first.id == "step1" and first.args["label"] == 'a } " ] {'
    assert read_step(STEP_B, [first], box).depends_on == ("step1",)
    with pytest.raises(PlanInvalid, match="step2 depends on step1, which is not a step of the plan"):
        read_step(STEP_B, [], box)
    with pytest.raises(PlanInvalid, match="step 1.id: Field required"):
        read_step('{"tool": "wait"}', [], box)
    with pytest.raises(PlanInvalid, match="not valid JSON"):
        read_step('{"id": ', [], box)


def test_read_step_reads_dependencies_off_the_references_under_a_grammar():
    box = Toolbox([wait])
    first = read_step(STEP_A, [], box, constrained=True)
    bare = json.loads(STEP_B)
    del bare["depends_on"]
    assert read_step(json.dumps(bare), [first], box, constrained=True).depends_on == ("step1",)
    with pytest.raises(PlanInvalid, match="no step step1"):  # streamed before the step it uses
        read_step(json.dumps(bare), [], box, constrained=True)
