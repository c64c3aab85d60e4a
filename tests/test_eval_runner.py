"""``tao eval``'s runner: one process, worker processes and Ray agree; an interrupted run resumes;
the report says per agent what a user compares (score, parse failures, turns, tokens, time)."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import eval_scripts
import pytest
from eval_scripts import ANSWERS, calculator_model, expected_solved, right_on_even_length

from tao import ScriptedModel
from tao.errors import LocalModelError
from tao.evals.report import markdown, summarize, svg, write
from tao.evals.runner import EvalAborted, Evaluation
from tao.messages import Message

AGENTS = ["react", "react-text"]


def scores(records):
    return sorted((r["agent"], r["task_id"], r["correct"], r["turns"]) for r in records)


@pytest.fixture(scope="module")
def one_process():
    ev = Evaluation("calculator", AGENTS, calculator_model, limit=10)
    records = list(ev.run())
    assert len(records) == ev.total == 20 and ev.pending() == []
    solved = expected_solved([t.prompt for t in ev.tasks])
    assert 0 < solved < 10  # some right, some wrong: agreement below means something
    assert sum(r["correct"] for r in records) == 2 * solved
    return scores(records)


def test_worker_processes_give_the_scores_of_one_process(one_process):
    ev = Evaluation("calculator", AGENTS, calculator_model, limit=10, workers=2)
    assert scores(ev.run()) == one_process


def test_ray_actors_give_the_scores_of_one_process(one_process):
    ray = pytest.importorskip("ray")
    # the test's scripted model goes to the actors by value: Ray workers do not see tests/
    ray.cloudpickle.register_pickle_by_value(eval_scripts)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False,
             _node_ip_address="127.0.0.1", object_store_memory=80 * 1024 * 1024)
    try:
        ev = Evaluation("calculator", AGENTS, calculator_model, limit=10, workers=2, executor="ray")
        assert scores(ev.run()) == one_process
        assert ray.is_initialized()  # a Ray the caller started is left running
    finally:
        ray.shutdown()


def interrupted_after(n):
    calls = []

    def reply(messages):
        calls.append(1)
        if len(calls) > n:
            raise KeyboardInterrupt
        return right_on_even_length(messages)

    return ScriptedModel([reply] * 100)


def test_an_interrupted_run_resumes_with_the_same_out(tmp_path, one_process):
    out = tmp_path / "run"
    with pytest.raises(KeyboardInterrupt):
        for _ in Evaluation("calculator", AGENTS, interrupted_after(5), limit=10, out=out,
                            label="scripted").run():
            pass
    lines = (out / "results.jsonl").read_text("utf-8").splitlines()
    assert len(lines) == 5
    with open(out / "results.jsonl", "a", encoding="utf-8") as f:
        f.write('{"task_id": "calc-4-zh", "agent": "re')  # a crash mid-write
    model = ScriptedModel([right_on_even_length] * 100)
    again = Evaluation("calculator", AGENTS, model, limit=10, out=out, label="scripted")
    assert len(again.pending()) == 15
    assert len(list(again.run())) == 15 and len(model.calls) == 15  # finished tasks are not redone
    assert scores(again.records()) == one_process
    assert len((out / "results.jsonl").read_text("utf-8").splitlines()) == 20
    meta = json.loads((out / "run.json").read_text("utf-8"))
    assert meta["suite"].endswith("calculator.jsonl") and meta["model"] == "scripted"


def test_each_task_s_messages_are_kept_in_transcripts_beside_the_records(tmp_path):
    out = tmp_path / "run"
    records = list(Evaluation("calculator", ["react-text"], calculator_model, limit=4, out=out,
                              workers=2).run())
    assert records and all("messages" not in r for r in records)  # results.jsonl stays lean
    assert "messages" not in (out / "results.jsonl").read_text("utf-8")
    lines = [json.loads(x) for x in (out / "transcripts.jsonl").read_text("utf-8").splitlines()]
    assert sorted(x["task_id"] for x in lines) == sorted(r["task_id"] for r in records)
    wrong = next(x for x in lines if not x["correct"])  # a miss can be read, not only counted
    messages = [Message.from_dict(m) for m in wrong["messages"]]
    replies = [m.content for m in messages if m.role == "assistant"]
    assert replies == [right_on_even_length(messages)]  # the wrong answer the model gave
    with open(out / "transcripts.jsonl", "a", encoding="utf-8") as f:
        f.write('{"task_id": "calc-9')  # a crash mid-write: the next line must stand alone
    list(Evaluation("calculator", ["react-text"], calculator_model, limit=5, out=out).run())
    lines = [json.loads(x) for x in (out / "transcripts.jsonl").read_text("utf-8").splitlines()]
    assert len(lines) == 5


def test_a_resume_cannot_mix_suites_or_models_or_read_a_broken_record(tmp_path):
    out = tmp_path / "run"
    list(Evaluation("calculator", ["react"], calculator_model, limit=1, out=out).run())
    with pytest.raises(ValueError, match="holds a run of suite .* give another --out"):
        Evaluation("calculator", ["react"], "local-1.5b", out=out)
    tasks = tmp_path / "t.jsonl"
    tasks.write_text('{"question": "1+1?", "answer": "2"}\n', "utf-8")
    with pytest.raises(ValueError, match="holds a run of suite"):
        Evaluation(str(tasks), ["react"], calculator_model, out=out)
    (out / "results.jsonl").write_text("{}\n" + (out / "results.jsonl").read_text("utf-8"), "utf-8")
    with pytest.raises(ValueError, match=r"results.jsonl:1 is not a tao eval record"):
        Evaluation("calculator", ["react"], calculator_model, out=out)


def test_a_setup_error_stops_the_run_and_records_nothing(tmp_path):
    def no_weights(messages):
        raise LocalModelError("no GGUF file at /nowhere.gguf")

    ev = Evaluation("calculator", ["react"], ScriptedModel([no_weights]), out=tmp_path)
    with pytest.raises(EvalAborted, match="LocalModelError: no GGUF file"):
        list(ev.run())
    assert not (tmp_path / "results.jsonl").exists() or not (tmp_path / "results.jsonl").read_text()


def test_a_worker_that_cannot_build_its_model_stops_the_run():
    ev = Evaluation("calculator", ["react"], "no-such-model", limit=2, workers=2)
    with pytest.raises(EvalAborted, match="worker process could not start"):
        list(ev.run())


def test_bad_options_are_clear_errors():
    with pytest.raises(ValueError, match="unknown agent 'reactt'"):
        Evaluation("calculator", ["reactt"], calculator_model)
    with pytest.raises(ValueError, match="unknown executor 'dask'"):
        Evaluation("calculator", ["react"], calculator_model, executor="dask")
    with pytest.raises(ValueError, match="at least 1"):
        Evaluation("calculator", ["react"], calculator_model, workers=0)


def test_the_summary_counts_parse_failures_over_replies_and_means_per_task(tmp_path):
    q = next(iter(ANSWERS))
    tasks = tmp_path / "one.jsonl"
    tasks.write_text(json.dumps({"id": "q", "question": q, "answer": ANSWERS[q]}) + "\n", "utf-8")
    garbled = "Action: calculator\nAction Input: {"  # unparsable: corrected, then answered
    model = ScriptedModel([garbled, f"Final Answer: {ANSWERS[q]}", f"{ANSWERS[q]}"])
    ev = Evaluation(str(tasks), AGENTS[::-1], model)
    records = list(ev.run())
    text_row, tools_row = summarize(records, ev.agents)
    assert (text_row["agent"], text_row["score"], text_row["mean_turns"]) == ("react-text", 1.0, 2)
    assert (text_row["parse_failures"], text_row["replies"], text_row["parse_failure_rate"]) == (1, 2, 0.5)
    assert tools_row["parse_failure_rate"] == 0.0 and tools_row["mean_turns"] == 1
    assert text_row["mean_tokens"] > 0 and text_row["seconds_per_task"] > 0

    paths = write(tmp_path, [text_row, tools_row], records, {"suite": "one.jsonl", "model": "m"},
                  "tao eval one.jsonl --agent react-text,react")
    report = paths[0].read_text("utf-8")
    assert "| ReAct (text protocol) | 1/1 (100.0 %) | 50.0 % (1/2) | 2.00 |" in report
    assert "`tao eval one.jsonl --agent react-text,react`" in report


def test_the_chart_has_one_bar_per_agent_as_wide_as_its_score():
    rows = [{"agent": "react", "score": 0.25}, {"agent": "codeact", "score": 1.0}]
    root = ET.fromstring(svg(rows, "scores <&>"))
    bars = [r for r in root.iter("{http://www.w3.org/2000/svg}rect") if r.get("fill") == "#3b7dd8"]
    assert [float(b.get("width")) for b in bars] == [105.0, 420.0]
    texts = [t.text for t in root.iter("{http://www.w3.org/2000/svg}text")]
    assert "ReAct" in texts and "CodeAct" in texts and "25.0 %" in texts and "scores <&>" in texts


def test_failed_tasks_are_listed_in_the_report():
    records = [{"agent": "react", "task_id": "t1", "correct": False, "detail": "wrong | number",
                "status": "done", "turns": 1, "parse_failures": 0, "tool_calls": 0,
                "prompt_tokens": 1, "completion_tokens": 1, "seconds": 0.1}]
    text = markdown(summarize(records, ["react"]), records, {"suite": "s"})
    assert "- react t1: wrong \\| number" in text


def test_votes_take_the_majority_of_sampled_runs_in_one_process_and_in_workers(tmp_path):
    from eval_scripts import voting_model

    def solved(records):
        return sum(r["correct"] for r in records)

    plain = Evaluation("calculator", ["react"], voting_model, limit=4)
    assert solved(plain.run()) == 0
    voted = Evaluation("calculator", ["react"], voting_model, limit=4, votes=3, out=tmp_path)
    records = list(voted.run())
    assert solved(records) == 4
    assert all(r["turns"] == 3 for r in records)  # greedy, then two sampled runs that agree
    assert json.loads((tmp_path / "run.json").read_text())["votes"] == 3
    workers = Evaluation("calculator", ["react"], voting_model, limit=4, votes=3, workers=2)
    assert solved(workers.run()) == 4
    with pytest.raises(ValueError, match="votes"):  # a resume must vote the same way
        Evaluation("calculator", ["react"], voting_model, limit=4, out=tmp_path)


def test_votes_need_answers_to_compare():
    with pytest.raises(ValueError, match="tool calls"):
        Evaluation("bfcl", ["react"], calculator_model, votes=3)
    with pytest.raises(ValueError, match="at least 1"):
        Evaluation("calculator", ["react"], calculator_model, votes=0)
