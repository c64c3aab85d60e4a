"""``tao eval`` through typer's CliRunner, the model patched to a ScriptedModel that reads the question."""

from __future__ import annotations

import json

import pytest
from eval_scripts import ANSWERS, calculator_model, expected_solved
from typer.testing import CliRunner

import tao.cli as cli
from tao import ScriptedModel

runner = CliRunner()


@pytest.fixture
def scripted(monkeypatch):
    """``tao eval`` resolves its --model once; it gets the scripted calculator model instead."""
    specs = []

    def resolve(spec="auto", **options):
        specs.append(spec)
        return calculator_model()

    monkeypatch.setattr("tao.models.resolve.resolve_model", resolve)
    return specs


def test_tao_eval_json_compares_agents_and_writes_the_out_dir(scripted, tmp_path):
    out = tmp_path / "calc"
    args = ["eval", "calculator", "--agent", "react,react-text", "--limit", "6", "--out", str(out),
            "--json"]
    result = runner.invoke(cli.app, args)
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    solved = expected_solved(list(ANSWERS)[:6])
    assert summary["suite"] == "calculator" and scripted == ["auto"]
    assert [(a["agent"], a["tasks"], a["solved"]) for a in summary["agents"]] == [
        ("react", 6, solved), ("react-text", 6, solved)]
    for row in summary["agents"]:
        assert {"score", "parse_failure_rate", "mean_turns", "mean_tool_calls", "mean_tokens",
                "seconds_per_task"} <= set(row)
    assert len((out / "results.jsonl").read_text("utf-8").splitlines()) == 12
    assert "| ReAct |" in (out / "report.md").read_text("utf-8")
    assert (out / "scores.svg").read_text("utf-8").startswith("<svg")

    again = runner.invoke(cli.app, args)  # everything is in --out: nothing runs again
    assert again.exit_code == 0 and json.loads(again.stdout) == summary
    assert len((out / "results.jsonl").read_text("utf-8").splitlines()) == 12


def test_tao_eval_prints_a_table_per_agent(scripted, tmp_path):
    result = runner.invoke(cli.app, ["eval", "calculator", "-a", "react", "--limit", "3",
                                     "--model", "local", "--out", str(tmp_path)],
                           env={"COLUMNS": "160"})  # rich wraps headers at 80
    assert result.exit_code == 0, result.output
    for header in ("Agent", "Score", "Parse failures", "Turns", "Tool calls", "Tokens", "s / task"):
        assert header in result.stdout
    assert "ReAct" in result.stdout and "wrote " in result.stdout and scripted == ["local"]


def test_a_jsonl_file_is_a_suite_on_the_command_line(scripted, tmp_path):
    q = next(iter(ANSWERS))
    tasks = tmp_path / "mine.jsonl"
    tasks.write_text(json.dumps({"question": q, "answer": ANSWERS[q]}) + "\n", "utf-8")
    result = runner.invoke(cli.app, ["eval", str(tasks), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["agents"][0]["tasks"] == 1


@pytest.mark.parametrize("args, message", [
    (["eval", "gsm9k"], "unknown suite 'gsm9k'"),
    (["eval", "calculator", "--agent", "react,reflexion"], "unknown agent 'reflexion'"),
    (["eval", "missing.jsonl"], "no such file: missing.jsonl"),
    (["eval", "bfcl", "--votes", "3"], "--votes needs answers to compare"),
    (["eval", "calculator", "--offset", "100000"], "--offset 100000 skips every task"),
])
def test_usage_errors_exit_2_with_a_clear_message(scripted, args, message):
    result = runner.invoke(cli.app, args)
    assert result.exit_code == 2 and message in result.output


def test_offset_slices_share_one_out_dir_and_add_up_to_the_whole(scripted, tmp_path):
    out = tmp_path / "sliced"
    first = runner.invoke(cli.app, ["eval", "calculator", "--limit", "3", "--out", str(out), "--json"])
    second = runner.invoke(cli.app, ["eval", "calculator", "--offset", "3", "--limit", "3",
                                     "--out", str(out), "--json"])
    assert first.exit_code == 0 and second.exit_code == 0, (first.output, second.output)
    ids = [json.loads(line)["task_id"] for line in (out / "results.jsonl").read_text("utf-8").splitlines()]
    assert len(ids) == 6 and len(set(ids)) == 6  # the second slice ran only its own three
    assert json.loads(second.stdout)["agents"][0]["solved"] == expected_solved(list(ANSWERS)[3:6])
    whole = runner.invoke(cli.app, ["eval", "calculator", "--limit", "6", "--out", str(out), "--json"])
    assert json.loads(whole.stdout)["agents"][0]["solved"] == expected_solved(list(ANSWERS)[:6])
    assert len((out / "results.jsonl").read_text("utf-8").splitlines()) == 6  # nothing ran again


def test_an_interrupt_exits_130_and_says_how_to_resume(monkeypatch, tmp_path):
    def interrupt(messages):
        raise KeyboardInterrupt

    monkeypatch.setattr("tao.models.resolve.resolve_model",
                        lambda spec="auto", **o: ScriptedModel([interrupt]))
    result = runner.invoke(cli.app, ["eval", "calculator", "--out", str(tmp_path / "r")])
    assert result.exit_code == 130
    assert "interrupted" in result.output and "the same command resumes" in result.output


def test_eval_is_listed_in_tao_help():
    result = runner.invoke(cli.app, ["eval", "--help"])
    assert result.exit_code == 0
    for option in ("--agent", "--model", "--limit", "--workers", "--concurrency", "--executor",
                   "--out", "--json"):
        assert option in result.output


def test_concurrency_runs_tasks_at_once_with_the_scores_of_one_at_a_time(monkeypatch, tmp_path):
    from test_eval_concurrency import Sleepy

    models = []

    def resolve(spec="auto", **options):
        models.append(Sleepy())
        return models[-1]

    monkeypatch.setattr("tao.models.resolve.resolve_model", resolve)
    args = ["eval", "calculator", "-a", "react,react-text", "--limit", "6", "--json"]
    alone = runner.invoke(cli.app, args)
    together = runner.invoke(cli.app, [*args, "--concurrency", "4", "--out", str(tmp_path)])
    assert alone.exit_code == together.exit_code == 0, together.output
    assert [m.max_in_flight for m in models] == [1, 4]
    strip = lambda rows: [{k: v for k, v in r.items() if k != "seconds_per_task"} for r in rows]
    assert strip(json.loads(together.stdout)["agents"]) == strip(json.loads(alone.stdout)["agents"])
    assert len((tmp_path / "results.jsonl").read_text("utf-8").splitlines()) == 12


def test_concurrency_on_the_embedded_model_runs_one_at_a_time_and_says_so(monkeypatch, tmp_path):
    from test_eval_concurrency import SleepyLocal

    gguf = tmp_path / "stand-in.gguf"
    gguf.write_bytes(b"GGUF")
    model = SleepyLocal(gguf)
    monkeypatch.setattr("tao.models.resolve.resolve_model", lambda spec="auto", **o: model)
    result = runner.invoke(cli.app, ["eval", "calculator", "--limit", "4", "--concurrency", "8",
                                     "--json"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "answers one call at a time" in result.output and "--workers" in result.output
    assert json.loads(result.stdout)["agents"][0]["tasks"] == 4
    assert model.stand_in.max_in_flight == 1


def test_concurrency_below_one_is_a_usage_error(scripted):
    result = runner.invoke(cli.app, ["eval", "calculator", "--concurrency", "0"])
    assert result.exit_code == 2 and "--concurrency" in result.output


def test_votes_fix_a_model_right_only_when_sampled(monkeypatch, tmp_path):
    from eval_scripts import voting_model

    monkeypatch.setattr("tao.models.resolve.resolve_model", lambda spec="auto", **o: voting_model())
    args = ["eval", "calculator", "-a", "react", "--limit", "3", "--json"]
    plain = json.loads(runner.invoke(cli.app, args).stdout)["agents"][0]
    voted = runner.invoke(cli.app, [*args, "--votes", "3", "--out", str(tmp_path)])
    assert voted.exit_code == 0, voted.output
    row = json.loads(voted.stdout)["agents"][0]
    assert (plain["solved"], row["solved"], row["mean_turns"]) == (0, 3, 3)
    assert json.loads((tmp_path / "run.json").read_text())["votes"] == 3


def test_an_answer_with_half_an_emoji_is_kept_and_reported(monkeypatch, tmp_path):
    """A model wrote a lone surrogate (half of an emoji, as the JSON escape \\ud83d): tao eval
    crashed writing its record (2026-12-08). Now it is written as its escape and read back."""
    model = ScriptedModel(["\ud83d 答案是 42"] * 3)
    monkeypatch.setattr("tao.models.resolve.resolve_model", lambda spec="auto", **o: model)
    out = tmp_path / "run"
    args = ["eval", "calculator", "-a", "react", "--limit", "2", "--out", str(out)]
    result = runner.invoke(cli.app, args, env={"COLUMNS": "160"})
    assert result.exit_code == 0, result.output
    records = [json.loads(line) for line in (out / "results.jsonl").read_text("utf-8").splitlines()]
    assert [r["answer"] for r in records] == ["\ud83d 答案是 42"] * 2  # the same string back
    assert "\\ud83d" in (out / "transcripts.jsonl").read_text("utf-8")
    assert "| ReAct |" in (out / "report.md").read_text("utf-8")
    again = runner.invoke(cli.app, args, env={"COLUMNS": "160"})  # resumed: read back, not rerun
    assert again.exit_code == 0 and model.remaining == 1
