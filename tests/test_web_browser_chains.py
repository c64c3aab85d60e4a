"""Issue 28 in the workbench page, in a real browser: tao.toml's named agents in the agent list,
a handoff chain where every step says which agent speaks, a typed output given as a JSON
Schema shown validated on the end card, and a session whose earlier runs the form lists.

Screenshots land in tests/artifacts/web/. Without chromium or Playwright the tests skip, except
under ``TAO_REQUIRE_BROWSER=1`` (CI), where they fail.
"""

from __future__ import annotations

import json

from web_browser_support import (browser, fill_run, finished, screenshot,  # noqa: F401
                                 workbench)

from tao import ScriptedModel, tool_call

TOML = """
[agents.triage]
agent = "react"
handoffs = ["analyst"]

[agents.analyst]
agent = "react-text"
description = "does the arithmetic"
"""
PERSON = {"title": "Person", "type": "object", "required": ["name", "age"],
          "properties": {"name": {"type": "string"}, "age": {"type": "integer"}}}


def test_a_handoff_chain_shows_which_agent_speaks(workbench, tmp_path, monkeypatch):
    (tmp_path / "tao.toml").write_text(TOML, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    script = [tool_call("transfer_to_analyst", reason="需要计算"),
              "Thought: 3 × 12 = 36\nFinal Answer: 36"]
    _, page = workbench(models={"chain": lambda: ScriptedModel(list(script))})
    assert "analyst" in page.inner_text("select[name=agent] option[value=triage]")
    fill_run(page, agent="triage", model="chain", task="3 乘 12 是多少？")
    assert "analyst" in page.inner_text(".agent-note")  # whom triage may hand over to
    page.click("#run-button")
    assert finished(page) == "done"
    assert "chained" in page.get_attribute("#run", "class")
    speakers = page.eval_on_selector_all(
        "#run .chain > li[data-kind]:not([data-kind=turn_started])",
        "els => els.map(e => [e.dataset.kind, e.dataset.agent])")
    assert ["run_started", "triage"] in speakers and ["run_started", "analyst"] in speakers
    assert ["final_answer", "analyst"] in speakers
    handed = page.inner_text("#run li[data-kind=handed_off]")
    assert "triage" in handed and "analyst" in handed and "需要计算" in handed
    screenshot(page, "handoff-chain")


def test_a_typed_output_and_a_session_from_the_form(workbench):
    def model():
        return ScriptedModel([lambda messages: 'Here: {"name": "Ann", "age": 3}'
                              if "Ann" in " ".join(m.content or "" for m in messages[:-1])
                              else '{"name": "?", "age": 0}'])

    _, page = workbench(models={"typed": model}, locale="en-US")
    before = None
    for task in ("My name is Ann, I am 3.", "Who am I?"):
        fill_run(page, agent="react", model="typed", task=task)
        page.fill("input[name=session]", "chat-1")
        if not page.eval_on_selector(".schema-box", "d => d.open"):
            page.click(".schema-box summary")  # folded until asked for; stays open after
        page.fill("textarea[name=output_schema]", json.dumps(PERSON))
        page.click("#run-button")
        page.wait_for_function("id => (document.querySelector('#run').dataset.runId || '') "
                               "!== id", arg=before or "")  # this run's view, not the last one's
        assert finished(page) == "done"
        before = page.get_attribute("#run", "data-run-id")
    card = page.inner_text("#run li[data-kind=run_finished]")
    assert "Typed output" in card
    assert json.loads(page.inner_text("#run .typed-output")) == {"name": "Ann", "age": 3}
    page.fill("input[name=session]", "chat-1")  # typed again: the list is read afresh
    page.wait_for_function("document.querySelectorAll('.session-runs li[data-run-id]').length == 2")
    listed = page.inner_text(".session-runs")
    assert listed.index("Who am I?") < listed.index("My name is Ann")
    page.fill("textarea[name=output_schema]", "[1, 2]")
    page.click("#run-button")
    assert "JSON object" in page.inner_text("#error")
    screenshot(page, "typed-session")
