"""Issue 27: the coding agent checks its own work before it says Finish, starts from a checklist
of behaviours, and never cuts a file silently. The coder is the one ``tao code`` runs
(``build_agent(AgentSpec(CODER, workspace=...))``), its model a ScriptedModel."""

from __future__ import annotations

import asyncio

import pytest
from sandbox_backends import skip_mark

from tao import ScriptedModel
from tao.events import Checklist, Error, Observation
from tao.factory import CODER, AgentSpec, build_agent
from tao.workspace import Workspace, WorkspaceError
from tao.workspace import checks as workspace_checks

needs_bwrap = skip_mark("bwrap") or (lambda f: f)

CHECKLIST = "- add(1, 2) returns 3\n- the tests in test_calc.py pass"
BUGGY = "def add(a, b):\n    return a - b\n"
FIXED = "def add(a, b):\n    return a + b\n"
TEST = "from calc import add\n\n\ndef test_add():\n    assert add(1, 2) == 3\n"
FINISH = "Thought: done\nAction: Finish【calc.py and its tests】"


def write(path: str, content: str, tool: str = "write_file") -> str:
    """A reply in seed 002's form: ``Action: write_file【path】`` and the file fenced."""
    return f"Thought: write {path}\nAction: {tool}【{path}】\n```\n{content}```"


PYTEST = "Thought: run the tests\nAction: run_command【python -m pytest -q --tb=short】"


def coder(ws, replies):
    model = ScriptedModel(replies)
    return build_agent(AgentSpec(CODER, 10, workspace=ws), model), model


def test_a_finish_with_nothing_checked_gets_one_reminder_and_the_next_finish_ends_the_run(tmp_path):
    ws = Workspace(tmp_path, sandbox="subprocess")  # run_command is there: Python can be tested
    agent, model = coder(ws, [CHECKLIST, write("calc.py", FIXED), FINISH, FINISH])
    events = []
    result = agent.run("Write calc.py with add(a, b)", sinks=[events.append])
    assert result.ok and result.turns == 3
    reminder = model.calls[3][-1].content  # what the model read before its second Finish
    assert reminder.startswith("The Python code you wrote has not been tested yet")
    assert "run_command【python -m pytest -q --tb=short】" in reminder
    assert [e.message for e in events if isinstance(e, Error)] == [reminder]  # shown, as a warning


def test_a_workspace_without_run_command_does_not_ask_for_tests(tmp_path):
    ws = Workspace(tmp_path, sandbox=False)
    agent, _ = coder(ws, [CHECKLIST, write("calc.py", FIXED), FINISH])
    result = agent.run("Write calc.py with add(a, b)")
    assert result.ok and result.turns == 2


@needs_bwrap
def test_pytest_failures_come_back_with_file_and_line_and_a_passing_run_lets_finish_through(tmp_path):
    ws = Workspace(tmp_path)  # bwrap: `python` and `pytest` are the ones that run tao
    agent, _ = coder(ws, [CHECKLIST, write("calc.py", BUGGY), write("test_calc.py", TEST),
                          PYTEST, write("calc.py", FIXED), PYTEST, FINISH])
    events = []
    result = agent.run("Write calc.py with add(a, b), and its tests", sinks=[events.append])
    ws.__exit__()
    runs = [e.content for e in events if isinstance(e, Observation) and e.name == "run_command"]
    assert "test_calc.py:5: in test_add" in runs[0] and "FAILED test_calc.py::test_add" in runs[0]
    assert "[exit status 1]" in runs[0]
    assert "1 passed" in runs[1] and "[exit status 0]" in runs[1]
    assert result.ok and result.turns == 6  # the first Finish was taken: the tests had run


@needs_bwrap
def test_a_finish_after_a_failed_check_is_told_so(tmp_path):
    ws = Workspace(tmp_path, language="zh")
    agent, model = coder(ws, [CHECKLIST, write("calc.py", BUGGY), write("test_calc.py", TEST),
                              PYTEST, FINISH, FINISH])
    result = agent.run("写 calc.py")
    ws.__exit__()
    assert model.calls[5][-1].content == ("上一次检查（python -m pytest -q --tb=short）没有通过。"
                                          "请先修正出错的地方，再检查一次，通过后再调用 Finish")
    assert result.ok and result.turns == 5  # one reminder a run: the second Finish ends it


def test_the_checklist_is_written_first_shown_as_an_event_and_added_to_the_task(tmp_path):
    ws = Workspace(tmp_path, sandbox=False)
    listed = ("Here is the list:\n1. The page shows 0 at first\n2) Clicking +1 shows 1\n"
              "- Reset shows 0 again\nThat is all.")
    agent, model = coder(ws, [listed, FINISH])
    events = []
    agent.run("A counter page", sinks=[events.append])
    asked = model.calls[0]  # the call before turn 1: the task, and nothing of the tools
    assert "Task: A counter page" in asked[-1].content and "write_file" not in asked[0].content
    shown = [e for e in events if isinstance(e, Checklist)]
    assert [e.items for e in shown] == [["The page shows 0 at first", "Clicking +1 shows 1",
                                         "Reset shows 0 again"]]
    assert model.calls[1][1].content == ("A counter page\n\nChecklist (check each item before "
                                         "Finish):\n- The page shows 0 at first\n- Clicking +1 "
                                         "shows 1\n- Reset shows 0 again")


def test_a_reply_with_no_list_adds_nothing(tmp_path):
    ws = Workspace(tmp_path, sandbox=False)
    agent, model = coder(ws, ["I will write the page.", FINISH])
    events = []
    agent.run("A counter page", sinks=[events.append])
    assert not [e for e in events if isinstance(e, Checklist)]
    assert model.calls[1][1].content == "A counter page"


def test_a_write_that_would_cut_a_file_is_refused_once_and_append_file_adds_to_it(tmp_path):
    ws = Workspace(tmp_path, sandbox=False)
    ws.write_file("wc.py", "def count(text):\n    return len(text.split())\n")
    main = 'if __name__ == "__main__":\n    print(count("a b"))\n'
    with pytest.raises(WorkspaceError, match=r"not written: this would replace the 46 characters "
                       r"of wc.py with 51 and remove count from it. To add to the end of a file "
                       r"use append_file"):
        ws.write_file("wc.py", main)
    assert ws.append_file("wc.py", main) == "appended 51 characters to wc.py (now 97 characters)"
    assert "def count" in (tmp_path / "wc.py").read_text()
    assert ws.write_file("wc.py", main).startswith("wrote wc.py")  # told once: the next write is meant


def test_a_write_that_keeps_what_the_file_defines_goes_through(tmp_path):
    ws = Workspace(tmp_path, sandbox=False)
    ws.write_file("app.js", "function add() {}\nconst reset = () => {};\n")
    assert ws.write_file("app.js", "function add() { n++; }\nconst reset = () => { n = 0; };\n") \
        .startswith("wrote app.js")
    assert workspace_checks.lost("index.html", '<b id="count">0</b><button id="add">',
                                 '<b id="count">0</b>') == (["add"], False)


def test_check_page_steps_are_read_leniently():
    steps, bad = workspace_checks.parse_steps(
        '1. click "+1"\n- type hello world\npress Enter\n\n# a comment\nexpect: 2\n点击 添加\n'
        'fly away')
    assert steps == [("click", "+1"), ("type", "hello world"), ("press", "Enter"),
                     ("expect", "2"), ("click", "添加")]
    assert bad == ["fly away"]


@pytest.mark.skipif(not workspace_checks.can_drive(), reason="needs Playwright and Chromium")
def test_check_page_clicks_types_and_reads_the_page_like_a_user(tmp_path):
    ws = Workspace(tmp_path, sandbox=False, check_pages=True)
    assert "check_page" in ws
    ws.write_file("index.html", '<input id="name"><button id="hi">Greet</button><p id="out"></p>'
                  '<button id="bad">Break</button><script src="app.js"></script>')
    ws.write_file("app.js", "document.getElementById('hi').onclick = () => {\n"
                  "  document.getElementById('out').textContent = 'Hello, ' + "
                  "document.getElementById('name').value;\n};\n"
                  "document.getElementById('bad').onclick = () => { missing(); };\n")
    told = asyncio.run(ws.check_page("index.html", "type Ann\nclick Greet\nexpect Hello, Ann\n"
                                                   "click Start\nclick Break"))
    assert told.splitlines()[:6] == [
        "Tried index.html in a headless browser:", "1. type Ann: ok", "2. click Greet: ok",
        "3. expect Hello, Ann: ok",
        '4. click Start: FAILED: no button or link with the text "Start" on the page',
        "5. click Break: ok"]
    assert "- app.js:4: ReferenceError: missing is not defined" in told
    assert told.endswith("The check failed: fix the file at fault from what is said above, "
                         "then run check_page again.")
    assert ws.checks.failed == "check_page index.html"  # Finish now gets the reminder


def test_the_page_check_asks_for_check_page_only_where_it_can_run(tmp_path, monkeypatch):
    monkeypatch.setattr(workspace_checks, "can_drive", lambda: False)
    ws = Workspace(tmp_path, sandbox=False, check_pages=True)
    assert "check_page" not in ws
    ws.write_file("page.html", "<p>hi</p>")
    assert ws.before_finish("en", "run-1") is None  # nothing it could be asked to run


def test_a_file_cut_at_the_reply_limit_is_not_written_and_the_model_is_told_to_write_it_in_parts(
        tmp_path):
    ws = Workspace(tmp_path, sandbox=False)
    cut_off = "Thought: the whole file\nAction: write_file【big.py】\n```python\ndef a():\n    pass\n"
    agent, model = coder(ws, [CHECKLIST, cut_off, write("big.py", "def a():\n    pass\n"),
                              write("big.py", "def b():\n    pass\n", "append_file"), FINISH])
    result = agent.run("Write big.py")
    assert "Write the file in parts: the first part with write_file" in model.calls[2][-1].content
    assert (tmp_path / "big.py").read_text() == "def a():\n    pass\ndef b():\n    pass"
    assert result.ok


def test_append_file_refuses_the_whole_file_again(tmp_path):
    ws = Workspace(tmp_path, sandbox=False)
    page = "<!DOCTYPE html>\n<html><body><p id=\"n\">0</p></body></html>\n"
    ws.write_file("index.html", page)
    with pytest.raises(WorkspaceError, match='not appended: this text starts with "<!DOCTYPE html>", '
                       "as index.html itself does"):
        ws.append_file("index.html", "\n" + page)
    assert (tmp_path / "index.html").read_text() == page


def test_a_page_error_from_an_id_the_page_lacks_names_the_ids_on_both_sides(tmp_path):
    from tao.workspace import page as workspace_page

    if workspace_page.chromium() is None:
        pytest.skip("no Chromium here")
    ws = Workspace(tmp_path, sandbox=False, check_pages=True)
    ws.write_file("index.html", '<p id="counter">0</p><button id="plus">+1</button>'
                  '<script src="app.js"></script>')
    told = ws.write_file("app.js", "const c = document.getElementById('counter');\n"
                         "document.getElementById('increment').addEventListener('click', () => {});\n")
    assert "- app.js:2: Uncaught TypeError: Cannot read properties of null" in told
    assert told.endswith("(the scripts look up ids that index.html does not have: increment; the "
                         "ids index.html has: counter, plus. Make the two agree)")
