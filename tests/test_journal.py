"""The run journal: every model response and tool result is in it before the next step starts,
and a run continued from it (``agent.resume(run_id)``) is served what it recorded instead of
calling the model or the tool again."""

from __future__ import annotations

import sqlite3

import pytest
from plan_scripts import plan_reply

from tao import ReActAgent, ScriptedModel, tool, tool_call
from tao.guard import Decision
from tao.plan.agent import PlanExecuteAgent
from tao.runs import Journal, JournalError, idempotency_key


def by_progress(replies):
    """A script that answers by how far the run is (tool results so far), so a resumed run's
    fresh model picks up where the journal left off."""
    def pick(messages):
        return replies[min(sum(m.role == "tool" for m in messages), len(replies) - 1)]
    return ScriptedModel([pick] * 20)


class Effects:
    """Tools whose every effect is counted: ``send`` (side effects), ``look`` (read-only)."""

    def __init__(self):
        self.sent, self.looked, self.keys = [], [], []

        @tool
        def send(to: str) -> str:
            """Send a message."""
            self.sent.append(to)
            return f"sent to {to}"

        @tool(side_effects=False)
        def look(name: str) -> str:
            """Look something up."""
            self.looked.append(name)
            return name.upper()

        @tool(idempotent=True)
        def pay(amount: int) -> str:
            """Pay; dedupes by the idempotency key."""
            self.keys.append(idempotency_key())
            return f"paid {amount}"

        self.tools = [send, look, pay]


SCRIPT = [tool_call("look", name="ann"), tool_call("send", to="ANN"),
          tool_call("pay", amount=5), "done: ANN told and paid"]


def records(path):
    with sqlite3.connect(path) as db:
        return db.execute("SELECT kind FROM records ORDER BY seq").fetchall()


def test_a_react_run_journals_each_model_response_and_each_tool_start_and_result(tmp_path):
    path = tmp_path / "runs.db"
    fx = Effects()
    result = ReActAgent(by_progress(SCRIPT), fx.tools, journal=str(path)).run("tell ann")
    assert result.answer == "done: ANN told and paid"
    kinds = [k for (k,) in records(path)]
    assert kinds == ["model", "tool.start", "tool.result"] * 3 + ["model"]
    (run,) = Journal(path).runs()
    assert run["status"] == "done" and run["agent"] == "react" and run["task"] == "tell ann"


def test_resume_serves_what_was_journaled_and_calls_nothing_again(tmp_path):
    path = tmp_path / "runs.db"
    fx = Effects()
    events = []
    first = ReActAgent(by_progress(SCRIPT), fx.tools, journal=str(path)).run("tell ann",
                                                                                [events.append])
    model = by_progress(SCRIPT)
    again = ReActAgent(model, fx.tools, journal=str(path)).resume(events[0].run_id[:8])
    assert again.answer == first.answer and again.tool_calls == first.tool_calls
    assert (fx.sent, fx.looked, len(fx.keys)) == (["ANN"], ["ann"], 1)
    assert model.calls == []  # every response came from the journal


def journal_without_the_last_result(path, tool_name):
    """The journal as a run killed while ``tool_name`` ran leaves it: its start, no result."""
    with sqlite3.connect(path) as db:
        (seq,) = db.execute("SELECT seq FROM records WHERE kind='tool.start' AND data LIKE ?",
                            (f'%"{tool_name}"%',)).fetchone()
        db.execute("DELETE FROM records WHERE seq > ?", (seq,))
        db.execute("UPDATE runs SET status='running'")
    (run_id,) = sqlite3.connect(path).execute("SELECT run_id FROM runs").fetchone()
    return run_id


def test_a_side_effecting_call_cut_short_is_asked_about_not_rerun_blindly(tmp_path):
    path = tmp_path / "runs.db"
    fx = Effects()
    ReActAgent(by_progress(SCRIPT), fx.tools, journal=str(path)).run("tell ann")
    run_id = journal_without_the_last_result(path, "send")
    asked = []

    def approve(request):
        asked.append((request.tool, request.reason))
        return Decision.reject("it went out already")

    again = ReActAgent(by_progress(SCRIPT), fx.tools, journal=str(path),
                       approve=approve).resume(run_id)
    assert fx.sent == ["ANN"]  # not sent a second time
    assert asked[0][0] == "send" and "journal" in asked[0][1]
    assert again.status == "done"


def test_a_read_only_call_cut_short_is_simply_run_again(tmp_path):
    path = tmp_path / "runs.db"
    fx = Effects()
    ReActAgent(by_progress(SCRIPT), fx.tools, journal=str(path)).run("tell ann")
    run_id = journal_without_the_last_result(path, "look")
    again = ReActAgent(by_progress(SCRIPT), fx.tools, journal=str(path)).resume(run_id)
    assert fx.looked == ["ann", "ann"] and again.answer == "done: ANN told and paid"


def test_an_idempotent_call_cut_short_runs_again_with_the_same_key(tmp_path):
    path = tmp_path / "runs.db"
    fx = Effects()
    ReActAgent(by_progress(SCRIPT), fx.tools, journal=str(path)).run("tell ann")
    run_id = journal_without_the_last_result(path, "pay")
    ReActAgent(by_progress(SCRIPT), fx.tools, journal=str(path)).resume(run_id)
    assert len(fx.keys) == 2 and fx.keys[0] == fx.keys[1]
    assert fx.keys[0].startswith(run_id + ":")


def test_a_plan_journals_its_parallel_steps_and_resumes_from_them(tmp_path):
    path = tmp_path / "runs.db"
    fx = Effects()
    plan = {"steps": [
        {"id": "step1", "description": "a", "tool": "send", "args": {"to": "a"}, "depends_on": []},
        {"id": "step2", "description": "b", "tool": "send", "args": {"to": "b"}, "depends_on": []}],
        "answer": "$step1 / $step2"}
    agent = PlanExecuteAgent(ScriptedModel([plan_reply(plan)]), fx.tools, journal=str(path))
    events = []
    first = agent.run("send both", [events.append])
    kinds = [k for (k,) in records(path)]
    assert kinds.count("tool.start") == kinds.count("tool.result") == 2 and kinds[0] == "model"
    again = PlanExecuteAgent(ScriptedModel([]), fx.tools, journal=str(path)).resume(
        events[0].run_id)
    assert again.answer == first.answer == "sent to a / sent to b"
    assert sorted(fx.sent) == ["a", "b"]


def test_resume_needs_a_journal_and_a_run_it_holds(tmp_path):
    with pytest.raises(ValueError, match="journal="):
        ReActAgent(ScriptedModel([]), []).resume("abc")
    with pytest.raises(JournalError, match="no run 'abc'"):
        ReActAgent(ScriptedModel([]), [], journal=str(tmp_path / "j.db")).resume("abc")


def test_a_journal_that_cannot_be_opened_is_an_error_before_the_run(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(JournalError, match="cannot open the run journal"):
        ReActAgent(ScriptedModel([]), [], journal=str(tmp_path / "file" / "runs.db"))


def test_a_codeact_run_journals_its_blocks_and_resumes_without_repeating_a_tool(tmp_path):
    from tao import CodeActAgent

    path = tmp_path / "runs.db"
    fx = Effects()
    replies = ["```python\nr = send(to='ann')\nprint(r)\n```",
               "```python\nfinal_answer(r + ' and done')\n```"]

    def pick(messages):
        return replies["sent to ann" in messages[-1].content]

    events = []
    first = CodeActAgent(ScriptedModel([pick] * 4), fx.tools, journal=str(path)).run(
        "tell ann", [events.append])
    assert first.answer == "sent to ann and done"
    kinds = [k for (k,) in records(path)]
    assert kinds == ["model", "tool.start", "tool.result", "code", "model", "code"]
    model = ScriptedModel([pick] * 4)
    again = CodeActAgent(model, fx.tools, journal=str(path)).resume(events[0].run_id)
    # the blocks run again in a fresh sandbox (their state is rebuilt); send is served
    assert again.answer == first.answer and fx.sent == ["ann"] and model.calls == []


def test_a_plans_step_agent_is_journaled_in_the_plans_run_and_resumed_from_it(tmp_path):
    path = tmp_path / "runs.db"
    fx = Effects()
    plan = {"steps": [{"id": "step1", "description": "tell", "instruction": "tell ann",
                       "depends_on": []}], "answer": "$step1"}
    step_model = by_progress([tool_call("send", to="ann"), "told ann"])
    agent = PlanExecuteAgent(ScriptedModel([plan_reply(plan)]), fx.tools, journal=str(path),
                             step_agent=ReActAgent(step_model, fx.tools))
    events = []
    first = agent.run("tell ann", [events.append])
    assert first.answer == "told ann"
    (run,) = Journal(path).runs()  # one run: the step agent's calls are in the plan's
    assert [k for (k,) in records(path)].count("model") == 3
    step_again = by_progress([tool_call("send", to="ann"), "told ann"])
    again = PlanExecuteAgent(ScriptedModel([]), fx.tools, journal=str(path),
                             step_agent=ReActAgent(step_again, fx.tools)).resume(run["run_id"])
    assert again.answer == "told ann" and fx.sent == ["ann"] and step_again.calls == []
