"""What the guard writes to the audit log (``audit=PATH`` on any agent): run start and end, every
tool call with its status, every approval decision; secret arguments' values never reach it.
The log's own chain and verification are tests/test_audit.py's."""

from __future__ import annotations

from plan_scripts import SEED_PLAN, SEED_TASK, plan_reply

from tao import CodeActAgent, ReActAgent, ScriptedModel, calculator, tool, tool_call
from tao.guard.audit import entries, verify
from tao.plan.agent import PlanExecuteAgent


@tool(secret=("pin",), requires_approval=lambda args: args["amount"] > 100)
def pay(to: str, amount: int, pin: str) -> str:
    """Pay someone.

    Args:
        to: who
        amount: how much
        pin: the card's PIN
    """
    return f"paid {to} {amount}"


def records(path):
    assert verify(path).ok
    return list(entries(path))


def test_react_run_tool_calls_and_approvals_reach_the_log(tmp_path):
    log = tmp_path / "audit.jsonl"
    model = ScriptedModel([[tool_call("pay", to="ann", amount=5, pin="pin-4711-zz"),
                            tool_call("pay", to="bob", amount=500, pin="pin-4711-zz")],
                           tool_call("calculator", operation="add", a=1, b=2), "done"])
    agent = ReActAgent(model, [pay, calculator], audit=log, deny=["calculator"],
                       approve=lambda r: False)
    result = agent.run("pay them")
    rs = records(log)
    assert [r["kind"] for r in rs] == ["run.start", "approval", "tool.call", "tool.call",
                                       "tool.call", "run.end"]
    assert rs[0]["agent"] == "react" and rs[0]["task"] == "pay them"
    assert rs[1]["tool"] == "pay" and rs[1]["decision"] == "rejected" and len(rs[1]["digest"]) == 64
    calls = {(r["tool"], r["arguments"].get("to")): r["status"] for r in rs if r["kind"] == "tool.call"}
    assert calls == {("pay", "ann"): "ok", ("pay", "bob"): "rejected", ("calculator", None): "denied"}
    assert rs[-1]["status"] == result.status == "done"
    assert len({r["run_id"] for r in rs}) == 1
    assert "pin-4711-zz" not in log.read_text()  # not hex: no hash or id can hold it by chance


def test_codeact_bridge_calls_and_both_plan_executors_are_logged(tmp_path):
    log = tmp_path / "codeact.jsonl"
    model = ScriptedModel(["```python\nprint(pay('ann', 5, pin='4711'))\n```", "done"])
    CodeActAgent(model, [pay], sandbox="bwrap", helpers=False, audit=log).run("pay ann")
    rs = records(log)
    assert [r["kind"] for r in rs] == ["run.start", "tool.call", "run.end"]
    assert rs[1]["arguments"] == {"to": "ann", "amount": 5, "pin": "***"}

    log = tmp_path / "plan.jsonl"
    PlanExecuteAgent(ScriptedModel([plan_reply(SEED_PLAN)]), [calculator], audit=log).run(SEED_TASK)
    rs = records(log)
    assert sorted(r["call_id"] for r in rs if r["kind"] == "tool.call") == \
        ["step1", "step2", "step3", "step4"]


def test_a_sub_agent_writes_to_its_parent_s_log(tmp_path):
    log = tmp_path / "audit.jsonl"
    plan = {"steps": [{"id": "step1", "description": "add", "instruction": "1+2",
                       "depends_on": []}], "answer": "$step1"}
    step_agent = ReActAgent(ScriptedModel([tool_call("calculator", operation="add", a=1, b=2), "3"]),
                            [calculator])
    PlanExecuteAgent(ScriptedModel([plan_reply(plan)]), [calculator], step_agent=step_agent,
                     audit=log).run("1+2?")
    rs = records(log)
    plan_run = rs[0]["run_id"]
    child = [r for r in rs if r["run_id"] != plan_run]
    assert [r["kind"] for r in child] == ["run.start", "tool.call", "run.end"]
    assert child[0]["parent_run"] == plan_run


def test_an_audit_path_that_cannot_be_written_fails_at_construction(tmp_path):
    import pytest

    from tao.guard.audit import AuditError

    (tmp_path / "file").write_text("")
    with pytest.raises(AuditError, match=r"cannot write the audit log .*file/audit.jsonl: Not a "
                                         r"directory .*audit=False"):
        ReActAgent(ScriptedModel(["hi"]), [calculator], audit=tmp_path / "file" / "audit.jsonl")


def test_a_call_a_budget_refuses_is_in_the_log(tmp_path):
    log = tmp_path / "audit.jsonl"
    model = ScriptedModel([tool_call("calculator", operation="add", a=1, b=i) for i in range(3)])
    result = ReActAgent(model, [calculator], audit=log, max_tool_calls=2).run("add")
    calls = [(r["arguments"]["b"], r["status"]) for r in records(log) if r["kind"] == "tool.call"]
    assert calls == [(0, "ok"), (1, "ok"), (2, "budget")]
    assert records(log)[-1]["status"] == result.status == "budget"
