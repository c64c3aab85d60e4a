"""The workbench page's other views in a real browser: past runs and their replay, the compare
view with the seed's §7.2 table, CodeAct's highlighting, a coding run's files, form errors in
the page's language, a served token, and the API key that never comes back.

Screenshots land in tests/artifacts/web/. Without chromium or Playwright the tests skip, except
under ``TAO_REQUIRE_BROWSER=1`` (CI), where they fail.
"""

from __future__ import annotations

import json

import pytest
from codeact_scripts import last_observation
from web_browser_support import (WEATHER_RUN, WEATHER_TASK, browser, chain,  # noqa: F401
                                 fill_run, finished, replay_of, screenshot, text_of, workbench)

from tao import ScriptedModel, tool_call


def test_past_runs_are_listed_and_replayed_step_by_step(workbench):
    models = {"scripted-zh": lambda: ScriptedModel(WEATHER_RUN)}
    _, page = workbench(models=models)
    fill_run(page, agent="react-text", model="scripted-zh", task=WEATHER_TASK, tools=("weather",))
    page.click("#run-button")
    assert finished(page) == "done"
    live = chain(page)
    run_id = page.get_attribute("#run", "data-run-id")
    events = replay_of(page, run_id)

    page.click(".tab[data-tab=history]")
    row = page.wait_for_selector(f"#history tr[data-run-id='{run_id}']")
    assert WEATHER_TASK in row.inner_text()
    row.query_selector("button.open-run").click()
    page.wait_for_selector("#replay-bar:not([hidden])")
    assert chain(page) == []
    for _ in range(3):  # run_started, turn_started, then turn 1's tokens with its Thought
        page.click("button.replay-step")
    first_thought = next(e["seq"] for e in events if e["type"] == "thought")
    assert page.get_attribute("#replay-bar", "data-position") == str(first_thought)
    assert chain(page) == ["run_started", "thought"]
    assert page.text_content("#run .chain > li[data-kind=tokens] pre") == WEATHER_RUN[0]
    page.click("button.replay-all")
    assert page.get_attribute("#replay-bar", "data-position") == str(len(events))
    assert chain(page) == live
    assert page.query_selector("#run .approval-card button") is None
    screenshot(page, "replay")


def compare_models(agent):
    scripts = {
        "react": [tool_call("calculator", operation="multiply", a=3, b=12),
                  tool_call("calculator", operation="multiply", a=2, b=5),
                  tool_call("calculator", operation="add", a=36, b=10),
                  tool_call("calculator", operation="subtract", a=50, b=46), "他还剩 4 元。"],
        "codeact": ["```python\nspent = add(multiply(3, 12), multiply(2, 5))\nprint(subtract(50, spent))\n```",
                    lambda messages: f"他还剩 {last_observation(messages).strip()} 元。"],
        "plan": [json.dumps({"steps": [
            {"id": "step1", "description": "书", "tool": "calculator",
             "args": {"operation": "multiply", "a": 3, "b": 12}, "depends_on": []},
            {"id": "step2", "description": "笔", "tool": "calculator",
             "args": {"operation": "multiply", "a": 2, "b": 5}, "depends_on": []},
            {"id": "step3", "description": "花了", "tool": "calculator",
             "args": {"operation": "add", "a": "$step1", "b": "$step2"}, "depends_on": ["step1", "step2"]},
            {"id": "step4", "description": "剩下", "tool": "calculator",
             "args": {"operation": "subtract", "a": 50, "b": "$step3"}, "depends_on": ["step3"]}],
            "answer": "他还剩 $step4 元"}, ensure_ascii=False)],
    }
    return ScriptedModel(scripts[agent])


def test_the_compare_view_shows_three_architectures_and_the_table(workbench):
    task = "小明有 50 元，买了 3 本书每本 12 元，又买了 2 支笔每支 5 元，请问他还剩多少钱？"
    _, page = workbench(models={"scripted": compare_models})
    fill_run(page, agent="react", model="scripted", task=task)
    page.click("#compare-button")
    page.wait_for_selector("#compare .compare-table tbody tr:not(.pending) >> nth=2", timeout=60000)
    screenshot(page, "compare")

    columns = page.eval_on_selector_all("#compare .compare-column", "cs => cs.map(c => c.dataset.agent)")
    assert columns == ["react", "codeact", "plan"]
    rows = page.eval_on_selector_all("#compare .compare-table tbody tr", """rs => rs.map(r =>
        [r.dataset.agent, ...[...r.querySelectorAll('td')].map(td => td.innerText)])""")
    assert [r[0] for r in rows] == ["react", "codeact", "plan"]
    turns_and_actions = {r[0]: (r[1], r[2]) for r in rows}
    assert turns_and_actions == {"react": ("5", "4 次工具调用"), "codeact": ("2", "1 次代码执行"),
                                 "plan": ("1", "4 步子任务")}
    assert [r[-1] for r in rows] == ["他还剩 4 元。", "他还剩 4 元。", "他还剩 4 元"]
    assert page.eval_on_selector_all("#compare .compare-column .chain [data-kind=final_answer]",
                                     "es => es.length") == 3
    code = "#compare .compare-column[data-agent=codeact] [data-kind=code] code"
    assert page.inner_text(code).startswith("spent = add(multiply(3, 12)")  # highlighted, as written
    assert text_of(page, f"{code} .tok-builtin") == ["print"]
    assert text_of(page, f"{code} .tok-number") == ["3", "12", "2", "5", "50"]
    assert page.inner_text("#compare [data-agent=codeact] [data-kind=execution] pre.stdout").strip() == "4"


HIGHLIGHT = """async (code) => {
    const { highlightPython } = await import('/static/highlight.js');
    const box = document.createElement('code');
    box.innerHTML = highlightPython(code);
    return [box.textContent, [...box.children].map(c => [c.className.slice(4), c.textContent])];
}"""


def test_the_code_highlighter_marks_python_and_keeps_the_code_as_written(workbench):
    _, page = workbench()
    code = 'def f(x):  # 注释 "not a string"\n    s = "a # not a comment" + \'<b>\'\n    return len(s) * 2.5\n'
    text, spans = page.evaluate(HIGHLIGHT, code)
    assert text == code  # nothing lost, nothing added, "<b>" is text and not markup
    assert spans == [["keyword", "def"], ["def", "f"], ["comment", '# 注释 "not a string"'],
                     ["string", '"a # not a comment"'], ["string", "'<b>'"],
                     ["keyword", "return"], ["builtin", "len"], ["number", "2.5"]]
    text, spans = page.evaluate(HIGHLIGHT, 'doc = """一\n# 二\n"""\nprint(f"{doc}")')
    assert spans == [["string", '"""一\n# 二\n"""'], ["builtin", "print"], ["string", 'f"{doc}"']]


def test_a_coding_run_lists_the_files_it_wrote(workbench, tmp_path):
    page_html = "<!DOCTYPE html>\n<h1>你好</h1>"
    script = ["- 打开页面：看到“你好”",  # the checklist: the form's box is ticked
              f"Thought: 写 index.html\nAction: write_file【index.html】\n```\n{page_html}\n```",
              "Thought: 写好了\nAction: Finish【已生成 index.html】"]
    _, page = workbench(models={"coder": lambda: ScriptedModel(script)}, workspace_root=tmp_path / "ws")
    fill_run(page, agent="code", model="coder", task="写一个网页", tools=())
    page.check("#run-form input[name=checklist]")
    page.click("#run-button")
    assert finished(page) == "done"
    page.click("#run .files a.file[data-path='index.html']")  # found again if the list redraws
    page.wait_for_selector("#run .file-view[data-path='index.html']")
    assert page.inner_text("#run .file-view") == page_html
    assert page.inner_text("#run ol.checklist") == "打开页面：看到“你好”"  # before turn 1
    screenshot(page, "coding_files")


def test_what_the_user_got_wrong_is_said_in_the_page_language(workbench):
    _, page = workbench(models={"scripted": lambda: ScriptedModel(["不会用到"])})
    fill_run(page, agent="react", model="scripted", task="  ")
    page.click("#run-button")  # checked in the page: nothing is sent
    assert page.inner_text("#error") == "出错了：请先写下任务。"
    fill_run(page, agent="react-text", model="openai", task="打个招呼")
    page.fill("input[name=base_url]", "ftp://example.com")
    page.fill("input[name=api_key]", "sk-x")
    page.fill("input[name=model_id]", "m")
    page.click("#run-button")  # the server's refusal, in the page's language
    page.wait_for_function("document.querySelector('#error').innerText.includes('http')")
    assert page.inner_text("#error") == "出错了：base URL 必须以 http:// 或 https:// 开头"
    page.select_option("#lang", "en")
    page.fill("input[name=api_key]", "sk-x")
    page.click("#run-button")
    page.wait_for_function("document.querySelector('#error').innerText.startsWith('Error')")
    assert page.inner_text("#error") == "Error: base_url must start with http:// or https://"
    assert page.query_selector("#run [data-kind]") is None
    assert page.input_value("textarea[name=task]") == "打个招呼"  # what was typed is kept


def test_a_served_token_is_asked_once_and_the_page_then_works(workbench):
    served, page = workbench(models={"scripted-zh": lambda: ScriptedModel(WEATHER_RUN)},
                             token="t0ken-for-the-page", path="/?token=t0ken-for-the-page")
    assert page.url == served.url + "/"  # the token went into a cookie, out of the address bar
    fill_run(page, agent="react-text", model="scripted-zh", task=WEATHER_TASK, tools=("weather",))
    page.click("#run-button")
    assert finished(page) == "done"  # fetches and the event stream carried the cookie
    assert chain(page)[-2:] == ["final_answer", "run_finished"]
    stranger = page.context.browser.new_context()
    try:
        r = stranger.request.get(served.url + "/api/options")
        assert r.status == 401
    finally:
        stranger.close()


@pytest.fixture
def endpoint():
    from openai_server import OpenAIServer

    with OpenAIServer() as server:
        yield server


def test_the_api_key_is_cleared_and_never_shown(workbench, endpoint):
    from openai_server import Reply

    key = "sk-never-shown-4242-qzx"  # a header value: ASCII
    endpoint.push(Reply("Final Answer: 你好"))
    _, page = workbench()
    fill_run(page, agent="react-text", model="openai", task="打个招呼")
    page.fill("input[name=base_url]", endpoint.url)
    page.fill("input[name=api_key]", key)
    page.fill("input[name=model_id]", "m")
    page.click("#run-button")
    finished(page)
    assert page.input_value("input[name=api_key]") == ""
    assert endpoint.requests[0]["headers"]["authorization"] == f"Bearer {key}"
    run_id = page.get_attribute("#run", "data-run-id")
    page.click(".tab[data-tab=history]")
    page.wait_for_selector(f"#history tr[data-run-id='{run_id}']")
    seen = page.content() + json.dumps(replay_of(page, run_id), ensure_ascii=False) + \
        page.evaluate("fetch('/api/runs').then(r => r.text())")
    assert key not in seen


def test_another_user_sees_none_of_the_first_ones_runs(workbench):
    served, page = workbench(models={"scripted-zh": lambda: ScriptedModel(WEATHER_RUN)})
    fill_run(page, agent="react-text", model="scripted-zh", task=WEATHER_TASK, tools=("weather",))
    page.click("#run-button")
    assert finished(page) == "done"
    run_id = page.get_attribute("#run", "data-run-id")

    other = page.context.browser.new_context(locale="zh-CN")  # another browser: its own session
    try:
        theirs = other.new_page()
        theirs.goto(f"{served.url}/#run={run_id}")  # even with the first user's run id
        theirs.wait_for_selector("body[data-ready='1']")
        assert theirs.query_selector("#run [data-kind]") is None
        theirs.click(".tab[data-tab=history]")
        theirs.wait_for_selector("#history tbody tr.empty")
        assert theirs.inner_text("#history tbody") == "还没有运行记录"
        status = theirs.evaluate("id => fetch(`/api/runs/${id}/replay`).then(r => r.status)", run_id)
        assert status == 404
    finally:
        other.close()
    page.click(".tab[data-tab=history]")  # the first user still has it
    page.wait_for_selector(f"#history tr[data-run-id='{run_id}']")


def test_the_tools_that_need_approval_are_boxes_for_the_tools_picked(workbench):
    models = {"scripted": lambda: ScriptedModel([
        [tool_call("get_weather", city="北京"), tool_call("calculate", expression="19 - 16")],
        "北京比上海高 3 度。"])}
    _, page = workbench(models=models)
    shown = lambda: page.eval_on_selector_all(  # noqa: E731
        "label.approve-check:not([hidden]) input", "bs => bs.map(b => b.value)")
    fill_run(page, agent="react", model="scripted", task="北京比上海高几度？", tools=("calculators",))
    assert shown() == ["calculate", "calculator"]
    assert not page.is_visible("input[name=approve_text]")  # every picked set lists its tools
    fill_run(page, agent="code", model="scripted", task="x", tools=())
    assert set(shown()) >= {"write_file", "run_command"}  # a coding run's own tools
    fill_run(page, agent="react", model="scripted", task="北京比上海高几度？",
             tools=("calculators", "weather"), approve=("get_weather",))
    assert shown() == ["calculate", "calculator", "get_weather", "search_web"]  # calculate once
    screenshot(page, "approval_boxes")
    with page.expect_request("**/api/runs") as sent:
        page.click("#run-button")
    assert sent.value.post_data_json["approve"] == ["get_weather"]
    card = page.wait_for_selector(".approval-card:not(.decided)")
    assert card.get_attribute("data-tool") == "get_weather"
    card.query_selector("button.approve").click()
    assert finished(page) == "done"
    assert page.eval_on_selector_all(".approval-card", "cs => cs.length") == 1  # calculate ran
    assert text_of(page, "#run [data-kind=observation] pre")[1] == "3"  # the calculators' own

    sent_bodies = []  # compare runs react, codeact and plan: a coding run's box is not sent
    page.route("**/api/compare", lambda route: (sent_bodies.append(route.request.post_data_json),
                                                route.fulfill(status=400, json={"detail": "停"})))
    fill_run(page, agent="code", model="scripted", task="x", tools=("calculators",),
             approve=("write_file", "calculator"))
    page.click("#compare-button")
    page.wait_for_function("document.querySelector('#error').innerText.includes('停')")
    assert sent_bodies[0]["approve"] == ["calculator"]
