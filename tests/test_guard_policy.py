"""Tool policies and human approval (tao.guard) on every agent: ReAct with native calls and both
text protocols, CodeAct through the bridge of a real bwrap sandbox, Plan-and-Execute on the async
and the Ray executor. Driven by ScriptedModel; the tools count the times they really ran."""

from __future__ import annotations

import json

import pytest
from plan_scripts import SEED_PLAN, SEED_TASK, plan_reply

from tao import CodeActAgent, ReActAgent, ScriptedModel, calculator, tool, tool_call
from tao.events import (
    Action,
    ApprovalDecided,
    ApprovalRequested,
    CodeExecution,
    ExecutionFinished,
    Observation,
    StepFailed,
    StepStarted,
)
from tao.guard import Decision, matches
from tao.plan.agent import PlanExecuteAgent

PROTOCOLS = ["tools", "text", "json"]


def call(protocol: str, name: str, **arguments):
    if protocol == "tools":
        return tool_call(name, **arguments)
    if protocol == "json":
        return json.dumps({"thought": "go", "action": name, "action_input": arguments})
    return f"Thought: go\nAction: {name}\nAction Input: {json.dumps(arguments)}"


def final(protocol: str, answer: str = "done"):
    if protocol == "tools":
        return answer
    if protocol == "json":
        return json.dumps({"thought": "ok", "action": "final", "action_input": answer})
    return f"Thought: ok\nFinal Answer: {answer}"


def shell_tool(ran: list, **marks):
    @tool(**marks)
    def shell(command: str) -> str:
        """Run a shell command.

        Args:
            command: the command line
        """
        ran.append(command)
        return f"ran {command}"

    return shell


def run(agent, task="clean up"):
    events: list = []
    return agent.run(task, sinks=[events.append]), events


def of(events, kind):
    return [e for e in events if type(e) is kind]


# -- policies on ReAct ----------------------------------------------------------------------------

@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_denied_tool_never_runs_and_the_model_reads_why(protocol):
    ran: list = []
    model = ScriptedModel([call(protocol, "shell", command="ls"), final(protocol)])
    result, events = run(ReActAgent(model, [shell_tool(ran)], protocol=protocol, deny=["shell"]))
    assert result.ok and ran == []
    [obs] = of(events, Observation)
    assert obs.is_error and "denied by this run's policy" in obs.content
    assert "denied by this run's policy" in model.calls[1][-1].content  # what the model read


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_tool_outside_the_allow_list_never_runs(protocol):
    ran: list = []
    model = ScriptedModel([call(protocol, "shell", command="ls"), final(protocol)])
    agent = ReActAgent(model, [shell_tool(ran), calculator], protocol=protocol, allow=["calculator"])
    result, events = run(agent, "列出文件")
    assert ran == [] and result.ok
    [obs] = of(events, Observation)
    assert "不允许使用工具 'shell'" in obs.content and "calculator" in obs.content  # zh task: zh text


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_predicate_gates_only_the_matching_calls(protocol):
    ran: list = []
    asked: list = []

    def approve(request):
        asked.append(request.arguments["command"])
        return Decision.reject("not on my disk")

    shell = shell_tool(ran, requires_approval=matches(r"\b(rm|curl|sudo)\b", "command"))
    model = ScriptedModel([call(protocol, "shell", command="ls"),
                           call(protocol, "shell", command="rm -rf ~"), final(protocol)])
    result, events = run(ReActAgent(model, [shell], protocol=protocol, approve=approve))
    assert ran == ["ls"] and asked == ["rm -rf ~"]
    rejected = of(events, Observation)[1]
    assert rejected.is_error and "rejected" in rejected.content and "not on my disk" in rejected.content
    # the request and its decision come before anything else of that call
    kinds = [type(e) for e in events if type(e) in (ApprovalRequested, ApprovalDecided, Action, Observation)]
    assert kinds == [Action, Observation, ApprovalRequested, ApprovalDecided, Action, Observation]


# -- approval: approve / reject / edit, three at once --------------------------------------------

def test_three_gated_calls_of_one_turn_are_asked_together_then_run_as_decided():
    ran: list = []
    batches: list = []

    class Approver:  # gets the whole batch
        def decide(self, requests):
            batches.append([r.arguments["command"] for r in requests])
            return [True, Decision.reject("too risky"), Decision.edit({"command": "rm -ri build"})]

    shell = shell_tool(ran, requires_approval=True)
    model = ScriptedModel([[tool_call("shell", command="ls"), tool_call("shell", command="sudo reboot"),
                            tool_call("shell", command="rm -rf build")], "done"])
    result, events = run(ReActAgent(model, [shell], approve=Approver()))
    assert batches == [["ls", "sudo reboot", "rm -rf build"]]
    assert sorted(ran) == ["ls", "rm -ri build"]  # the rejected call ran 0 times
    kinds = [e.kind for e in events if type(e) in (ApprovalRequested, ApprovalDecided, Action)]
    assert kinds == ["approval_requested"] * 3 + ["approval_decided"] * 3 + ["action"] * 3
    assert [d.verdict for d in of(events, ApprovalDecided)] == ["approved", "rejected", "edited"]
    assert of(events, Action)[2].call.arguments == {"command": "rm -ri build"}  # shown as it runs
    obs = of(events, Observation)
    assert obs[0].content == "ran ls"
    assert "too risky" in obs[1].content
    assert "changed the arguments" in obs[2].content and "rm -ri build" in obs[2].content
    assert obs[2].content.endswith("ran rm -ri build")


def test_a_decision_is_bound_to_the_digest_of_what_it_was_shown():
    ran: list = []
    requests: list = []

    def approve(request):
        requests.append(request)
        return Decision.approve(digest="0" * 64)  # a decision made for some other call

    model = ScriptedModel([tool_call("shell", command="rm -rf /"), "done"])
    result, events = run(ReActAgent(model, [shell_tool(ran, requires_approval=True)], approve=approve))
    assert ran == [] and len(requests[0].digest) == 64
    [decided] = of(events, ApprovalDecided)
    assert decided.verdict == "rejected" and "other arguments" in decided.reason
    assert decided.digest == requests[0].digest == of(events, ApprovalRequested)[0].digest


def test_without_an_approver_and_no_terminal_a_gated_call_is_rejected_saying_why():
    ran: list = []  # pytest's stdin is not a terminal, as in CI
    model = ScriptedModel([tool_call("shell", command="ls"), "done"])
    result, events = run(ReActAgent(model, [shell_tool(ran, requires_approval=True)]))
    assert ran == [] and result.ok
    [decided] = of(events, ApprovalDecided)
    assert decided.by == "auto" and "stdin is not a terminal" in decided.reason
    assert "stdin is not a terminal" in of(events, Observation)[0].content


def test_an_async_callback_and_require_approval_by_name():
    ran: list = []

    async def approve(request):
        return request.tool == "shell"

    model = ScriptedModel([tool_call("shell", command="ls"), "done"])
    result, _ = run(ReActAgent(model, [shell_tool(ran)], approve=approve, require_approval=["shell"]))
    assert ran == ["ls"]


def test_bad_guard_settings_fail_at_construction():
    with pytest.raises(TypeError, match="unexpected keyword argument 'alow'"):
        ReActAgent(ScriptedModel([]), alow=["x"])
    with pytest.raises(TypeError, match="approve="):
        ReActAgent(ScriptedModel([]), approve="yes")
    with pytest.raises(TypeError, match="requires_approval"):
        tool(requires_approval="always")(lambda x: x)
    with pytest.raises(TypeError, match="untrusted_output"):
        tool(untrusted_output="web")(lambda x: x)


def test_a_misspelt_tool_name_in_a_policy_is_an_error_not_an_ungated_tool():
    ran: list = []
    for key in ("deny", "require_approval", "high_risk", "allow"):
        agent = ReActAgent(ScriptedModel([call("tools", "shell", command="ls"), "ok"]),
                           [shell_tool(ran), calculator], **{key: ["shel"]})
        with pytest.raises(ValueError, match=rf"{key} names 'shel', which is no tool of this run; "
                                             r"did you mean 'shell'\? \(tools: calculator, shell\)"):
            agent.run("x")
    assert ran == []
    # a name far from every tool is another project's, not a typo: the run goes on
    agent = ReActAgent(ScriptedModel([call("tools", "shell", command="ls"), "ok"]),
                       [shell_tool(ran)], deny=["send_email"])
    assert agent.run("x").status == "done" and ran == ["ls"]


def test_a_misspelt_verdict_never_reads_as_approval():
    """``Decision("deny")`` is the approver's bug: the run ends saying so, the call never ran."""
    with pytest.raises(ValueError, match="'approved', 'rejected' or 'edited', not 'deny'"):
        Decision("deny")
    with pytest.raises(TypeError, match="new arguments as a dict, not list"):
        Decision("edited", arguments=["rm -rf ~"])
    ran: list = []
    agent = ReActAgent(ScriptedModel([call("tools", "shell", command="rm -rf ~"), "ok"]),
                       [shell_tool(ran, requires_approval=True)], approve=lambda r: Decision("deny"))
    result, events = run(agent)
    assert ran == [] and result.status == "error" and "not 'deny'" in result.error
    assert not of(events, Action)


# -- CodeAct: the code's tool calls, through the sandbox bridge ----------------------------------

CODE = ("```python\nfor c in ['ls', 'rm -rf ~']:\n    try:\n        print(shell(c))\n"
        "    except ToolError as e:\n        print('refused:', e)\n```")


def test_codeact_policies_hold_for_the_calls_its_code_makes():
    ran: list = []
    seen: list = []
    shell = shell_tool(ran, requires_approval=matches(r"\brm\b"))
    model = ScriptedModel([CODE, "done"])
    agent = CodeActAgent(model, [shell], sandbox="bwrap", helpers=False,
                         approve=lambda r: seen.append(r.arguments) or Decision.reject("no rm"))
    result, events = run(agent)
    assert result.ok and ran == ["ls"] and seen == [{"command": "rm -rf ~"}]
    [done] = of(events, ExecutionFinished)
    assert "ran ls" in done.stdout and "refused:" in done.stdout and "no rm" in done.stdout
    kinds = [type(e) for e in events if type(e) in (CodeExecution, ApprovalRequested,
                                                    ApprovalDecided, ExecutionFinished)]
    assert kinds == [CodeExecution, ApprovalRequested, ApprovalDecided, ExecutionFinished]

    ran.clear()
    denied = CodeActAgent(ScriptedModel([CODE, "done"]), [shell], sandbox="bwrap", helpers=False,
                          deny=["shell"])
    result, events = run(denied)
    assert ran == [] and of(events, ExecutionFinished)[0].stdout.count("denied by this run's policy") == 2


# -- Plan-and-Execute: steps are decided before they start ---------------------------------------

@pytest.fixture(params=["async", "ray"])
def executor(request):
    if request.param == "ray":
        ray = pytest.importorskip("ray")
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
                 _node_ip_address="127.0.0.1", object_store_memory=80 * 1024 * 1024,
                 configure_logging=False)
        yield "ray"
        ray.shutdown()
    else:
        yield "async"


def test_plan_steps_are_gated_before_they_start(executor):
    asked: list = []

    def approve(request):
        asked.append(request.call_id)
        if request.arguments["operation"] == "add":
            return Decision.edit({**request.arguments, "b": 0})  # step3 = 36 + 0
        return True

    model = ScriptedModel([plan_reply(SEED_PLAN)])
    agent = PlanExecuteAgent(model, [calculator], executor=executor, approve=approve,
                             require_approval=["calculator"])
    result, events = run(agent, SEED_TASK)
    assert result.ok and result.answer == "他还剩 14 元"  # 50 - (36 + 0): the edit ran
    assert sorted(asked) == ["step1", "step2", "step3", "step4"]
    assert of(events, ApprovalRequested)[0].call_id in ("step1", "step2")
    first = [e for e in events if type(e) in (ApprovalRequested, StepStarted)][:3]
    assert [type(e) for e in first] == [ApprovalRequested, ApprovalRequested, StepStarted]  # 1+2 together
    [step3] = [e for e in of(events, StepStarted) if e.step_id == "step3"]
    assert step3.args["b"] == 0


def test_a_denied_or_rejected_step_fails_without_starting(executor):
    model = ScriptedModel([plan_reply(SEED_PLAN)])
    agent = PlanExecuteAgent(model, [calculator], executor=executor, max_replans=0,
                             deny=["calculator"])
    result, events = run(agent, SEED_TASK)
    assert result.status == "error" and of(events, StepStarted) == []
    assert {f.step_id for f in of(events, StepFailed)} == {"step1", "step2"}  # zh task: zh text
    assert all("策略禁止工具 'calculator'" in f.error for f in of(events, StepFailed))

    model = ScriptedModel([plan_reply(SEED_PLAN)])
    agent = PlanExecuteAgent(model, [calculator], executor=executor, max_replans=0,
                             require_approval=["calculator"],
                             approve=lambda r: r.call_id != "step2" or Decision.reject("no pens"))
    result, events = run(agent, SEED_TASK)
    assert "step2" not in {e.step_id for e in of(events, StepStarted)}
    [failed] = [f for f in of(events, StepFailed) if f.step_id == "step2"]
    assert "no pens" in failed.error and failed.attempts == 1  # not retried


# -- sub-agents: a step agent runs under its plan's guard ----------------------------------------

def test_a_step_agent_is_held_by_the_plan_s_policy_approver_and_budget():
    ran: list = []
    asked: list = []
    plan = {"steps": [{"id": "step1", "description": "clean", "instruction": "clean up",
                       "depends_on": []}], "answer": "$step1"}
    step_model = ScriptedModel([tool_call("shell", command="ls"), tool_call("shell", command="rm x"),
                                "cleaned"])
    step_agent = ReActAgent(step_model, [shell_tool(ran, requires_approval=matches(r"\brm\b"))])
    agent = PlanExecuteAgent(ScriptedModel([plan_reply(plan)]), [calculator], step_agent=step_agent,
                             approve=lambda r: asked.append(r.arguments) or False)
    result, events = run(agent)
    assert result.ok and result.answer == "cleaned"
    assert ran == ["ls"] and asked == [{"command": "rm x"}]  # the plan's approver was asked
    nested = [e.event for e in events if e.kind == "nested"]
    assert [type(e) for e in nested if type(e) in (ApprovalRequested, Action)] == \
        [Action, ApprovalRequested, Action]

    ran.clear()
    step_model = ScriptedModel([tool_call("shell", command="ls"), "cleaned"])
    agent = PlanExecuteAgent(ScriptedModel([plan_reply(plan)]), [calculator], max_replans=0,
                             step_agent=ReActAgent(step_model, [shell_tool(ran)]), deny=["shell"])
    result, events = run(agent)
    assert ran == [] and result.answer == "cleaned"  # denied in the step agent too

    step_model = ScriptedModel([tool_call("shell", command=f"ls {i}") for i in range(5)])
    agent = PlanExecuteAgent(ScriptedModel([plan_reply(plan), plan_reply(plan)]), [calculator],
                             step_agent=ReActAgent(step_model, [shell_tool(ran)]), max_tool_calls=2,
                             max_retries=0, max_replans=0)
    result, events = run(agent)
    assert ran == ["ls 0", "ls 1"]  # the step agent's calls count against the plan's budget
    assert result.status == "budget" and result.error == "max_tool_calls=2: call 3 refused"


def test_a_sink_that_rewrites_an_approved_call_changes_nothing_that_runs():
    ran: list = []

    def tamper(event):  # a sink that rewrites the approved call before it runs
        if type(event) is Action:
            event.call.arguments["command"] = "rm -rf /"

    model = ScriptedModel([tool_call("shell", command="ls"), "done"])
    agent = ReActAgent(model, [shell_tool(ran, requires_approval=True)], approve=lambda r: True)
    events: list = []
    agent.run("list", sinks=[tamper, events.append])
    assert ran == ["ls"]  # a sink reads a copy: the call runs as it was approved
    assert of(events, Observation)[0].content == "ran ls"
