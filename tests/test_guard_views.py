"""Approvals as the live views draw them: ``tao run --agent plan`` (PlanView's tree, redrawn in
place) must stand still while the terminal approver asks, or the redraw runs over the question
and the answer being typed; ``tao code`` (CodeView) says what was decided in the user's language.
Tested on a real pty (what a user sees) and through the views' own API."""

from __future__ import annotations

import io
import time

from cli_pty import launch
from plan_scripts import SEED_PLAN, SEED_TASK, plan_reply
from rich.console import Console

from tao import ReActAgent, ScriptedModel, calculator, tool
from tao.cli.code_view import CodeView
from tao.events import (
    ApprovalDecided,
    ApprovalRequested,
    PlanCreated,
    RunStarted,
    StepStarted,
)
from tao.guard import Decision
from tao.guard.terminal import SCREEN
from tao.plan.agent import PlanExecuteAgent
from tao.sinks.plan_view import PlanView

PROMPT = "批准吗？[y]是 / [n]否 / [e]修改："  # the task is Chinese: so is the run


def test_the_plan_tree_stands_still_while_the_terminal_asks(tmp_path):
    script = f"model = ScriptedModel([{plan_reply(SEED_PLAN)!r}, '他还剩 4 元'], chunk_size=8)"
    term = launch(script, ["run", SEED_TASK, "--agent", "plan", "--require-approval", "calculator",
                           "--no-audit"], cwd=tmp_path)
    for ask in ("[1] calculator：", "[2] calculator：", "[1] calculator：", "[1] calculator："):
        term.expect(ask + PROMPT)
        time.sleep(0.8)  # the live tree redraws 4 times a second: it must not, now
        while term._read(0.1):
            pass
        assert term.screen.endswith(PROMPT), term.screen[-600:]
        term.sendline("y")
    assert term.wait_exit() == 0
    shown = term.rest()
    assert "✔ calculator: approved (terminal)" in shown and "Final Answer: 他还剩 4 元" in shown


def _terminal_view():
    out = io.StringIO()
    view = PlanView(Console(file=out, width=120, force_terminal=True, color_system=None), live=True)
    view.refresh_per_second = 20
    return view, out


def test_held_the_view_draws_nothing_and_shows_what_came_after():
    view, out = _terminal_view()
    view(RunStarted(SEED_TASK, "plan", "scripted"))
    view(PlanCreated(SEED_PLAN["steps"], 1, SEED_PLAN["answer"]))
    view(ApprovalRequested("c1", "calculator", {"operation": "multiply", "a": 3, "b": 12},
                           "the tool requires approval", "d" * 64))
    with SCREEN.held():
        assert view._live is None
        before = out.getvalue()
        view(StepStarted("step2", "2 支笔的钱", "calculator", {"operation": "multiply"}, 1))
        time.sleep(0.3)  # six refreshes' worth
        assert out.getvalue() == before
    assert view._live is not None  # drawn again, below the question
    view(ApprovalDecided("c1", "calculator", "rejected", "too dear", None, "d" * 64, "terminal"))
    view.close()
    after = out.getvalue()[len(before):]
    assert "◐ step2" in after and "✘ calculator: rejected (terminal): too dear" in after
    assert "? approval: calculator" in before  # the waiting call is in the tree


def test_a_plan_logged_to_a_pipe_says_each_approval_and_its_decision():
    out = io.StringIO()
    agent = PlanExecuteAgent(ScriptedModel([plan_reply(SEED_PLAN), "x"]), [calculator],
                             require_approval=["calculator"],
                             approve=lambda r: Decision.reject("no") if r.arguments["a"] == 2
                             else True, max_replans=0)
    agent.run(SEED_TASK, [PlanView(Console(file=out, width=160, color_system=None))])
    text = out.getvalue()
    assert '? approval: calculator {"operation": "multiply", "a": 3, "b": 12}' in text
    assert "✔ calculator: approved (callback)" in text
    assert "✘ calculator: rejected (callback): no" in text


@tool
def write_file(path: str, content: str) -> str:
    """Write a file.

    Args:
        path: where
        content: what
    """
    return f"wrote {path}: {content}"


def test_tao_code_says_an_edit_in_the_user_s_language(tmp_path):
    out = io.StringIO()
    model = ScriptedModel(['Thought: 写文件\nAction: write_file\nAction Input: '
                           '{"path": "a.txt", "content": "旧"}',
                           "Thought: 好了\nFinal Answer: 完成"])
    agent = ReActAgent(model, [write_file], protocol="text", require_approval=["write_file"],
                       approve=lambda r: Decision.edit({"path": "a.txt", "content": "新"}))
    agent.run("写一个文件", [CodeView(tmp_path, "zh", Console(file=out, width=120, color_system=None))])
    text = out.getvalue()
    assert 'write_file：参数已修改（callback），实际执行：{"path": "a.txt", "content": "新"}' in text
    assert "wrote a.txt: 新" in text
