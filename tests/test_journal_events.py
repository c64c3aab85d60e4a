"""Addressable events: every event a run emits carries the run's id, its sequence number and a
timestamp, on every agent - the numbering the trace, the journal and the audit log share."""

from __future__ import annotations

import io
import json
import time

from plan_scripts import SEED_PLAN, SEED_TASK, plan_reply

from tao import ReActAgent, ScriptedModel, calculator, tool_call
from tao.events import Nested, Observation, RunFinished, RunStarted, event_from_dict
from tao.plan.agent import PlanExecuteAgent
from tao.sinks import JsonlTrace, read_trace


def run(agent, task):
    events = []
    agent.run(task, sinks=[events.append])
    return events


def test_a_react_run_numbers_its_events_1_to_n_under_one_run_id_with_timestamps():
    before = time.time()
    model = ScriptedModel([tool_call("calculator", operation="add", a=15, b=27), "42"])
    events = run(ReActAgent(model, [calculator]), "15+27?")

    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert len({e.run_id for e in events}) == 1 and len(events[0].run_id) == 32
    stamps = [e.ts for e in events]
    assert stamps == sorted(stamps) and before <= stamps[0] <= stamps[-1] <= time.time()


def test_two_runs_of_one_agent_have_two_ids():
    agent = ReActAgent(ScriptedModel(["a", "b"]), [])
    first, second = run(agent, "one"), run(agent, "two")
    assert first[0].run_id != second[0].run_id
    assert first[0].seq == second[0].seq == 1


def test_a_plan_with_parallel_steps_numbers_every_event_once_in_emission_order():
    events = run(PlanExecuteAgent(ScriptedModel([plan_reply(SEED_PLAN)]), [calculator]), SEED_TASK)
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert {e.run_id for e in events} == {events[0].run_id}


def test_a_step_agents_events_keep_their_own_run_inside_the_nested_event():
    plan = {"steps": [{"id": "step1", "description": "ask", "instruction": "what is 2+2?",
                       "depends_on": []}], "answer": "$step1"}
    step_agent = ReActAgent(ScriptedModel(["4"]), [])
    events = run(PlanExecuteAgent(ScriptedModel([plan_reply(plan)]), [], step_agent=step_agent),
                 "2+2")
    nested = [e for e in events if type(e) is Nested]
    assert nested, "the step agent's events come out nested"
    inner = [n.event for n in nested]
    assert {n.run_id for n in nested} == {events[0].run_id}
    assert {e.run_id for e in inner} != {events[0].run_id}  # the sub-agent's own run
    assert [e.seq for e in inner] == list(range(1, len(inner) + 1))


def test_the_audit_log_names_the_run_by_the_id_its_events_carry(tmp_path):
    audit = tmp_path / "audit.jsonl"
    model = ScriptedModel([tool_call("calculator", operation="add", a=1, b=2), "3"])
    events = run(ReActAgent(model, [calculator], audit=str(audit)), "1+2?")
    ids = {json.loads(line)["run_id"] for line in audit.read_text().splitlines()}
    assert ids == {events[0].run_id}


def test_a_trace_keeps_the_numbering_and_an_old_trace_without_it_still_reads(tmp_path):
    path = tmp_path / "run.jsonl"
    model = ScriptedModel([tool_call("calculator", operation="add", a=1, b=2), "3"])
    with JsonlTrace(path) as trace:
        events = run(ReActAgent(model, [calculator]), "1+2?")
        for e in events:
            trace(e)
    back = read_trace(path)
    assert [(e.run_id, e.seq, e.ts) for e in back] == [(e.run_id, e.seq, e.ts) for e in events]
    assert back[:-1] == events[:-1]  # (the Result's duration is rounded in a trace)
    assert back[-1].result.answer == "3"

    old = io.StringIO('{"type": "run_started", "task": "t", "agent": "react", "model": "m"}\n'
                      '{"type": "observation", "call_id": "c", "name": "add", "content": "3", '
                      '"is_error": false, "turn": 1}\n')
    started, observed = read_trace(old)
    assert started == RunStarted("t", "react", "m") and started.seq is None
    assert observed.run_id is None and observed.content == "3"


def test_an_event_built_by_hand_reads_as_it_always_did():
    e = Observation("c1", "add", "3", False, 1)
    assert e.to_dict() == {"type": "observation", "call_id": "c1", "name": "add", "content": "3",
                           "is_error": False, "turn": 1, "duration_s": 0.0}
    assert event_from_dict(e.to_dict()) == e
    assert type(event_from_dict({"type": "run_finished", "seq": 9, "run_id": "r", "ts": 1.0,
                                 "result": {"answer": "a", "status": "done", "turns": 1,
                                            "tool_calls": 0}})) is RunFinished


def test_an_agent_wrapping_another_numbers_the_events_it_passes_on_as_its_own():
    from tao.agents.reflexion import Reflexion

    inner = ReActAgent(ScriptedModel(["41", "42"]), [])
    agent = Reflexion(inner, lambda task, result: result.answer == "42", max_trials=2)
    events = run(agent, "6 * 7?")
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert {e.run_id for e in events} == {events[0].run_id}


def test_tao_journal_in_the_environment_journals_agents_that_did_not_say(tmp_path, monkeypatch):
    from tao.runs import Journal

    monkeypatch.setenv("TAO_JOURNAL", str(tmp_path / "env.db"))
    events = run(ReActAgent(ScriptedModel(["hi"]), []), "hello")
    (row,) = Journal(tmp_path / "env.db").runs()
    assert row["run_id"] == events[0].run_id and row["status"] == "done"
