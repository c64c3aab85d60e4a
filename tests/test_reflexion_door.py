"""Reflexion's reflections pass the model door of its run (``Run.wrap``): the run's budgets
count them, its journal keeps them (and a resumed run is served them), and its trials are
sub-runs of it - one run in the journal, one budget over trials and reflections together."""

from __future__ import annotations

import pytest

from tao import ReActAgent, ScriptedModel
from tao.agents.reflexion import Reflexion
from tao.events import RunFinished, Thought
from tao.runs.journal import Journal

TASK = "What is 6 * 7?"
REFLECTION = "Give only the number next time."


def is_42(task, result):
    return result.answer == "42", "the answer must be the number alone"


def run(agent, task=TASK):
    events = []
    result = agent.run(task, [events.append])
    return result, events


def first_trial_tokens() -> int:
    """What the first trial alone spends (the same messages, the same scripted estimate)."""
    return ReActAgent(ScriptedModel(["The answer is 42."])).run(TASK).usage.total_tokens


@pytest.mark.parametrize("where", ["reflexion", "agent"])
def test_a_token_budget_counts_the_reflection(where):
    """The first trial fits the budget; only the reflection's tokens take the run past it, so
    the second trial never reaches the model and the run ends with status "budget"."""
    budget = {"max_tokens": first_trial_tokens() + 1}
    model = ScriptedModel(["The answer is 42.", REFLECTION, "42"])
    agent = ReActAgent(model, **(budget if where == "agent" else {}))
    result, events = run(Reflexion(agent, is_42, **(budget if where == "reflexion" else {})))
    assert len(model.calls) == 2  # trial 1 and the reflection; trial 2 was stopped at the door
    assert [e.text for e in events if type(e) is Thought] == [REFLECTION]
    assert result.status == "budget" and "max_tokens" in result.error
    assert result.answer != "42"


def test_the_journal_keeps_the_reflection_in_the_reflexion_run(tmp_path):
    path = tmp_path / "runs.db"
    model = ScriptedModel(["The answer is 42.", REFLECTION, "42"])
    result, events = run(Reflexion(ReActAgent(model), is_42, journal=path))
    assert (result.status, result.answer) == ("done", "42")
    rid = events[-1].run_id
    journal = Journal(path)
    [row] = journal.runs()  # the trials are sub-runs: journaled in the Reflexion run
    assert (row["run_id"], row["agent"], row["status"]) == (rid, "reflexion-react", "done")
    replies = [r["data"]["message"]["content"] for r in journal.records(rid) if r["kind"] == "model"]
    assert replies == ["The answer is 42.", REFLECTION, "42"]


def test_the_agents_own_journal_serves_as_the_reflexion_runs(tmp_path):
    path = tmp_path / "runs.db"
    model = ScriptedModel(["The answer is 42.", REFLECTION, "42"])
    result, events = run(Reflexion(ReActAgent(model, journal=path), is_42))
    assert result.ok
    [row] = Journal(path).runs()
    assert row["run_id"] == events[-1].run_id
    assert REFLECTION in [r["data"]["message"]["content"]
                          for r in Journal(path).records(row["run_id"]) if r["kind"] == "model"]


def test_a_run_that_died_after_its_reflection_resumes_without_asking_for_it_again(tmp_path):
    path = tmp_path / "runs.db"

    def crash(messages):
        raise KeyboardInterrupt  # the process dies here: the run's journal says "running"

    events = []
    with pytest.raises(KeyboardInterrupt):
        Reflexion(ReActAgent(ScriptedModel(["The answer is 42.", REFLECTION, crash])), is_42,
                  journal=path).run(TASK, [events.append])
    [row] = Journal(path).runs()
    assert row["status"] == "running"

    model = ScriptedModel(["42"])  # only the second trial is left to ask
    again, resumed = [], Reflexion(ReActAgent(model), is_42, journal=path)
    result = resumed.resume(row["run_id"][:8], [again.append])
    assert (result.status, result.answer, result.turns) == ("done", "42", 3)
    assert len(model.calls) == 1 and "Give only the number" in model.calls[0][-1].content
    assert [e.text for e in again if type(e) is Thought] == [REFLECTION]  # served, shown again
    assert type(again[-1]) is RunFinished and again[-1].run_id == row["run_id"]
    assert Journal(path).runs()[0]["status"] == "done"
