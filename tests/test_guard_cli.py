"""The guardrail flags of ``tao run`` / ``tao code``: --deny, --require-approval with the terminal
prompt (y / n / e on a real pty) and the auto-reject when stdin is not a terminal (a child
process with stdin from /dev/null, as in CI), the budgets, and --audit FILE."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest
from cli_pty import LAUNCHER, launch
from typer.testing import CliRunner

import tao.cli as cli
from tao import ScriptedModel, tool_call
from tao.guard.audit import entries, verify

runner = CliRunner()

TOOLS = '''
from pathlib import Path
from tao import tool

@tool(secret=("password",))
def remove(path: str, password: str = "") -> str:
    """Delete a file.

    Args:
        path: the file
        password: the admin password
    """
    Path(path).unlink()
    return f"removed {path}"
'''

REMOVE = ("model = ScriptedModel([tool_call('remove', path='victim.txt', password='hunter2'), "
          "lambda m: 'done: ' + m[-1].content])")


@pytest.fixture
def project(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "tools.py").write_text(TOOLS)
    (tmp_path / "victim.txt").write_text("keep me")
    return tmp_path


def use(monkeypatch, model):
    monkeypatch.setattr(cli, "resolve_model", lambda spec="auto", timeout=None: model)


def test_a_gated_call_is_rejected_when_stdin_is_not_a_terminal(project):
    child = subprocess.run(
        [sys.executable, "-c", LAUNCHER, REMOVE, "run", "clean up", "--tools", "tools.py",
         "--require-approval", "remove", "--json", "--audit", "audit.jsonl"],
        stdin=subprocess.DEVNULL, capture_output=True, text=True, cwd=project, timeout=60)
    assert child.returncode == 0, child.stderr
    assert (project / "victim.txt").read_text() == "keep me"
    result = json.loads(child.stdout)
    assert "stdin is not a terminal" in result["answer"]
    kinds = [e["kind"] for e in entries(project / "audit.jsonl")]
    assert kinds == ["run.start", "approval", "tool.call", "run.end"]
    assert verify(project / "audit.jsonl").ok
    assert "hunter2" not in (project / "audit.jsonl").read_text()


@pytest.mark.parametrize("answer, kept", [("y", False), ("n", True)])
def test_the_terminal_prompt_approves_or_rejects(project, answer, kept):
    term = launch(REMOVE, ["run", "clean up", "--tools", "tools.py",
                           "--require-approval", "remove"], cwd=project)
    term.expect("approve? [y]es / [n]o / [e]dit")
    term.sendline(answer)
    if answer == "n":
        term.expect("Reason for the model")
        term.sendline("that file stays")
    assert term.wait_exit() == 0
    assert (project / "victim.txt").exists() == kept
    shown = term.rest()  # the decision, then the observation the model read
    assert ("rejected: that file stays" in shown) if kept else ("removed victim.txt" in shown)


def test_the_terminal_prompt_edits_the_arguments(project):
    (project / "other.txt").write_text("delete me")
    term = launch(REMOVE, ["run", "clean up", "--tools", "tools.py",
                           "--require-approval", "remove", "--audit", "audit.jsonl"], cwd=project)
    term.expect("approve? [y]es / [n]o / [e]dit")
    term.sendline("e")
    term.expect("New arguments as a JSON object")
    term.sendline('{"path": "other.txt"}')
    assert term.wait_exit() == 0
    assert (project / "victim.txt").exists() and not (project / "other.txt").exists()
    [approval] = [e for e in entries(project / "audit.jsonl") if e["kind"] == "approval"]
    assert approval["decision"] == "edited" and approval["by"] == "terminal"


def test_deny_and_budget_flags(project, monkeypatch):
    use(monkeypatch, ScriptedModel([tool_call("remove", path="victim.txt"), "ok"]))
    res = runner.invoke(cli.app, ["run", "x", "--tools", "tools.py", "--deny", "remove", "--json",
                                  "--no-audit"])
    assert res.exit_code == 0 and (project / "victim.txt").exists()

    use(monkeypatch, ScriptedModel([tool_call("calculator", operation="add", a=1, b=i)
                                    for i in range(5)]))
    res = runner.invoke(cli.app, ["run", "x", "--max-tool-calls", "2", "--json", "--no-audit"])
    assert res.exit_code == 1
    data = json.loads(res.stdout)
    assert data["status"] == "budget" and data["error"] == "max_tool_calls=2: call 3 refused"

    use(monkeypatch, ScriptedModel(["hi"]))
    res = runner.invoke(cli.app, ["run", "x", "--max-cost", "1", "--no-audit"])
    assert res.exit_code == 0, res.output  # "scripted" is in the price table (free)
    use(monkeypatch, ScriptedModel(["hi"], name="mystery-model"))
    res = runner.invoke(cli.app, ["run", "x", "--max-cost", "1", "--no-audit"])
    assert res.exit_code == 2 and "'mystery-model' has no price" in res.output
    res = runner.invoke(cli.app, ["run", "x", "--max-repeats", "0"])
    assert res.exit_code == 2 and "max-repeats" in res.output


def test_the_audit_log_is_on_by_default_in_the_data_directory(project, monkeypatch):
    monkeypatch.setenv("TAO_DATA_DIR", str(project / "data"))
    use(monkeypatch, ScriptedModel([tool_call("calculator", operation="add", a=1, b=2), "3"]))
    assert runner.invoke(cli.app, ["run", "1+2?"]).exit_code == 0
    log = project / "data" / "audit.jsonl"
    records = list(entries(log))
    assert [r["kind"] for r in records] == ["run.start", "tool.call", "run.end"]
    assert records[1]["tool"] == "calculator" and records[1]["status"] == "ok"
    assert len({r["run_id"] for r in records}) == 1 and verify(log).ok


def test_tao_code_asks_before_a_dangerous_command(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    use(monkeypatch, ScriptedModel([
        'Thought: clean\nAction: run_command\nAction Input: {"command": "rm -rf src"}',
        "Thought: ok\nAction: Finish【left as is】"]))
    (tmp_path / "ws" / "src").mkdir(parents=True)
    res = runner.invoke(cli.app, ["code", "tidy up", "--workspace", "ws", "--no-audit"])
    assert res.exit_code == 0, res.output
    assert (tmp_path / "ws" / "src").is_dir()  # rejected: stdin is not a terminal


@pytest.mark.parametrize("command", [["run", "1+2?"], ["code", "make a page"], ["chat"]])
def test_an_audit_log_that_cannot_be_written_is_a_clear_error_in_ci(project, command):
    """No terminal, and the default data directory lies under a file: exit 2 naming the log and
    how to choose another, before any model runs - not a traceback at the first tool call."""
    env = {**__import__("os").environ, "TAO_DATA_DIR": str(project / "victim.txt" / "tao")}
    child = subprocess.run(
        [sys.executable, "-c", LAUNCHER, "model = ScriptedModel([tool_call('calculator', "
         "operation='add', a=1, b=2), '3'])", *command],
        stdin=subprocess.DEVNULL, capture_output=True, text=True, cwd=project, timeout=60, env=env)
    assert child.returncode == 2, child.stderr
    said = " ".join(child.stderr.split())
    assert f"cannot write the audit log {project / 'victim.txt' / 'tao' / 'audit.jsonl'}: " \
           "Not a directory" in said and "--no-audit" in said
    assert "Traceback" not in child.stderr


def test_tao_chat_asks_and_the_answers_stay_out_of_its_line_history(tmp_path):
    script = ("model = ScriptedModel([tool_call('calculator', operation='add', a=1, b=2), '3', "
              "tool_call('calculator', operation='add', a=2, b=2), '4'])")
    term = launch(script, ["chat", "--require-approval", "calculator", "--no-audit"], cwd=tmp_path)
    term.prompt()
    term.sendline("1+2?")
    term.expect("approve? [y]es / [n]o / [e]dit")
    term.sendline("y")
    term.expect("Observation: 3")
    term.prompt()
    term.sendline("2+2?")
    term.expect("approve? [y]es / [n]o / [e]dit")
    term.sendline("n")
    term.expect("Reason for the model")
    term.sendline("not now")
    term.expect("rejected this call of 'calculator'; it was not run. Reason: not now")
    term.prompt()
    term.sendline("/exit")
    assert term.wait_exit() == 0
    assert (tmp_path / "data" / "chat_history").read_text().split() == ["1+2?", "2+2?", "/exit"]


def test_tao_code_and_chat_read_the_guardrails_from_tao_toml(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "tao.toml").write_text('deny = ["run_command"]\naudit = "logs/audit.jsonl"\n')
    (tmp_path / "ws" / "src").mkdir(parents=True)
    use(monkeypatch, ScriptedModel([
        'Thought: clean\nAction: run_command\nAction Input: {"command": "ls"}',
        "Thought: ok\nAction: Finish【denied】"]))
    res = runner.invoke(cli.app, ["code", "tidy up", "--workspace", "ws", "--sandbox", "subprocess"])
    assert res.exit_code == 0, res.output
    assert "'run_command' is denied by this run's policy" in res.output
    calls = [r for r in entries(tmp_path / "logs" / "audit.jsonl") if r["kind"] == "tool.call"]
    assert [(r["tool"], r["status"]) for r in calls] == [("run_command", "denied")]
    use(monkeypatch, ScriptedModel([tool_call("run_command", command="ls"), "no"]))
    res = runner.invoke(cli.app, ["chat", "--tools", "tao.tools.calculator:calculator"], input="go\n/exit\n")
    assert res.exit_code == 0, res.output
    assert len({r["run_id"] for r in entries(tmp_path / "logs" / "audit.jsonl")}) == 2


def test_ctrl_c_at_the_question_stops_tao_run_at_once(project):
    term = launch(REMOVE, ["run", "clean up", "--tools", "tools.py", "--require-approval", "remove"],
                  cwd=project)
    term.expect("approve? [y]es / [n]o / [e]dit")
    time.sleep(0.3)
    start = time.monotonic()
    term.interrupt()
    assert term.wait_exit(timeout=10) == 130 and time.monotonic() - start < 5
    assert (project / "victim.txt").read_text() == "keep me"


def test_ctrl_c_at_the_question_in_tao_chat_stops_that_answer_only(tmp_path):
    script = "model = ScriptedModel([tool_call('calculator', operation='add', a=1, b=2), '4'])"
    term = launch(script, ["chat", "--require-approval", "calculator", "--no-audit"], cwd=tmp_path)
    term.prompt()
    term.sendline("1+2?")
    term.expect("approve? [y]es / [n]o / [e]dit")
    time.sleep(0.3)
    term.interrupt()
    term.prompt()  # the chat goes on; what is typed next is a task, not an answer to the question
    term.sendline("2+2?")
    term.expect("Final Answer: 4")
    term.prompt()
    term.sendline("/exit")
    assert term.wait_exit() == 0


def test_the_question_reaches_the_terminal_when_stderr_goes_to_a_file(project):
    """``tao run ... 2> log`` on a terminal: asked where the person can see it, on stdout."""
    import os

    import pexpect
    from cli_pty import Term

    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(project), "TERM": "xterm",
           "LANG": "en_US.UTF-8", "TAO_DATA_DIR": str(project / "data"),
           "PYTHONPATH": os.pathsep.join(sys.path), "L": LAUNCHER, "S": REMOVE}
    line = (f'{sys.executable} -c "$L" "$S" run "clean up" --tools tools.py '
            f'--require-approval remove --no-audit 2> err.log')
    term = Term(pexpect.spawn("/bin/sh", ["-c", line], cwd=str(project), env=env,
                              encoding="utf-8", dimensions=(40, 120)))
    term.expect("[1] remove: approve? [y]es / [n]o / [e]dit:")
    term.sendline("n")
    term.expect("Reason for the model")
    term.sendline("")
    assert term.wait_exit() == 0
    assert (project / "victim.txt").exists() and "approve?" not in (project / "err.log").read_text()
