"""tao.Attempts: the coder runs again from the folder as it was when its finished work fails the
checks made after the run (issue 27) - with ScriptedModel writing seed 002's reply form."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

import tao.cli as cli
from tao import Attempts, ReActAgent, ScriptedModel
from tao.cli.code import build_coder
from tao.events import Checked, RunFinished, event_from_dict
from tao.factory import AgentSpec, build_agent
from tao.workspace import Workspace

TASK = "Write a Python module calc.py with a function add(a, b) that returns a + b."


def write(path: str, content: str, thought: str = "write it") -> str:
    return f"Thought: {thought}\nAction: write_file【{path}】\n```python\n{content}\n```"


FINISH = "Thought: done\nAction: Finish【calc.py is written】"


def events_of(agent, task):
    import asyncio

    async def go():
        return [e async for e in agent.stream(task)]

    return asyncio.run(go())


def test_a_run_whose_module_does_not_parse_is_run_again_from_an_empty_folder(tmp_path):
    ws = Workspace(tmp_path, sandbox=False)
    model = ScriptedModel([
        write("calc.py", "def add(a, b) return a + b"), write("notes.txt", "first try"), FINISH,
        write("calc.py", "def add(a, b):\n    return a + b"), FINISH,
    ])
    agent = build_coder(model, ws, attempts=3)
    events = events_of(agent, TASK)
    said = [e.text for e in events if isinstance(e, Checked)]
    assert said[0].startswith("attempt 1/3: the checks found 1 problem(s):\n- calc.py is not "
                              "valid Python (line 1: expected ':')")
    assert said[1] == "attempt 2/3: the checks passed"
    first = next(e for e in events if isinstance(e, Checked))
    assert (first.attempt, first.attempts, first.again) == (1, 3, True)
    assert first.problems == ["calc.py is not valid Python (line 1: expected ':')"]
    assert event_from_dict(first.to_dict()) == first  # a trace replays it
    assert (tmp_path / "calc.py").read_text() == "def add(a, b):\n    return a + b"
    assert not (tmp_path / "notes.txt").exists()  # the first attempt's files are gone
    result = events[-1].result
    assert isinstance(events[-1], RunFinished) and result.ok
    assert result.turns == 5 and result.tool_calls == 3  # both runs counted
    assert model.remaining == 0


def test_when_no_attempt_passes_the_one_with_fewest_problems_stays(tmp_path):
    ws = Workspace(tmp_path, sandbox=False)
    model = ScriptedModel([
        write("calc.py", "def add(a, b):\n    return a + b"), write("extra.py", "x ="), FINISH,
        write("calc.py", "def add(a, b) return"), write("extra.py", "y ="), FINISH,
    ])
    events = events_of(build_coder(model, ws, attempts=2), TASK)
    last = [e.text for e in events if isinstance(e, Checked)][-1]
    assert last.startswith("attempt 2/2: the checks found 2 problem(s)")
    assert "keeping the attempt with the fewest problems" in last
    assert (tmp_path / "calc.py").read_text() == "def add(a, b):\n    return a + b"
    assert (tmp_path / "extra.py").read_text() == "x ="  # the first attempt's files, all of them


def test_the_files_that_were_there_before_stay_as_they_were(tmp_path):
    (tmp_path / "README.md").write_text("my project\n")
    ws = Workspace(tmp_path, sandbox=False)
    model = ScriptedModel([
        write("README.md", "overwritten"), write("calc.py", "def add(a, b) return"), FINISH,
        write("calc.py", "def add(a, b):\n    return a + b"), FINISH,
    ])
    events_of(build_coder(model, ws, attempts=2), TASK)
    assert (tmp_path / "README.md").read_text() == "my project\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["README.md", "calc.py"]


def test_attempts_in_chinese():
    model = ScriptedModel(["第一次", "第二次"])
    agent = Attempts(ReActAgent(model, []), n=2,
                     check=lambda task, r: ["答案不对"] if r.answer == "第一次" else [])
    events = events_of(agent, "说一个词")
    said = [e.text for e in events if isinstance(e, Checked)]
    assert said == ["第 1/2 次尝试：检查发现 1 个问题：\n- 答案不对\n从第一次尝试之前的文件状态重新开始。",
                    "第 2/2 次尝试：检查通过"]
    assert events[-1].result.answer == "第二次"


async def _async_check(task, result):
    return [] if result.answer == "b" else ["not b"]


def test_an_async_check_and_no_state():
    agent = Attempts(ReActAgent(ScriptedModel(["a", "b"]), []), n=3, check=_async_check)
    assert agent.run("say b").answer == "b"


@pytest.mark.parametrize("kwargs, error", [
    ({"n": 0}, "at least 1"),
    ({"n": 2, "temperature": 0}, "temperature above 0"),
    ({"check": "no"}, "check must be a function"),
    ({"state": object()}, "save() and restore(saved)"),
])
def test_bad_arguments_say_what_is_wrong(kwargs, error):
    args = {"check": lambda task, r: [], **kwargs}
    with pytest.raises((ValueError, TypeError), match=error.replace("(", r"\(").replace(")", r"\)")):
        Attempts(ReActAgent(ScriptedModel([]), []), **args)


def test_the_factory_puts_only_the_coder_in_attempts(tmp_path):
    ws = Workspace(tmp_path, sandbox=False)
    agent = build_agent(AgentSpec("code", workspace=ws, attempts=2), ScriptedModel([]))
    assert isinstance(agent, Attempts) and agent.state is ws and agent.name == "react-text-attempts2"
    with pytest.raises(ValueError, match="for the coding agent"):
        AgentSpec("react", attempts=2)
    with pytest.raises(ValueError, match="1 or more"):
        AgentSpec("code", workspace=ws, attempts=0)
    with pytest.raises(ValueError, match="use one or the other"):
        AgentSpec("code", workspace=ws, attempts=2, guard={"journal": tmp_path / "j.db"})


def test_tao_code_attempts_shows_each_check_and_ends_with_the_files_that_passed(tmp_path,
                                                                              monkeypatch):
    monkeypatch.chdir(tmp_path)
    model = ScriptedModel([write("calc.py", "def add(a, b) return a + b"), FINISH,
                           write("calc.py", "def add(a, b):\n    return a + b"), FINISH],
                          chunk_size=9)
    monkeypatch.setattr(cli, "resolve_model", lambda spec="auto", timeout=None: model)
    res = CliRunner().invoke(cli.app, ["code", TASK, "--sandbox", "none", "--attempts", "2"],
                             env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    assert ("attempt 1/2: the checks found 1 problem(s):\n- calc.py is not valid Python (line 1: "
            "expected ':')\nStarting again from the files as they were before the first attempt."
            in res.stdout)
    assert "attempt 2/2: the checks passed" in res.stdout
    assert (tmp_path / "workspace" / "calc.py").read_text() == "def add(a, b):\n    return a + b"
    assert "--attempts" in CliRunner().invoke(cli.app, ["code", "--help"],
                                              env={"COLUMNS": "200"}).output


def test_repair_keeps_the_files_and_tells_the_next_run_the_problems(tmp_path):
    ws = Workspace(tmp_path, sandbox=False)
    model = ScriptedModel([
        write("calc.py", "def add(a, b) return a + b"), write("notes.txt", "kept"), FINISH,
        write("calc.py", "def add(a, b):\n    return a + b"), FINISH,
    ])
    agent = Attempts(build_coder(model, ws), n=2, check=ws.verify, state=ws, repair=True)
    events = events_of(agent, TASK)
    said = [e.text for e in events if isinstance(e, Checked)]
    assert said[0].endswith("Running again on these files, told the problems.")
    assert said[1] == "attempt 2/2: the checks passed"
    second_task = model.calls[3][1].content  # the second run's first call: system, then task
    assert second_task.startswith(TASK + "\n\nThe folder already holds an earlier attempt")
    assert "- calc.py is not valid Python (line 1: expected ':')" in second_task
    assert (tmp_path / "notes.txt").read_text() == "kept"  # nothing put back


def test_a_check_that_raises_ends_the_attempts_and_keeps_the_files(tmp_path):
    ws = Workspace(tmp_path, sandbox=False)
    model = ScriptedModel([write("calc.py", "def add(a, b):\n    return a + b"), FINISH])

    def broken(task, result):
        raise RuntimeError("the sandbox is gone")

    events = events_of(Attempts(build_coder(model, ws), n=3, check=broken, state=ws), TASK)
    [checked] = [e for e in events if isinstance(e, Checked)]
    assert checked.text == ("attempt 1/3: the checks could not run (RuntimeError: the sandbox is "
                            "gone); no more attempts, this one's files stay.")
    assert (tmp_path / "calc.py").exists() and events[-1].result.ok
