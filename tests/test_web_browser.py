"""The workbench page in a real browser: Debian's chromium, headless, under Playwright, against a
real uvicorn serving ``tao.web.create_app`` with ScriptedModels - what a user sees and clicks.

Screenshots land in tests/artifacts/web/ (the CI job keeps them). Without chromium or Playwright
the tests skip, except under ``TAO_REQUIRE_BROWSER=1`` (CI), where they fail.
"""

from __future__ import annotations

import contextlib
import json
import sys
from pathlib import Path

import pytest
from codeact_scripts import last_observation
from web_browser_support import (CHROMIUM, CuttingProxy, Paced, Served, chain, require_browser,
                                 screenshot, seqs)

from tao import ScriptedModel, tool_call

WEATHER_TASK = "北京今天适合跑步吗？"
WEATHER_RUN = [  # seed 001's text protocol, one lookup and the answer
    'Thought: 需要查询北京实时天气才能判断\nAction: get_weather\nAction Input: {"city": "北京"}',
    "Thought: 北京晴，19°C，风力不大，适合户外运动\nFinal Answer: 今天北京适合跑步。",
]


@pytest.fixture(scope="module")
def browser():
    require_browser()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True)
        yield b
        b.close()


@pytest.fixture
def workbench(browser, tmp_path):
    """``workbench(models=..., **create_app_kwargs)``: a real server (its journal in tmp_path)
    and a page on it in a fresh browser context (its own cookies: a new user). ``proxy`` puts a
    ``CuttingProxy(**proxy)`` between them. Any JavaScript error on the page fails the test.
    Closed in order: the pages, then the servers."""
    errors = []
    with contextlib.ExitStack() as stack:
        def open_(locale: str = "zh-CN", proxy: dict | None = None, path: str = "/", **kwargs):
            kwargs.setdefault("journal", tmp_path / "runs.db")
            served = stack.enter_context(Served(**kwargs))
            url = served.url
            if proxy is not None:
                served.proxy = stack.enter_context(CuttingProxy(served.port, **proxy))
                url = served.proxy.url
            ctx = browser.new_context(locale=locale, viewport={"width": 1400, "height": 900})
            stack.callback(ctx.close)
            page = ctx.new_page()
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(url + path)
            page.wait_for_selector("body[data-ready='1']", timeout=15000)
            return served, page

        yield open_
    assert errors == []


def fill_run(page, *, agent, model, task, tools=("calculators",), approve=(), max_turns=None):
    page.select_option("select[name=agent]", agent)
    page.select_option("select[name=model]", model)
    for box in page.query_selector_all("input[name=tools]"):
        box.set_checked(box.get_attribute("value") in tools)
    page.fill("input[name=approve_text]", ",".join(approve))
    if max_turns is not None:
        page.fill("input[name=max_turns]", str(max_turns))
    page.fill("textarea[name=task]", task)


def finished(page, root="#run", timeout=30000):
    page.wait_for_selector(f"{root}[data-status]:not([data-status='running'])", state="attached",
                           timeout=timeout)
    return page.get_attribute(root, "data-status")


def text_of(page, selector):
    return [e.inner_text() for e in page.query_selector_all(selector)]


def replay_of(page, run_id):
    return page.evaluate("id => fetch(`/api/runs/${id}/replay`).then(r => r.json())", run_id)["events"]


def test_a_chinese_run_shows_thought_action_observation_final_answer_in_order(workbench):
    models = {"scripted-zh": lambda: Paced(ScriptedModel(WEATHER_RUN, chunk_size=3), 0.3, 0.04)}
    _, page = workbench(models=models)
    assert page.inner_text(".tab[data-tab=run]") == "运行"  # Accept-Language: zh-CN
    fill_run(page, agent="react-text", model="scripted-zh", task=WEATHER_TASK, tools=("weather",))
    page.click("#run-button")
    # the model's words appear as they stream, before the turn's Thought is parsed
    page.wait_for_function("document.querySelector('#run .tok') && "
                           "!document.querySelector('#run [data-kind=thought]')", timeout=10000)
    assert finished(page) == "done"
    screenshot(page, "react_text_zh")

    assert chain(page) == ["run_started", "thought", "action", "observation", "thought",
                           "final_answer", "run_finished"]
    assert text_of(page, "#run [data-kind=thought] .ev-text") == [
        "需要查询北京实时天气才能判断", "北京晴，19°C，风力不大，适合户外运动"]
    assert page.inner_text("#run [data-kind=action] .tool-name") == "get_weather"
    assert json.loads(page.inner_text("#run [data-kind=action] pre")) == {"city": "北京"}
    assert page.inner_text("#run [data-kind=observation] pre").startswith("北京：晴，19°C")
    assert page.inner_text("#run [data-kind=final_answer] .ev-text") == "今天北京适合跑步。"
    # every streamed piece is on the page: turn 1's tokens are its whole reply
    assert page.text_content("#run .chain > li[data-kind=tokens] pre") == WEATHER_RUN[0]
    assert page.inner_text("[data-stat=turns]") == "2"
    assert page.inner_text("[data-stat=tool_calls]") == "1"

    page.select_option("#lang", "en")  # switched in place: the run stays drawn
    assert page.inner_text(".tab[data-tab=run]") == "Run"
    assert page.inner_text("#run .stats h3") == "Statistics"
    assert len(chain(page)) == 7


SLOW_SHOP = Path(__file__).parent / "mcp_servers" / "slow_shop.py"
PARALLEL_PLAN = {"steps": [
    {"id": "step1", "description": "一本书的价格", "tool": "slow_price", "args": {"item": "book"},
     "depends_on": []},
    {"id": "step2", "description": "一支笔的价格", "tool": "slow_price", "args": {"item": "pen"},
     "depends_on": []},
    {"id": "step3", "description": "一共多少钱", "tool": "calculator",
     "args": {"operation": "add", "a": "$step1", "b": "$step2"}, "depends_on": ["step1", "step2"]}],
    "answer": "一共 $step3 元"}


def test_the_plan_view_shows_parallel_steps_running_at_once(workbench, tmp_path, monkeypatch):
    # the shop is an MCP server from ./tao.toml whose price lookup takes 1.5 s: the two lookups
    # depend on nothing, so they run together, and the DAG shows both running before step3
    spec = f"{sys.executable} {SLOW_SHOP}"
    (tmp_path / "tao.toml").write_text(f"mcp = [{json.dumps(spec)}]\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    plan = json.dumps(PARALLEL_PLAN, ensure_ascii=False)
    _, page = workbench(models={"planner": lambda: ScriptedModel([plan])})
    fill_run(page, agent="plan", model="planner", task="一本书加一支笔多少钱？",
             tools=("calculators", f"mcp:{spec}"))
    page.click("#run-button")
    page.wait_for_function("document.querySelectorAll('#run svg.dag .node.running').length == 2",
                           timeout=20000)
    states = page.eval_on_selector_all("#run svg.dag .node", "ns => ns.map(n => n.dataset.step + ' ' + n.dataset.state)")
    assert states == ["step1 running", "step2 running", "step3 pending"]
    assert page.inner_text("#run .dag-running") == "正在运行：2"
    screenshot(page, "plan_parallel_running")
    assert finished(page) == "done"
    screenshot(page, "plan_parallel_done")

    states = page.eval_on_selector_all("#run svg.dag .node", "ns => ns.map(n => n.dataset.state)")
    assert states == ["done", "done", "done"]
    assert page.get_attribute("#run svg.dag", "data-max-running") == "2"
    edges = page.eval_on_selector_all("#run svg.dag .edge", "es => es.map(e => e.dataset.from + '>' + e.dataset.to)")
    assert sorted(edges) == ["step1>step3", "step2>step3"]
    assert page.inner_text("#run [data-kind=final_answer] .ev-text") == "一共 17 元"
    events = replay_of(page, page.get_attribute("#run", "data-run-id"))
    done = {e["step_id"]: e for e in events if e["type"] == "step_finished"}
    assert min(done[s]["duration_s"] for s in ("step1", "step2")) >= 1.4
    assert abs(done["step1"]["ts"] - done["step2"]["ts"]) < 0.7  # together, not one after the other


def plan_step(n, description, operation, a, b, *deps):
    return {"id": f"step{n}", "description": description, "tool": "calculator",
            "args": {"operation": operation, "a": a, "b": b}, "depends_on": [f"step{d}" for d in deps]}


FAILING_PLAN = {"steps": [plan_step(1, "书的钱", "multiply", 3, 12), plan_step(2, "平均", "divide", 10, 0),
                          plan_step(3, "合计", "add", "$step1", "$step2", 1, 2)], "answer": "$step3"}
REPLAN = {"steps": [plan_step(4, "书加笔", "add", "$step1", 10)], "answer": "一共 $step4 元"}


def test_the_plan_view_shows_a_step_retried_failed_skipped_and_the_replan(workbench):
    # 10 / 0 fails every attempt: step2 is retried, then fails; step3, which needs it, is skipped;
    # the planner is asked again and its step4 builds on step1, which stays done
    plans = [json.dumps(p, ensure_ascii=False) for p in (FAILING_PLAN, REPLAN)]
    _, page = workbench(models={"planner": lambda: ScriptedModel(plans)})
    fill_run(page, agent="plan", model="planner", task="书和笔一共多少钱？")
    page.click("#run-button")
    page.wait_for_selector("#run svg.dag .node.retrying", timeout=10000)
    screenshot(page, "plan_retrying")
    assert finished(page) == "done"
    screenshot(page, "plan_replanned")

    nodes = page.eval_on_selector_all("#run svg.dag .node",
                                      "ns => ns.map(n => [n.dataset.step, n.dataset.history])")
    assert nodes == [["step1", "pending running done"],
                     ["step2", "pending running retrying running retrying running retrying running failed"],
                     ["step3", "pending skipped"], ["step4", "pending running done"]]
    edges = page.eval_on_selector_all("#run svg.dag .edge", "es => es.map(e => e.dataset.from + '>' + e.dataset.to)")
    assert sorted(edges) == ["step1>step3", "step1>step4", "step2>step3"]
    assert chain(page).count("step_retried") == 3 and "replanned" in chain(page)
    assert page.inner_text("#run [data-kind=final_answer] .ev-text") == "一共 46 元"


def test_a_gated_call_is_approved_edited_or_rejected_in_the_page(workbench):
    made = []

    def factory():
        made.append(ScriptedModel([
            tool_call("calculator", operation="multiply", a=3, b=12),
            tool_call("calculator", operation="multiply", a=2, b=5),
            tool_call("calculator", operation="add", a=36, b=10),
            "好的"]))
        return made[-1]

    _, page = workbench(models={"scripted": factory})
    fill_run(page, agent="react", model="scripted", task="算一算", approve=("calculator",))
    page.click("#run-button")

    card = page.wait_for_selector(".approval-card:not(.decided)")
    assert json.loads(card.query_selector(".approval-args").inner_text()) == {
        "operation": "multiply", "a": 3, "b": 12}
    assert page.query_selector("#run [data-kind=observation]") is None  # nothing ran yet
    screenshot(page, "approval_waiting")
    card.query_selector("button.approve").click()
    page.wait_for_selector("#run [data-kind=observation] >> nth=0")
    assert page.inner_text("#run [data-kind=observation] pre") == "36"

    card = page.wait_for_selector(".approval-card:not(.decided)")
    card.query_selector("button.edit").click()
    card.query_selector("textarea.edit-args").fill('{"operation": "multiply", "a": 2, ')
    card.query_selector("button.send-edit").click()  # not JSON: said here, nothing sent
    assert "JSON" in card.query_selector(".approval-error").inner_text()
    card.query_selector("textarea.edit-args").fill('{"operation": "multiply", "a": 2, "b": 6}')
    card.query_selector("button.send-edit").click()
    page.wait_for_selector("#run [data-kind=observation] >> nth=1")
    edited = text_of(page, "#run [data-kind=observation] pre")[1]
    assert edited.endswith("\n12") and '"b": 6' in edited  # the model is told of the edit

    card = page.wait_for_selector(".approval-card:not(.decided)")
    card.query_selector("input.reject-reason").fill("不要再算了")
    card.query_selector("button.reject").click()
    assert finished(page) == "done"
    screenshot(page, "approval_done")

    verdicts = page.eval_on_selector_all(".approval-card", "cs => cs.map(c => c.dataset.verdict)")
    assert verdicts == ["approved", "edited", "rejected"]
    observations = text_of(page, "#run [data-kind=observation] pre")
    assert observations[0] == "36" and observations[1].endswith("12")
    assert "46" not in observations[2] and "不要再算了" in observations[2]  # the add never ran
    last_call = made[0].calls[-1]
    assert "不要再算了" in last_call[-1].content and "46" not in last_call[-1].content


SLOW_RUN = [tool_call("calculator", operation="add", a=i, b=1) for i in range(6)] + ["完成"]


def slow_model():  # about 5 s: longer than the browser waits before it reconnects (3 s)
    return Paced(ScriptedModel(SLOW_RUN, chunk_size=2), 0.7, 0.01)


@pytest.mark.parametrize("rewind", [False, True], ids=["resumes", "server-resends-all"])
def test_a_stream_cut_mid_run_ends_with_every_event_exactly_once(workbench, rewind):
    # the network drops the event stream after 8 events; EventSource reconnects through the same
    # proxy with Last-Event-ID. `rewind`: the reconnect loses that header, so the server sends
    # everything again - the page must still draw each event once
    served, page = workbench(models={"slow": slow_model}, proxy={"after": 8, "rewind": rewind})
    proxy = served.proxy
    fill_run(page, agent="react", model="slow", task="加一加")
    page.click("#run-button")
    assert finished(page, timeout=40000) == "done"
    run_id = page.get_attribute("#run", "data-run-id")
    events = replay_of(page, run_id)
    screenshot(page, f"reconnect_{'rewind' if rewind else 'resume'}")

    assert proxy.cuts == 1 and proxy.streams >= 2
    assert proxy.reconnected_at[0] < events[-1]["ts"]  # back while the run still went on
    if not rewind:
        assert proxy.last_event_ids[0] > 0  # the browser said where it was
    drawn = seqs(page)
    assert sorted(drawn) == [e["seq"] for e in events] == list(range(1, len(events) + 1))
    assert chain(page).count("observation") == 6 and chain(page)[-1] == "run_finished"


def test_a_run_can_be_cancelled_from_the_page(workbench):
    _, page = workbench(models={"slow": lambda: Paced(ScriptedModel(SLOW_RUN), 1.0)})
    fill_run(page, agent="react", model="slow", task="加一加")
    page.click("#run-button")
    page.wait_for_selector("#run [data-kind=observation]", timeout=10000)
    page.click("#cancel-button")
    assert finished(page, timeout=15000) == "cancelled"
    assert page.is_hidden("#cancel-button")
    assert chain(page).count("observation") < 6


def test_a_page_reloaded_mid_run_comes_back_to_it_with_every_event_once(workbench):
    _, page = workbench(models={"slow": slow_model})
    fill_run(page, agent="react", model="slow", task="加一加")
    page.click("#run-button")
    page.wait_for_selector("#run [data-kind=observation]", timeout=10000)
    run_id = page.get_attribute("#run", "data-run-id")
    page.reload()
    page.wait_for_selector("body[data-ready='1']")
    assert page.get_attribute("#run", "data-run-id") == run_id
    assert finished(page, timeout=30000) == "done"
    events = replay_of(page, run_id)
    assert sorted(seqs(page)) == list(range(1, len(events) + 1))
    page.reload()  # finished now: drawn whole, from the run's events
    page.wait_for_selector("body[data-ready='1']")
    assert finished(page) == "done" and sorted(seqs(page)) == list(range(1, len(events) + 1))


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
    script = [f"Thought: 写 index.html\nAction: write_file【index.html】\n```\n{page_html}\n```",
              "Thought: 写好了\nAction: Finish【已生成 index.html】"]
    _, page = workbench(models={"coder": lambda: ScriptedModel(script)}, workspace_root=tmp_path / "ws")
    fill_run(page, agent="code", model="coder", task="写一个网页", tools=())
    page.click("#run-button")
    assert finished(page) == "done"
    link = page.wait_for_selector("#run .files a.file[data-path='index.html']")
    link.click()
    page.wait_for_selector("#run .file-view[data-path='index.html']")
    assert page.inner_text("#run .file-view") == page_html
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


@pytest.mark.local_model
def test_a_real_embedded_model_run_is_watched_to_its_end(workbench):
    _, page = workbench(locale="en-US")
    fill_run(page, agent="react", model="local-0.5b", task="What is 17 * 23? Use the calculator.",
             max_turns=3)
    page.click("#run-button")
    page.wait_for_selector("#run .tok", timeout=120000)  # tokens stream from the model
    status = finished(page, timeout=600000)
    screenshot(page, "embedded_model")
    assert status in ("done", "max_turns")
    kinds = chain(page)
    assert kinds[0] == "run_started" and kinds[-1] == "run_finished"
    assert page.inner_text("[data-stat=turns]") in ("1", "2", "3")
