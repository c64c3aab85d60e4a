"""Budgets (tao.guard): max_tokens, max_cost, max_seconds, max_tool_calls and max_repeats end a run
with status "budget", the reason and the history kept - on ReAct, CodeAct and Plan-and-Execute.
ScriptedModel counts 4 characters a token, so token and cost budgets are exact here."""

from __future__ import annotations

import time

import pytest
from plan_scripts import SEED_PLAN, SEED_TASK, plan_reply

from tao import CodeActAgent, ReActAgent, ScriptedModel, calculator, tool, tool_call
from tao.events import Error, RunFinished, StepStarted
from tao.plan.agent import PlanExecuteAgent


def counter(ran: list, seconds: float = 0.0):
    @tool
    def lookup(key: str) -> str:
        """Look a key up.

        Args:
            key: the key
        """
        ran.append(key)
        time.sleep(seconds)
        return f"value of {key}"

    return lookup


def looping(n: int = 10):
    """A model that looks up a new key every turn and never answers."""
    return ScriptedModel([tool_call("lookup", key=f"k{i}") for i in range(n)])


def run(agent, task="look it all up"):
    events: list = []
    result = agent.run(task, sinks=[events.append])
    assert type(events[-1]) is RunFinished and events[-1].result is result
    return result, events


def test_max_tool_calls_refuses_the_next_call_and_ends_the_run():
    ran: list = []
    result, events = run(ReActAgent(looping(), [counter(ran)], max_tool_calls=3, max_turns=10))
    assert result.status == "budget" and not result.ok
    assert ran == ["k0", "k1", "k2"]
    assert result.error == "max_tool_calls=3: call 4 refused"
    assert len(result.messages) == 2 + 3 * 2 + 1  # system, task, 3 x (call, observation), call 4
    assert [e.message for e in events if type(e) is Error][-1].endswith("call 4 refused")


def test_max_repeats_ends_a_run_that_makes_the_same_call_again_and_again():
    ran: list = []
    model = ScriptedModel([tool_call("lookup", key="same") for _ in range(6)])
    result, _ = run(ReActAgent(model, [counter(ran)], max_repeats=2))
    assert ran == ["same", "same"] and result.status == "budget"
    assert "max_repeats=2" in result.error and "'lookup'" in result.error and "3 times" in result.error


def test_max_tokens_stops_at_the_next_door_after_the_reply_that_spent_them():
    ran: list = []
    result, _ = run(ReActAgent(looping(), [counter(ran)], max_tokens=150))
    assert result.status == "budget" and result.error.startswith("max_tokens=150: ")
    spent = int(result.error.split(": ")[1].split()[0])
    assert spent > 150 and result.usage.total_tokens == spent
    assert 0 < len(ran) < 10


def test_max_cost_uses_the_price_table_and_prices_given():
    ran: list = []
    agent = ReActAgent(looping(), [counter(ran)], max_cost=0.001,
                       prices={"scripted": [10.0, 30.0]})  # dollars per million tokens
    result, _ = run(agent)
    assert result.status == "budget" and result.error.startswith("max_cost=0.001: $0.00")
    u = result.usage
    assert (u.prompt_tokens * 10 + u.completion_tokens * 30) / 1e6 > 0.001
    with pytest.raises(ValueError, match="model 'mystery' has no price"):
        ReActAgent(ScriptedModel(["hi"], name="mystery"), max_cost=1.0).run("hi")


def test_max_cost_reads_a_user_price_file(tmp_path, monkeypatch):
    (tmp_path / "prices.toml").write_text('[prices]\n"my-model" = [1000000, 1000000]\n')
    monkeypatch.setenv("TAO_PRICES", str(tmp_path / "prices.toml"))  # a dollar a token
    ran: list = []
    model = ScriptedModel([tool_call("lookup", key=f"k{i}") for i in range(5)], name="my-model-v2")
    result, _ = run(ReActAgent(model, [counter(ran)], max_cost=5))
    assert result.status == "budget" and ran == []  # the first reply alone cost over $5


def test_max_seconds_is_the_wall_clock_of_the_run():
    ran: list = []
    start = time.perf_counter()
    result, _ = run(ReActAgent(looping(), [counter(ran, seconds=0.2)], max_seconds=0.5))
    assert result.status == "budget" and result.error.startswith("max_seconds=0.5: ")
    assert 2 <= len(ran) <= 4 and time.perf_counter() - start < 1.5


def test_bad_budgets_are_errors_at_once():
    with pytest.raises(ValueError, match="max_tokens must be above 0"):
        ReActAgent(ScriptedModel([]), max_tokens=0)
    with pytest.raises(ValueError, match="price of 'x' must be"):
        ReActAgent(ScriptedModel([]), max_cost=1, prices={"x": "free"})


def test_codeact_budgets_count_the_calls_its_code_makes():
    ran: list = []
    code = "```python\nfor i in range(6):\n    print(lookup(f'k{i}'))\n```"
    model = ScriptedModel([code, code])
    result, events = run(CodeActAgent(model, [counter(ran)], sandbox="bwrap", helpers=False,
                                      max_tool_calls=4))
    assert ran == ["k0", "k1", "k2", "k3"]
    assert result.status == "budget" and result.error == "max_tool_calls=4: call 5 refused"
    assert len(model.calls) == 1  # the model door refused the next call


def test_plan_token_budget_ends_the_run_with_its_history():
    model = ScriptedModel([plan_reply(SEED_PLAN)])
    result, events = run(PlanExecuteAgent(model, [calculator], max_tokens=10), SEED_TASK)
    assert result.status == "budget" and result.error.startswith("max_tokens=10")
    assert result.messages  # the planner's exchange is kept


def test_plan_tool_call_budget():
    model = ScriptedModel([plan_reply(SEED_PLAN)])
    agent = PlanExecuteAgent(model, [calculator], max_tool_calls=2, max_replans=1)
    result, events = run(agent, SEED_TASK)
    assert result.status == "budget" and "max_tool_calls=2" in result.error
    assert sorted(e.step_id for e in events if type(e) is StepStarted) == ["step1", "step2"]


class Silent(ScriptedModel):
    """A model that sends a few characters and then goes silent (a stalled endpoint)."""

    async def stream(self, messages, **kw):
        import asyncio

        self.calls.append(list(messages))
        yield "Thought: let me th"
        await asyncio.sleep(30)
        raise AssertionError("the silent model was not stopped")


def test_max_seconds_stops_a_tool_that_runs_on_and_a_model_that_goes_silent():
    ran: list = []
    start = time.perf_counter()
    result, _ = run(ReActAgent(ScriptedModel([tool_call("lookup", key="slow")]),
                               [counter(ran, seconds=3)], max_seconds=0.5))
    assert result.status == "budget" and result.error.startswith("max_seconds=0.5: ")
    assert ran == ["slow"] and time.perf_counter() - start < 1.5  # not after the tool's 3 s
    start = time.perf_counter()
    result, _ = run(ReActAgent(Silent([]), [counter(ran)], max_seconds=0.5))
    assert result.status == "budget" and result.error.startswith("max_seconds=0.5: ")
    assert time.perf_counter() - start < 1.5


def test_max_seconds_stops_a_plan_whose_parallel_steps_run_on():
    slow = {"steps": [{"id": f"step{i}", "description": "slow", "tool": "lookup",
                       "args": {"key": f"k{i}"}, "depends_on": []} for i in (1, 2, 3)],
            "answer": "$step1"}
    ran: list = []
    start = time.perf_counter()
    result, events = run(PlanExecuteAgent(ScriptedModel([plan_reply(slow)]), [counter(ran, 3)],
                                          max_seconds=0.5, max_replans=0))
    assert result.status == "budget" and result.error.startswith("max_seconds=0.5: ")
    assert sorted(ran) == ["k1", "k2", "k3"] and time.perf_counter() - start < 2


def test_a_budget_spent_before_parallel_steps_start_fails_none_of_their_dependents():
    """The plan's reply alone spends max_tokens: steps 1 and 2 are refused at the door, and
    steps 3 and 4 (which use their results) neither run nor fail for want of them."""
    model = ScriptedModel([plan_reply(SEED_PLAN)])
    result, events = run(PlanExecuteAgent(model, [calculator], max_tokens=300), SEED_TASK)
    assert result.status == "budget" and result.error.startswith("max_tokens=300")
    assert not [e for e in events if e.kind.startswith("step_")]
    assert [e.message for e in events if type(e) is Error] == [f"BudgetExceeded: {result.error}"]


def test_max_seconds_stops_codeact_code_that_computes_past_it():
    """Code passes neither door while it runs: the run's clock stops it all the same."""
    code = "```python\nimport time\ntime.sleep(8)\nprint('slept')\n```"
    start = time.perf_counter()
    result, events = run(CodeActAgent(ScriptedModel([code, "never read"]), [], sandbox="bwrap",
                                      helpers=False, max_seconds=1))
    assert result.status == "budget" and result.error.startswith("max_seconds=1: ")
    assert time.perf_counter() - start < 4
    assert not [e for e in events if e.kind == "execution"]  # it never finished
