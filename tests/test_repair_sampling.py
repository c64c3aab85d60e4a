"""The reply after a failed action is drawn, not greedy, where the model is greedy.

A greedy 1.5B shown its ``AssertionError`` tends to send the same block again: the error it just
read changes too little of its prompt. With ``repair_temperature`` set, the reply that follows a
failed action (a tool call that returned an error, a code block that raised) samples at that
temperature, seeded by the turn so that a run repeats; every other reply stays greedy. A model
that samples already (an endpoint's own temperature), or a run whose sampling is set by another
(``Vote``), is left alone.
"""

from __future__ import annotations

import pytest
from plan_scripts import plan_reply

from tao import CodeActAgent, PlanExecuteAgent, ReActAgent, ScriptedModel, calculate, tool_call
from tao.models.sampling import Sampling, current, sampling


class Greedy(ScriptedModel):
    """A scripted model that decodes greedily, as the embedded model does by default, and keeps
    the sampling each of its calls ran under."""

    temperature = 0.0

    def __init__(self, replies):
        self.drawn: list[Sampling | None] = []

        def seen(reply):
            def give(messages):
                self.drawn.append(current())
                return reply
            return give

        super().__init__([seen(r) for r in replies])


def test_react_samples_only_the_reply_after_a_failed_call():
    bad = tool_call("calculate", expression="3*x + 17 = 80 = y")
    good = tool_call("calculate", expression="(80 - 17) / 3")
    model = Greedy([bad, good, "21"])
    agent = ReActAgent(model, tools=[calculate])
    agent.repair_temperature = 0.7
    result = agent.run("A number times 3 plus 17 is 80. What is it?")
    assert (result.status, result.answer) == ("done", "21")
    assert model.drawn == [None, Sampling(0.7, seed=2), None]


def test_codeact_samples_the_repair_of_a_block_that_raised():
    broken = "```python\ndef double(n):\n    return n + n + 1\nassert double(2) == 4\n```"
    fixed = "```python\ndef double(n):\n    return n * 2\nassert double(2) == 4\nfinal_answer('done')\n```"
    model = Greedy([broken, fixed])
    agent = CodeActAgent(model, sandbox="subprocess", helpers=False)
    agent.repair_temperature = 0.5
    result = agent.run("Write double(n).")
    assert (result.status, result.answer) == ("done", "done")
    assert model.drawn == [None, Sampling(0.5, seed=2)]


def test_a_plan_written_after_a_failed_step_is_drawn_too():
    """Plan-and-Execute's re-plan answers a failure: a greedy planner shown ``division by
    zero`` tends to plan the same expression again (issue 26: ``$tank`` three plans in a row)."""
    bad = {"steps": [{"id": "step1", "description": "the share", "tool": "calculate",
                      "args": {"expression": "12 / 0"}, "depends_on": []}], "answer": "$step1"}
    good = {"steps": [{"id": "step2", "description": "the share", "tool": "calculate",
                       "args": {"expression": "12 / 3"}, "depends_on": []}], "answer": "$step2"}
    model = Greedy([plan_reply(bad), plan_reply(good)])
    agent = PlanExecuteAgent(model, [calculate])
    agent.repair_temperature = 0.7
    result = agent.run("12 apples shared by 3 children: how many each?")
    assert (result.status, result.answer) == ("done", "4")
    assert model.drawn == [None, Sampling(0.7, seed=2)]


def test_off_by_default_and_for_a_model_that_samples_already():
    bad = tool_call("calculate", expression="1/0")
    model = Greedy([bad, "no answer: division by zero"])
    ReActAgent(model, tools=[calculate]).run("What is 1/0?")
    assert model.drawn == [None, None]  # the class default: no repair sampling

    model = Greedy([bad, "no answer"])
    model.temperature = 1.0  # an endpoint's own temperature: not overridden
    agent = ReActAgent(model, tools=[calculate])
    agent.repair_temperature = 0.7
    agent.run("What is 1/0?")
    assert model.drawn == [None, None]


def test_a_run_whose_sampling_is_set_keeps_it():
    """``Vote``'s sampled runs set their own draw for every call: the repair does not replace it."""
    model = Greedy([tool_call("calculate", expression="1/0"), "no answer"])
    agent = ReActAgent(model, tools=[calculate])
    agent.repair_temperature = 0.7
    with sampling(0.9, seed=5):
        agent.run("What is 1/0?")
    assert model.drawn == [Sampling(0.9, 5), Sampling(0.9, 5)]


@pytest.mark.parametrize("value", [0, None])
def test_zero_or_none_turns_it_off(value):
    model = Greedy([tool_call("calculate", expression="1/0"), "no answer"])
    agent = ReActAgent(model, tools=[calculate])
    agent.repair_temperature = value
    agent.run("What is 1/0?")
    assert model.drawn == [None, None]
