"""``tao.compare``: ReAct, CodeAct and Plan-and-Execute on one task, each driven by its own
ScriptedModel, and the §7.2 table they make."""

from __future__ import annotations

import io
import json
import subprocess
import sys

import pytest
from codeact_scripts import last_observation

from tao import ScriptedModel, calculator, tool_call
from tao.compare import Row, compare, render_table

XIAOMING = "小明有 50 元，买了 3 本书每本 12 元，又买了 2 支笔每支 5 元，请问他还剩多少钱？"


def calc(operation, a, b):
    return tool_call("calculator", operation=operation, a=a, b=b)


def react_script():  # the seed's ReAct: 4 tool calls, then the answer - 5 LLM calls
    return [calc("multiply", 3, 12), calc("multiply", 2, 5), calc("add", 36, 10),
            calc("subtract", 50, 46), "他还剩 4 元。"]


def step(n, operation, a, b, *deps):
    return {"id": f"step{n}", "description": f"{operation} {a} {b}", "tool": "calculator",
            "args": {"operation": operation, "a": a, "b": b}, "depends_on": [f"step{d}" for d in deps]}


PLAN = json.dumps({"steps": [step(1, "multiply", 3, 12), step(2, "multiply", 2, 5),
                             step(3, "add", "$step1", "$step2", 1, 2),
                             step(4, "subtract", 50, "$step3", 3)], "answer": "他还剩 $step4 元"})


def codeact_script():  # the seed's CodeAct: one block, then the answer - 2 LLM calls
    return ["```python\nspent = add(multiply(3, 12), multiply(2, 5))\nprint(subtract(50, spent))\n```",
            lambda messages: f"他还剩 {last_observation(messages)} 元。"]


def table(rows) -> str:
    from rich.console import Console

    console = Console(file=io.StringIO(), width=200, color_system=None)
    render_table(rows, console)
    return console.file.getvalue()


def test_react_and_plan_side_by_side_on_the_seed_task():
    models = {"react": ScriptedModel(react_script()), "plan": ScriptedModel([PLAN])}
    react, plan = compare(XIAOMING, models, agents=("react", "plan"))

    assert (react.architecture, react.status, react.answer) == ("ReAct", "done", "他还剩 4 元。")
    assert (react.llm_calls, react.actions, react.unit) == (5, 4, "tool calls")
    assert (plan.architecture, plan.status, plan.answer) == ("Plan-and-Execute", "done", "他还剩 4 元")
    assert (plan.llm_calls, plan.actions, plan.unit, plan.tool_calls) == (1, 4, "steps", 4)
    for row in (react, plan):
        assert row.tokens == row.prompt_tokens + row.completion_tokens > 0 and row.seconds > 0
        assert row.note is None and row.to_dict()["agent"] == row.agent

    out = table([react, plan])
    for header in ("Architecture", "LLM calls (turns)", "Tool calls / executions / steps",
                   "Tokens (prompt+completion)", "Seconds", "Answer"):
        assert header in out
    cells = {line.split("│")[1].strip(): [c.strip() for c in line.split("│")[2:-1]]
             for line in out.splitlines() if line.startswith("│")}
    assert cells["ReAct"] == ["5", "4 tool calls", f"{react.tokens} ({react.prompt_tokens}+"
                              f"{react.completion_tokens})", f"{react.seconds:.2f}", "他还剩 4 元。"]
    assert cells["Plan-and-Execute"][:2] == ["1", "4 steps"] and cells["Plan-and-Execute"][-1] == "他还剩 4 元"


def test_one_model_serves_every_agent_in_turn():
    model = ScriptedModel(react_script() + [PLAN])  # ReAct runs first, then the plan
    rows = compare(XIAOMING, model, agents=("react", "plan"))
    assert [r.answer for r in rows] == ["他还剩 4 元。", "他还剩 4 元"] and model.remaining == 0


def test_codeact_row_is_skipped_with_a_note_when_it_cannot_be_imported(monkeypatch):
    monkeypatch.setitem(sys.modules, "tao.agents.codeact", None)  # import raises ImportError
    models = {"react": ScriptedModel(react_script()), "codeact": ScriptedModel([]),
              "plan": ScriptedModel([PLAN])}
    react, codeact, plan = compare(XIAOMING, models)
    assert react.status == plan.status == "done"
    assert codeact.status == "skipped" and codeact.note.startswith("CodeAct is not available: ")
    assert "tao.agents.codeact cannot be imported" in codeact.note
    out = table([react, codeact, plan])
    assert "not run (see below)" in out and "note: CodeAct is not available" in out


def test_codeact_row_when_codeact_is_there():
    import tao.agents.codeact  # noqa: F401 - a broken import fails here, not as a skipped row
    [row] = compare(XIAOMING, {"codeact": ScriptedModel(codeact_script())}, agents=("codeact",))
    assert (row.status, row.answer, row.llm_calls, row.actions, row.unit) == (
        "done", "他还剩 4 元。", 2, 1, "executions")
    assert " 1 execution │" in table([row])


def test_a_failed_run_shows_its_error_in_the_answer_column():
    [row] = compare("x", {"react": ScriptedModel([calc("add", 1, 1)] * 2)}, agents=("react",), max_turns=2)
    assert row.status == "max_turns" and row.answer is None
    assert "max_turns:" in table([row])


def test_sinks_watch_an_agents_run():
    seen = []
    compare(XIAOMING, {"plan": ScriptedModel([PLAN])}, agents=("plan",), sinks={"plan": [seen.append]})
    assert seen[0].kind == "run_started" and seen[-1].kind == "run_finished"


def test_caller_mistakes_are_exceptions_at_once():
    with pytest.raises(ValueError, match="unknown agent 'langgraph'"):
        compare("x", ScriptedModel([]), agents=("react", "langgraph"))
    with pytest.raises(ValueError, match="no model given for 'plan'"):
        compare("x", {"react": ScriptedModel(["ok"])}, agents=("react", "plan"))
    assert Row("react", "ReAct", "tool calls").status == "skipped"


def test_importing_compare_does_not_import_rich():
    code = "import sys, tao.compare; assert 'rich' not in sys.modules, 'rich imported'"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_each_react_name_builds_the_protocol_it_names():
    from tao.agents.protocols import JsonProtocol, TextProtocol, ToolsProtocol
    from tao.compare import build

    kinds = {name: type(build(name, ScriptedModel(["x"]), [calculator]).protocol)
             for name in ("react", "react-text", "react-json")}
    assert kinds == {"react": ToolsProtocol, "react-text": TextProtocol, "react-json": JsonProtocol}
    with pytest.raises(ValueError, match="unknown agent 'react-xml'"):
        build("react-xml", ScriptedModel(["x"]), [calculator])
