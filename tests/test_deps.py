"""Dependencies for tools (issue 28, point 2): ``agent.run(task, deps=...)`` and ``tao.RunContext``.

A tool whose first parameter is annotated ``RunContext[Deps]`` gets the run's deps, its id, the
usage so far and how often this same call failed before. The model never sees that parameter,
and the deps never reach the audit log: only the call's arguments do.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from tao import CodeActAgent, ReActAgent, RunContext, ScriptedModel, tool, tool_call
from tao.plan.agent import PlanExecuteAgent


@dataclass
class Deps:
    user: str
    api_key: str


seen: list[RunContext[Deps]] = []


@tool
def balance(ctx: RunContext[Deps], currency: str) -> str:
    """The user's balance.

    Args:
        currency: e.g. EUR
    """
    seen.append(ctx)
    if currency == "XXX":
        raise ValueError("unknown currency")
    return f"{ctx.deps.user} has 12 {currency}"


def setup_function():
    seen.clear()


def test_the_context_parameter_is_not_in_the_schema():
    assert balance.spec.parameters["properties"].keys() == {"currency"}
    assert balance.signature() == "balance(currency: str)"


def test_a_react_tool_gets_the_runs_deps_id_and_usage():
    agent = ReActAgent(ScriptedModel([tool_call("balance", currency="EUR"), "done"]), [balance])
    result = agent.run("my balance?", deps=Deps("ann", "sk-secret"))
    assert result.messages[3].content == "ann has 12 EUR"
    ctx = seen[0]
    assert ctx.deps == Deps("ann", "sk-secret") and ctx.tool_name == "balance"
    assert len(ctx.run_id) == 32 and ctx.usage.total_tokens > 0 and ctx.retry == 0


def test_retry_counts_earlier_failures_of_the_same_call():
    script = [tool_call("balance", currency="XXX"), tool_call("balance", currency="XXX"), "no"]
    ReActAgent(ScriptedModel(script), [balance]).run("?", deps=Deps("ann", "k"))
    assert [c.retry for c in seen] == [0, 1]


def test_each_run_has_its_own_deps():
    agent = ReActAgent(ScriptedModel([tool_call("balance", currency="EUR"), "a"] * 2), [balance])
    agent.run("?", deps=Deps("ann", "k1"))
    agent.run("?", deps=Deps("bob", "k2"))
    assert [c.deps.user for c in seen] == ["ann", "bob"]
    assert seen[0].run_id != seen[1].run_id


def test_the_model_cannot_fill_the_context_itself():
    call = tool_call("balance", currency="EUR", ctx={"deps": "forged"})
    result = ReActAgent(ScriptedModel([call, "x"]), [balance]).run("?", deps=Deps("ann", "k"))
    assert "ctx" in result.messages[3].content and not seen


def test_deps_never_reach_the_audit_log(tmp_path):
    log = tmp_path / "audit.jsonl"
    agent = ReActAgent(ScriptedModel([tool_call("balance", currency="EUR"), "ok"]), [balance],
                       audit=str(log))
    agent.run("?", deps=Deps("ann", "sk-live-0123456789"))
    text = log.read_text()
    assert "balance" in text and "sk-live-0123456789" not in text and "ann" not in text
    assert all(json.loads(line) for line in text.splitlines())


def test_a_plan_step_gets_the_context():
    plan = ('{"steps": [{"id": "step1", "description": "look", "tool": "balance", '
            '"args": {"currency": "EUR"}}], "answer": "$step1"}')
    result = PlanExecuteAgent(ScriptedModel([plan]), [balance]).run("?", deps=Deps("cy", "k"))
    assert result.answer == "cy has 12 EUR" and seen[0].deps.user == "cy"


def test_codeact_code_calls_the_tool_on_the_host_with_the_context():
    code = '```python\nfinal_answer(balance("EUR"))\n```'
    agent = CodeActAgent(ScriptedModel([code]), [balance], helpers=False)
    result = agent.run("?", deps=Deps("dee", "k"))
    assert result.answer == "dee has 12 EUR" and seen[0].deps.user == "dee"


def test_outside_a_run_the_context_has_no_deps():
    import asyncio

    from tao import Toolbox

    result = asyncio.run(Toolbox([balance]).execute(tool_call("balance", currency="EUR")))
    assert result.is_error and "'NoneType' object has no attribute 'user'" in result.content
    assert seen[0].deps is None and seen[0].run_id == ""


def test_deps_are_in_no_event_a_sink_or_trace_gets():
    events: list = []
    agent = ReActAgent(ScriptedModel([tool_call("balance", currency="EUR"), "ok"]), [balance])
    agent.run("?", sinks=[events.append], deps=Deps("ann", "sk-live-0123456789"))
    assert seen and not [e for e in events if "sk-live-0123456789" in repr(e)]


def test_deps_with_their_own_equality_are_passed_as_they_are():
    class Strict:
        def __eq__(self, other):
            raise ValueError("no comparing")

    deps = Strict()
    agent = ReActAgent(ScriptedModel([tool_call("balance", currency="EUR"), "ok"]), [balance])
    agent.run("?", deps=deps)
    assert seen[0].deps is deps


def test_a_run_context_that_is_not_the_first_parameter_is_an_error():
    import pytest

    with pytest.raises(TypeError, match="must come first"):
        @tool
        def late(key: str, ctx: RunContext[Deps]) -> str:
            """Late."""
            return key


@tool(side_effects=False)
def whoami(ctx: RunContext[Deps]) -> str:
    """Who the user is."""
    return f"user={ctx.deps.user if ctx.deps else None}"


def tool_results(model):
    """What the model read back from its tools in its last call."""
    return [m.content for m in model.calls[-1] if m.role == "tool"]


def test_deps_reach_the_agents_a_run_hands_work_to():
    from tao import Reflexion, Vote
    from tao.plan.agent_tool import agent_as_tool

    def asker():
        return ReActAgent(ScriptedModel([tool_call("whoami"), "done"]), [whoami], name="asker")

    deps = Deps("ann", "k")
    # an agent used as a tool
    sub = asker()
    ReActAgent(ScriptedModel([tool_call("ask", task="who?"), "ok"]),
               [agent_as_tool(sub, "ask", "Asks")]).run("?", deps=deps)
    assert tool_results(sub.model) == ["user=ann"]
    # a plan's step agent, and an agent as a plan step's tool
    step = asker()
    plan = ('{"steps": [{"id": "step1", "description": "who", "instruction": "find the user", '
            '"depends_on": []}], "answer": "$step1"}')
    assert PlanExecuteAgent(ScriptedModel([plan]), [], step_agent=step).run(
        "?", deps=deps).answer == "done"
    assert tool_results(step.model) == ["user=ann"]
    tooled = asker()
    plan = ('{"steps": [{"id": "step1", "description": "who", "tool": "ask", '
            '"args": {"task": "who?"}}], "answer": "$step1"}')
    PlanExecuteAgent(ScriptedModel([plan]), [agent_as_tool(tooled, "ask", "Asks")]).run(
        "?", deps=deps)
    assert tool_results(tooled.model) == ["user=ann"]
    # each of Vote's runs and each of Reflexion's trials
    voted = asker()
    Vote(voted, n=1).run("?", deps=deps)
    assert tool_results(voted.model) == ["user=ann"]
    tried = asker()
    Reflexion(tried, evaluator=lambda task, result: True).run("?", deps=deps)
    assert tool_results(tried.model) == ["user=ann"]


def test_a_stream_never_read_leaves_nothing_behind():
    agent = ReActAgent(ScriptedModel(["ok"]))
    stream = agent.stream("?", deps=Deps("ann", "k"))
    del stream
    assert not agent.__dict__.get("_per_run")
    assert agent.run("?").answer == "ok"
