"""The tracing tutorial's picture: a tao run's spans in a real span viewer, Arize Phoenix.

    pip install arize-phoenix==20.26.1        # in a venv of its own; it serves on :6006
    phoenix serve &
    python docs/trace_shot.py http://127.0.0.1:6006

Runs a Plan-and-Execute agent (its plan replayed by a ScriptedModel; two price lookups that take
0.4 s each and depend on nothing, so they run at the same time, then their sum) with tracing on,
exporting OTLP over HTTP to Phoenix, then opens Phoenix's trace view in Chromium and saves
docs/images/trace-phoenix.png. The spans are tao's real ones.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from pathlib import Path

from playwright.sync_api import sync_playwright

IMAGES = Path(__file__).resolve().parent / "images"


def send_spans(phoenix: str) -> str:
    os.environ["OTEL_EXPORTER_OTLP_ENDPOINT"] = phoenix
    os.environ["OTEL_SERVICE_NAME"] = "tao-docs"
    import tao
    from tao import PlanExecuteAgent, ScriptedModel, calculator, tool

    @tool(side_effects=False)
    def price(item: str) -> float:
        """The price of one item in the shop.

        Args:
            item: book or pen
        """
        time.sleep(0.4)
        return {"book": 12.0, "pen": 5.0}[item]

    def lookup(n: int, item: str) -> dict:
        return {"id": f"step{n}", "description": f"the price of a {item}", "tool": "price",
                "args": {"item": item}, "depends_on": []}

    plan = {"steps": [lookup(1, "book"), lookup(2, "pen"),
                      {"id": "step3", "description": "one of each", "tool": "calculator",
                       "args": {"operation": "add", "a": "$step1", "b": "$step2"},
                       "depends_on": ["step1", "step2"]}],
            "answer": "A book and a pen cost $step3 yuan"}
    tao.instrument()
    agent = PlanExecuteAgent(ScriptedModel([json.dumps(plan)], name="scripted"), [price, calculator])
    result = agent.run("What do a book and a pen cost together?")
    tao.tracing.shutdown()                    # flush the exporter
    print(result.answer)
    return result.answer


def shoot(phoenix: str) -> Path:
    out = IMAGES / "trace-phoenix.png"
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=shutil.which("chromium") or "/usr/bin/chromium",
                                    args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1500, "height": 900})
        page.goto(phoenix + "/projects")
        page.get_by_text("default", exact=True).first.click()
        page.get_by_text("invoke_agent", exact=False).first.click(timeout=30000)
        page.wait_for_timeout(2500)
        page.screenshot(path=str(out))
        browser.close()
    return out


if __name__ == "__main__":
    url = (sys.argv[1] if len(sys.argv) > 1 else "http://127.0.0.1:6006").rstrip("/")
    send_spans(url)
    time.sleep(2)
    print("wrote", shoot(url))
