"""``tao.runs.steps`` without a database: a stand-in for DBOS's step replay (outputs recorded in
call order, served in call order on the second run) shows what a recovered workflow gets - the
same answer with no model call and no tool call made again - and that an output recorded for
another call (parallel plan steps finishing in another order) is never used for this one."""

from __future__ import annotations

import pytest

from tao import ReActAgent, ScriptedModel, tool, tool_call
from tao.runs import steps
from tao.runs.journal import Journal


class Replay:
    """DBOS's contract for one workflow: the n-th step called gets the n-th recorded output."""

    def __init__(self):
        self.recorded: list[dict] = []
        self.served = self.ran = 0
        self.replaying = False
        self.at = 0

    async def __call__(self, key, produce):
        if self.replaying and self.at < len(self.recorded):
            self.at += 1
            self.served += 1
            return self.recorded[self.at - 1]
        self.ran += 1
        out = await steps._produced(key, produce)
        self.recorded.append(out)
        return out


@pytest.fixture
def replay(monkeypatch):
    r = Replay()
    monkeypatch.setattr(steps, "ENABLED", True)
    monkeypatch.setattr(steps, "active", lambda: True)
    monkeypatch.setattr(steps, "_steps", {steps.MODEL_STEP: r, steps.TOOL_STEP: r})
    return r


def test_a_recovered_run_gets_every_call_from_its_steps_and_makes_none_again(replay, tmp_path):
    paid = []

    @tool
    def pay(name: str) -> str:
        """Pay someone."""
        paid.append(name)
        return f"paid {name}"

    def agent(model):
        return ReActAgent(model, tools=[pay], journal=Journal(tmp_path / f"{len(paid)}.db"))

    first = agent(ScriptedModel([tool_call("pay", name="ann"), "done"])).run("pay ann")
    assert (first.answer, paid, replay.ran) == ("done", ["ann"], 3)  # model, tool, model

    replay.replaying = True  # the workflow again, on another worker, with a fresh journal
    model = ScriptedModel([])
    events = []
    again = agent(model).run("pay ann", sinks=[events.append])
    assert (again.answer, again.tool_calls, paid) == ("done", 1, ["ann"])
    assert model.calls == [] and replay.served == 3
    assert [e.kind for e in events if e.kind in ("action", "observation", "final_answer")] == \
        ["action", "observation", "final_answer"]


def test_an_output_recorded_for_another_call_is_not_used(replay, tmp_path):
    @tool
    def square(x: int) -> int:
        """x squared."""
        return x * x

    first = ReActAgent(ScriptedModel([tool_call("square", x=3), "9"]), tools=[square],
                       journal=Journal(tmp_path / "a.db")).run("3 squared?")
    assert first.answer == "9"
    replay.replaying = True  # the recorded steps belong to a run that asked another question
    model = ScriptedModel([tool_call("square", x=4), "16"])
    second = ReActAgent(model, tools=[square], journal=Journal(tmp_path / "b.db")).run(
        "4 squared?")
    assert second.answer == "16" and len(model.calls) == 2
    assert second.messages[-2].content == "16"  # the tool ran for x=4, not served x=3's 9
