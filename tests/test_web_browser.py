"""The workbench page in a real browser, watching a run: Debian's chromium, headless, under
Playwright, against a real uvicorn serving ``tao.web.create_app`` with ScriptedModels - the
chain in order, the plan's DAG, approvals, a cut connection, a reload, cancel, the real model.

Screenshots land in tests/artifacts/web/ (the CI job keeps them). Without chromium or Playwright
the tests skip, except under ``TAO_REQUIRE_BROWSER=1`` (CI), where they fail.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from web_browser_support import (WEATHER_RUN, WEATHER_TASK, Paced, browser, chain,  # noqa: F401
                                 fill_run, finished, replay_of, screenshot, seqs, text_of,
                                 workbench)

from tao import ScriptedModel, tool_call


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
    note = page.wait_for_selector("#reconnect-note:not([hidden])", timeout=10000)  # said, while cut
    assert note.inner_text() == "连接断开，正在重连…"
    assert finished(page, timeout=40000) == "done"
    assert page.is_hidden("#reconnect-note")
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


def test_a_run_ended_by_a_model_crash_is_resumed_from_the_page(workbench):
    from web_helpers import Crashy

    crashy = Crashy()
    _, page = workbench(models={"crashy": crashy})
    fill_run(page, agent="react", model="crashy", task="15 加 27 等于几？", tools=("calculators",))
    page.click("#run-button")
    assert finished(page) == "error"
    assert "ModelCrashed" in page.inner_text("#run") and "SIGSEGV" in page.inner_text("#run")
    assert page.is_visible("#resume-button") and page.is_hidden("#cancel-button")
    screenshot(page, "resume_after_crash")
    page.click("#resume-button")
    page.wait_for_function("document.querySelector('#run-status').dataset.status === 'done'",
                           timeout=15000)
    assert page.inner_text("#run [data-kind=final_answer] .ev-text") == "答案是 42。"
    assert page.is_hidden("#resume-button")
    assert crashy.calls == ["ask", "answer"]  # the first reply came from the journal
