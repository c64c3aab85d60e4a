"""try_page: the coder uses its page as a person would - clicks, types, reads (issue 27, point 1)."""

import asyncio

import pytest

from tao.messages import ToolCall
from tao.workspace import Workspace
from tao.workspace.page_try import StepError, parse

from sandbox_backends import skip_mark

TODO = """<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>To-do</title></head>
<body><input id="item"><button id="add">Add</button><ul id="list"></ul>
<script src="todo.js"></script></body></html>"""
TODO_JS = """document.getElementById('add').onclick = () => {
  const li = document.createElement('li');
  li.textContent = document.getElementById('item').value + ' ';
  const remove = document.createElement('button');
  remove.textContent = 'Remove';
  remove.onclick = () => entry.remove();
  li.appendChild(remove);
  document.getElementById('list').appendChild(li);
};"""
COUNTER = """<html><head><meta charset="utf-8"></head><body><span id="n">0</span>
<button onclick="n.textContent = +n.textContent + 1">加一</button>
<button onclick="n.textContent = 0">清零</button></body></html>"""


def call(ws, name, **arguments):
    return asyncio.run(ws.execute(ToolCall("c", name, arguments)))


def test_a_handler_that_throws_is_found_by_clicking_it(browser, tmp_path):
    ws = Workspace(tmp_path, sandbox=False, check_pages=True)
    ws.write_file("index.html", TODO)
    assert "threw no errors" in ws.write_file("todo.js", TODO_JS)  # opening it shows nothing wrong
    told = call(ws, "try_page", page="index.html",
                steps="type 1 buy milk\nclick Add\nclick Remove").content
    assert told.splitlines() == [
        "Opened index.html in a headless browser and did the steps:",
        "1. type 1 buy milk → the page shows: Add",
        "2. click Add → the page shows: Add buy milk Remove",
        "3. click Remove → the page shows: Add buy milk Remove",
        "   error: todo.js:6: Uncaught ReferenceError: entry is not defined",
        "A script threw: fix the file at the line above, then try the page again with try_page."]
    assert (tmp_path / "index.html").read_text() == TODO  # the steps ran on a copy
    assert sorted(p.name for p in tmp_path.iterdir()) == ["index.html", "todo.js"]


def test_steps_in_chinese_and_a_button_that_is_not_there(browser, tmp_path):
    ws = Workspace(tmp_path, sandbox=False, check_pages=True, language="zh")
    ws.write_file("index.html", COUNTER)
    told = call(ws, "try_page", steps="点击 加一；click 加一; click 重置\nclick 清零").content
    assert told.splitlines() == [
        "在无头浏览器里打开 index.html，逐步操作：",
        "1. 点击 加一 → 页面显示：1 加一 清零",
        "2. click 加一 → 页面显示：2 加一 清零",
        "3. click 重置 → 页面上找不到文字是这个的按钮或链接；页面显示：2 加一 清零",
        "4. click 清零 → 页面显示：0 加一 清零",
        "没有脚本报错。请对照任务检查每一步之后页面显示的内容是否正确；都对就调用 Finish。"]


@pytest.mark.parametrize("steps, says", [
    ("", "no steps"),
    ("jump over", "step 1 not understood: jump over"),
    ("click Add; type one 5", "step 2 should read type N TEXT"),
    ("type 1 21; click Double; type 5", "step 3 should read type N TEXT (N from 1: which input box, then what to type): type 5"),
    ("wait 60000", "step 1 should read wait MS (1 to 5000)"),
    ("\n".join(["click a"] * 21), "too many steps: at most 20"),
])
def test_steps_it_cannot_run_are_refused_with_words(tmp_path, steps, says):
    with pytest.raises(StepError):
        parse(steps)
    ws = Workspace(tmp_path, sandbox=False, check_pages=True)
    ws.write_file("index.html", COUNTER)
    if "try_page" in ws:  # only where Chromium is
        result = call(ws, "try_page", page="index.html", steps=steps)
        assert result.is_error and says in result.content


def test_only_pages_inside_the_workspace(browser, tmp_path):
    ws = Workspace(tmp_path / "ws", sandbox=False, check_pages=True)
    (tmp_path / "secret.html").write_text("<p>secret</p>")
    for page in ("../secret.html", str(tmp_path / "secret.html"), "missing.html"):
        result = call(ws, "try_page", page=page, steps="click Add")
        assert result.is_error and "Opened" not in result.content, result.content


def test_a_finish_before_the_page_was_tried_gets_one_reminder(browser, tmp_path):
    from tao import ScriptedModel
    from tao.factory import CODER, AgentSpec, build_agent

    replies = ["- click 加一: the page shows 1",
               f"Action: write_file【index.html】\n```html\n{COUNTER}\n```",
               "Action: Finish【done】",
               "Action: try_page【click 加一】",
               "Action: Finish【done】"]
    model = ScriptedModel(replies)
    ws = Workspace(tmp_path, sandbox=False, check_pages=True)
    result = build_agent(AgentSpec(CODER, 6, workspace=ws, checklist=True),
                         model).run("A counter page")
    assert result.status == "done" and result.turns == 4
    reminder = model.calls[3][-1].content
    assert "Not done yet: index.html were written but the page was never tried" in reminder
    assert "Check each item of your checklist for real:\n1. click 加一: the page shows 1" in reminder
    assert "1. click 加一 → the page shows: 1 加一 清零" in model.calls[4][-1].content


def test_no_chromium_no_tool(tmp_path, monkeypatch):
    monkeypatch.setenv("TAO_CHROMIUM", str(tmp_path / "none"))
    assert "try_page" not in Workspace(tmp_path, sandbox=False, check_pages=True)
    assert "try_page" not in Workspace(tmp_path / "b", sandbox=False)  # a plain workspace


@(skip_mark("bwrap") or (lambda f: f))
def test_the_page_cannot_read_files_outside_the_workspace(browser, tmp_path):
    """Unconfined, Chromium loads any file:// script a page names (this one then shows its
    secret); in bubblewrap only the page's own folder exists."""
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret.js").write_text('var secret = "s3cret";')
    ws = Workspace(tmp_path / "ws", sandbox=False, check_pages=True)
    ws.write_file("index.html", (
        f'<html><body><p id="o">x</p><script src="{(tmp_path / "outside" / "secret.js").as_uri()}">'
        '</script><script>document.getElementById("o").textContent = '
        'typeof secret === "undefined" ? "nothing outside" : secret</script></body></html>'))
    told = call(ws, "try_page", page="index.html", steps="wait 100").content
    assert "1. wait 100 → the page shows: nothing outside" in told and "s3cret" not in told
