"""Each policy on each agent: a model that asks for ``shell("rm -rf ~")`` under ``deny``, ``allow``
and an approval rule whose approver says no - on ReAct (native calls, text, JSON), CodeAct (the
call made by its code in a bwrap sandbox) and Plan-and-Execute (async and Ray executors). The call
never runs, and what the model reads next says why."""

from __future__ import annotations

import json

import pytest

from tao import CodeActAgent, ReActAgent, ScriptedModel, calculator, tool, tool_call
from tao.guard import Decision, matches
from tao.plan.agent import PlanExecuteAgent

RAN: list[str] = []  # module level: a Ray worker would get a copy of a closure's list


@tool
def shell(command: str) -> str:
    """Run a shell command.

    Args:
        command: the command line
    """
    RAN.append(command)
    return "ran"


POLICIES = {  # agent keywords, and what the model must read afterwards
    "deny": ({"deny": ["shell"]}, "denied by this run's policy"),
    "allow": ({"allow": ["calculator"]}, "is not allowed in this run"),
    "approval": ({"require_approval": {"shell": matches(r"\brm\b")},
                  "approve": lambda r: Decision.reject("never rm")}, "never rm"),
}


def react(protocol):
    def build(guard):
        if protocol == "tools":
            first, last = tool_call("shell", command="rm -rf ~"), "done"
        elif protocol == "json":
            first = json.dumps({"thought": "t", "action": "shell", "action_input": {"command": "rm -rf ~"}})
            last = json.dumps({"thought": "t", "action": "final", "action_input": "done"})
        else:
            first = 'Thought: t\nAction: shell\nAction Input: {"command": "rm -rf ~"}'
            last = "Thought: t\nFinal Answer: done"
        model = ScriptedModel([first, last])
        return model, ReActAgent(model, [shell, calculator], protocol=protocol, **guard)
    return build


def codeact(guard):
    code = "```python\ntry:\n    print(shell('rm -rf ~'))\nexcept ToolError as e:\n    print('refused:', e)\n```"
    model = ScriptedModel([code, "done"])
    return model, CodeActAgent(model, [shell, calculator], sandbox="bwrap", helpers=False, **guard)


def plan(executor):
    def build(guard):
        steps = {"steps": [{"id": "step1", "description": "clean", "tool": "shell",
                            "args": {"command": "rm -rf ~"}, "depends_on": []}], "answer": "$step1"}
        model = ScriptedModel([json.dumps(steps)])
        return model, PlanExecuteAgent(model, [shell, calculator], executor=executor,
                                       max_replans=0, **guard)
    return build


AGENTS = {"react-tools": react("tools"), "react-text": react("text"), "react-json": react("json"),
          "codeact": codeact, "plan-async": plan("async"), "plan-ray": plan("ray")}


@pytest.fixture(scope="module")
def ray_up():
    ray = pytest.importorskip("ray")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, _node_ip_address="127.0.0.1",
             object_store_memory=80 * 1024 * 1024, configure_logging=False)
    yield
    ray.shutdown()


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("kind", AGENTS)
def test_each_policy_on_each_agent(kind, policy, request):
    if kind == "plan-ray":
        request.getfixturevalue("ray_up")
    guard, said = POLICIES[policy]
    RAN.clear()
    model, agent = AGENTS[kind](guard)
    result = agent.run("tidy my home folder")
    assert RAN == []
    if kind.startswith("plan"):  # the step failed with the refusal, nothing left to re-plan
        assert result.status == "error" and said in result.error
    else:
        assert result.ok and said in model.calls[1][-1].content  # what the model read next
