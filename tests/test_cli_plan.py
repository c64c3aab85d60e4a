"""``tao run --agent plan`` and ``tao compare``, through typer's CliRunner with the model patched."""

from __future__ import annotations

import json

from typer.testing import CliRunner

import tao.cli as cli
from tao import ScriptedModel

runner = CliRunner()
TASK = "小明有 50 元，买了 3 本书每本 12 元，又买了 2 支笔每支 5 元，请问他还剩多少钱？"
PLAN = {
    "steps": [
        {"id": "step1", "description": "书的钱", "tool": "calculator",
         "args": {"operation": "multiply", "a": 3, "b": 12}, "depends_on": []},
        {"id": "step2", "description": "笔的钱", "tool": "calculator",
         "args": {"operation": "multiply", "a": 2, "b": 5}, "depends_on": []},
        {"id": "step3", "description": "一共花的钱", "tool": "calculator",
         "args": {"operation": "add", "a": "$step1", "b": "$step2"}, "depends_on": ["step1", "step2"]},
        {"id": "step4", "description": "剩下的钱", "tool": "calculator",
         "args": {"operation": "subtract", "a": 50, "b": "$step3"}, "depends_on": ["step3"]},
    ],
    "answer": "他还剩 $step4 元",
}


def patch_model(monkeypatch, replies):
    monkeypatch.setattr(cli, "resolve_model", lambda spec="auto", timeout=None: ScriptedModel(replies))


def test_plan_agent_draws_the_dag_and_answers(monkeypatch):
    patch_model(monkeypatch, [json.dumps(PLAN, ensure_ascii=False)])
    out = runner.invoke(cli.app, ["run", TASK, "--agent", "plan"])
    assert out.exit_code == 0, out.output
    for step in ("step1", "step2", "step3", "step4"):
        assert step in out.output
    assert "他还剩 4 元" in out.output


def test_plan_agent_json(monkeypatch):
    patch_model(monkeypatch, [json.dumps(PLAN, ensure_ascii=False)])
    out = runner.invoke(cli.app, ["run", TASK, "--agent", "plan", "--json"])
    data = json.loads(out.stdout)
    assert (data["answer"], data["turns"], data["tool_calls"]) == ("他还剩 4 元", 1, 4)


def test_compare_prints_one_row_per_agent(monkeypatch):
    # one scripted model per agent, handed out in the order compare() asks for them
    scripts = iter([
        ScriptedModel([json.dumps(PLAN, ensure_ascii=False)]),
    ])
    monkeypatch.setattr(cli, "resolve_model", lambda spec="auto", timeout=None: next(scripts))
    out = runner.invoke(cli.app, ["compare", TASK, "--agents", "plan", "--json"])
    assert out.exit_code == 0, out.output
    (row,) = json.loads(out.stdout)
    assert row["answer"] == "他还剩 4 元"


def test_compare_unknown_agent_is_a_usage_error(monkeypatch):
    patch_model(monkeypatch, [])
    out = runner.invoke(cli.app, ["compare", TASK, "--agents", "react,dask"])
    assert out.exit_code == 2
    assert "dask" in out.output
