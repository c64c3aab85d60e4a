"""Make the site's screenshots from the real pages, in Debian's Chromium under Playwright.

    python docs/shots.py            # writes docs/images/*.png (English) and *.zh.png (Chinese)

The workbench (`tao.web.create_app`, the page `tao serve` serves) runs behind a real uvicorn on
127.0.0.1; its runs are replayed by ScriptedModels (the replies below), so the pictures come out
the same every time and take seconds, not the embedded model's minutes. Everything else on them
(the page, the events, the plan's DAG, the statistics) is the real thing.
"""

from __future__ import annotations

import json
import shutil
import socket
import sys
import tempfile
import threading
import time
from pathlib import Path

import uvicorn
from playwright.sync_api import sync_playwright

from tao import ScriptedModel, tool_call
from tao.web import create_app

IMAGES = Path(__file__).resolve().parent / "images"
TASK = {"zh": "小明有 50 元，买了 3 本书每本 12 元，又买了 2 支笔每支 5 元，请问他还剩多少钱？",
        "en": "Xiao Ming has 50 yuan. He buys 3 books at 12 yuan each and 2 pens at 5 yuan each. How much is left?"}
ANSWER = {"zh": "小明还剩 4 元。", "en": "Xiao Ming has 4 yuan left."}


def react_model(lang: str) -> ScriptedModel:
    thoughts = {"zh": ["先算书和笔各花了多少钱。", "一共花了 36 + 10 = 46 元，再用 50 减去它。"],
                "en": ["First what the books and the pens cost.", "He spent 36 + 10 = 46; take it from 50."]}[lang]
    return ScriptedModel([
        (thoughts[0], tool_call("calculator", operation="multiply", a=3, b=12),
         tool_call("calculator", operation="multiply", a=2, b=5)),
        (thoughts[1], tool_call("calculator", operation="subtract", a=50, b=46)),
        ANSWER[lang]], chunk_size=4, name="scripted")


def step(n: int, description: str, operation: str, a, b, *deps: int) -> dict:
    return {"id": f"step{n}", "description": description, "tool": "calculator",
            "args": {"operation": operation, "a": a, "b": b}, "depends_on": [f"step{d}" for d in deps]}


def plan_model(lang: str) -> ScriptedModel:
    words = {"zh": ["3 本书的钱", "2 支笔的钱", "一共花的钱", "还剩的钱", "他还剩 $step4 元"],
             "en": ["the books", "the pens", "spent in all", "what is left", "He has $step4 yuan left"]}[lang]
    plan = {"steps": [step(1, words[0], "multiply", 3, 12), step(2, words[1], "multiply", 2, 5),
                      step(3, words[2], "add", "$step1", "$step2", 1, 2),
                      step(4, words[3], "subtract", 50, "$step3", 3)], "answer": words[4]}
    return ScriptedModel([json.dumps(plan, ensure_ascii=False)], name="scripted")


def compare_model(agent: str, lang: str = "en") -> ScriptedModel:
    """One script per architecture, for the Compare button (the factory gets the agent's name)."""
    if agent == "react":
        return react_model(lang)
    if agent == "plan":
        return plan_model(lang)
    code = ("```python\nspent = add(multiply(3, 12), multiply(2, 5))\n"
            "final_answer(subtract(50, spent))\n```")
    return ScriptedModel([code], chunk_size=4, name="scripted")


class Server:
    """The workbench app behind a real uvicorn in a thread."""

    def __init__(self, app) -> None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}/"
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> Server:  # noqa: PYI034
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            if time.monotonic() > deadline:
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.05)
        return self

    def __exit__(self, *exc) -> None:
        self.server.should_exit = True
        self.thread.join(10)


def fill_form(page, *, agent: str, model: str, task: str, approve: tuple[str, ...] = ()) -> None:
    page.select_option("select[name=agent]", agent)
    page.select_option("select[name=model]", model)
    for box in page.query_selector_all("input[name=tools]"):
        box.set_checked(box.get_attribute("value") == "calculators")
    for box in page.query_selector_all("input[name=approve]"):
        box.set_checked(box.get_attribute("value") in approve)
    page.fill("textarea[name=task]", task)


def run_in_page(page, *, agent: str, model: str, task: str) -> None:
    fill_form(page, agent=agent, model=model, task=task)
    before = page.get_attribute("#run", "data-run-id") if page.query_selector("#run") else None
    page.click("#run-button")
    page.wait_for_function("(b) => { const r = document.querySelector('#run');"
                           " return r && r.dataset.runId && r.dataset.runId !== b; }", arg=before)
    page.wait_for_selector("#run[data-status]:not([data-status='running'])", state="attached", timeout=60000)
    status = page.get_attribute("#run", "data-status")
    if status != "done":
        raise RuntimeError(f"the {agent} run ended {status!r}: {page.inner_text('#run')[-600:]}")


def main() -> int:
    IMAGES.mkdir(exist_ok=True)
    chromium = shutil.which("chromium") or "/usr/bin/chromium"
    made = []
    with tempfile.TemporaryDirectory() as tmp, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        for lang in ("en", "zh"):
            suffix = "" if lang == "en" else ".zh"
            models = {"scripted-react": lambda *_, lang=lang: react_model(lang),
                      "scripted-plan": lambda *_, lang=lang: plan_model(lang),
                      "scripted": lambda agent="react", lang=lang: compare_model(agent, lang)}
            with Server(create_app(models=models, journal=Path(tmp) / f"runs-{lang}.db", audit=False)) as served:
                ctx = browser.new_context(locale="zh-CN" if lang == "zh" else "en-US",
                                          viewport={"width": 1600, "height": 900})
                page = ctx.new_page()
                errors: list[str] = []
                page.on("pageerror", lambda e, errors=errors: errors.append(str(e)))
                page.goto(served.url)
                page.wait_for_selector("body[data-ready='1']", timeout=15000)
                run_in_page(page, agent="react", model="scripted-react", task=TASK[lang])
                page.screenshot(path=str(IMAGES / f"workbench-react{suffix}.png"), full_page=True)
                made.append(f"workbench-react{suffix}.png")
                run_in_page(page, agent="plan", model="scripted-plan", task=TASK[lang])
                page.wait_for_selector("#run svg.dag .node.done")
                page.screenshot(path=str(IMAGES / f"workbench-plan{suffix}.png"), full_page=True)
                made.append(f"workbench-plan{suffix}.png")

                # a call that needs approval waits on a card; approved, the run goes on
                fill_form(page, agent="react", model="scripted-react", task=TASK[lang], approve=("calculator",))
                page.click("#run-button")
                card = page.wait_for_selector(".approval-card:not(.decided)", timeout=30000)
                card.scroll_into_view_if_needed()
                page.screenshot(path=str(IMAGES / f"workbench-approval{suffix}.png"))
                made.append(f"workbench-approval{suffix}.png")
                deadline = time.monotonic() + 60
                while page.get_attribute("#run", "data-status") == "running":
                    for button in page.query_selector_all(".approval-card:not(.decided) button.approve"):
                        if button.is_enabled():
                            button.click()
                    if time.monotonic() > deadline:
                        raise RuntimeError("the approved run did not finish: "
                                           + page.inner_text("#run")[-800:])
                    page.wait_for_timeout(200)

                # the three architectures side by side
                fill_form(page, agent="react", model="scripted", task=TASK[lang])
                page.click("#compare-button")
                page.wait_for_selector("#compare .compare-table tbody tr:not(.pending) >> nth=2", timeout=60000)
                page.screenshot(path=str(IMAGES / f"workbench-compare{suffix}.png"), full_page=True)
                made.append(f"workbench-compare{suffix}.png")
                ctx.close()
                if errors:
                    raise RuntimeError(f"JavaScript errors on the page: {errors}")
        browser.close()
    print("wrote", ", ".join(made), "in", IMAGES)
    return 0


if __name__ == "__main__":
    sys.exit(main())
