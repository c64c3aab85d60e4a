"""The workbench starts what issue 28 added, without Python: tao.toml's named agents and their
handoffs, a typed result given as a JSON Schema, and a ``tao.Session`` continued by name - and
shows them: each agent's ``run_started`` after a ``handed_off``, the validated value in the
run's ``run_finished``, a session's earlier runs in ``GET /api/runs?session_name=NAME``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("httpx")
pytest.importorskip("uvicorn")
pytest.importorskip("fastapi")
pytest.importorskip("sse_starlette")

from web_helpers import Served, sse, start  # noqa: E402

from tao.models.scripted import ScriptedModel, tool_call  # noqa: E402
from tao.web import create_app  # noqa: E402

TOML = """
[agents.triage]
agent = "react"
handoffs = ["analyst"]

[agents.analyst]
agent = "react-json"
description = "does the arithmetic"
"""
PERSON = {"title": "Person", "type": "object", "required": ["name", "age"],
          "properties": {"name": {"type": "string"}, "age": {"type": "integer"}}}


def app_in(tmp_path: Path, models: dict) -> object:
    return create_app(journal=tmp_path / "runs.db", models=models, workspace_root=tmp_path / "ws",
                      audit=tmp_path / "audit.jsonl")


def test_a_named_agent_of_tao_toml_hands_over_and_the_page_sees_who_speaks(
        tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "tao.toml").write_text(TOML, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    script = [tool_call("transfer_to_analyst", reason="算术"),
              '{"thought": "3 * 12 = 36", "action": "final_answer", "action_input": "36"}']
    app = app_in(tmp_path, {"chain": lambda: ScriptedModel(list(script))})
    with Served(app) as s, s.client() as c:
        options = c.get("/api/options").json()
        assert options["agents"][-2:] == ["triage", "analyst"]
        assert options["named"][0] == {"name": "triage", "agent": "react",
                                       "handoffs": ["analyst"], "description": ""}
        run_id = start(c, agent="triage", model={"name": "chain"}, task="3 * 12?")
        events = sse(c, run_id)
    kinds = [(m["event"], m["data"].get("agent") or m["data"].get("target")) for m in events
             if m["event"] in ("run_started", "handed_off")]
    assert kinds == [("run_started", "triage"), ("handed_off", "analyst"),
                     ("run_started", "analyst")]
    finished = [m for m in events if m["event"] == "run_finished"]
    assert len(finished) == 1 and finished[0]["data"]["result"]["answer"] == "36"


def test_a_run_with_a_json_schema_ends_with_the_validated_value(tmp_path: Path) -> None:
    app = app_in(tmp_path, {"ann": lambda: ScriptedModel(['Here: {"name": "Ann", "age": 3}'])})
    with Served(app) as s, s.client() as c:
        run_id = start(c, model={"name": "ann"}, task="Who is Ann?", output_schema=PERSON)
        events = sse(c, run_id)
        result = events[-2]["data"]["result"]
        assert result["output"] == {"name": "Ann", "age": 3}
        bad = c.post("/api/runs", json={"model": {"name": "ann"}, "task": "x",
                                        "output_schema": {"type": "nonsense"}})
        assert bad.status_code == 400 and bad.json()["code"] == "bad_schema"
        bad = c.post("/api/runs", json={"model": {"name": "ann"}, "task": "x",
                                        "output_schema": {"$ref": "py:os:system"}})
        assert bad.status_code == 400 and "$ref" in bad.text  # data, never imported
        deep: dict = {"type": "string"}
        for _ in range(200):
            deep = {"type": "array", "items": deep}
        bad = c.post("/api/runs", json={"model": {"name": "ann"}, "task": "x",
                                        "output_schema": deep})
        assert bad.status_code == 400 and "nested more than 32" in bad.text
    audit = (tmp_path / "audit.jsonl").read_text(encoding="utf-8")
    assert '"run.end"' in audit


def test_a_session_goes_on_across_runs_and_lists_its_earlier_runs(tmp_path: Path) -> None:
    seen: list = []

    def remembers():
        def answer(messages):
            seen.append([m.content for m in messages if m.role in ("user", "assistant")])
            return "Ann" if any("Ann" in (m.content or "") for m in messages[:-1]) else "noted"
        return ScriptedModel([answer])

    app = app_in(tmp_path, {"mem": remembers})
    with Served(app) as s, s.client() as c:
        first = start(c, model={"name": "mem"}, task="My name is Ann.", session="chat-1")
        sse(c, first)
        other = start(c, model={"name": "mem"}, task="Unrelated.", tools=["calculators"])
        sse(c, other)
        second = start(c, model={"name": "mem"}, task="What is my name?", session="chat-1")
        assert sse(c, second)[-2]["data"]["result"]["answer"] == "Ann"
        runs = c.get("/api/runs", params={"session_name": "chat-1"}).json()["runs"]
        assert [r["run_id"] for r in runs] == [second, first]
        assert {r["session"] for r in runs} == {"chat-1"}
        # another browser's "chat-1" is its own conversation
        with s.client() as stranger:
            third = start(stranger, model={"name": "mem"}, task="What is my name?",
                          session="chat-1")
            assert sse(stranger, third)[-2]["data"]["result"]["answer"] == "noted"
            assert stranger.get("/api/runs", params={"session_name": "chat-1"}).json()[
                "runs"][0]["run_id"] == third
    assert "My name is Ann." in seen[2]


def test_deps_never_reach_the_page_the_trace_or_the_audit_log(tmp_path: Path,
                                                              monkeypatch) -> None:
    """The page cannot give deps (they are the Python API's), and a chain's events carry none:
    what the page, the trace file and the audit log get is the events and the calls."""
    (tmp_path / "tao.toml").write_text(TOML, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    script = [tool_call("transfer_to_analyst"),
              '{"thought": "-", "action": "final_answer", "action_input": "ok"}']
    app = app_in(tmp_path, {"chain": lambda: ScriptedModel(list(script))})
    with Served(app) as s, s.client() as c:
        r = c.post("/api/runs", json={"agent": "triage", "model": {"name": "chain"},
                                      "task": "x", "deps": {"db": "secret-handle"}})
        assert r.status_code == 201  # an unknown field is ignored, never handed to a tool
        events = sse(c, r.json()["run_id"])
    text = json.dumps([m["data"] for m in events]) + \
        (tmp_path / "audit.jsonl").read_text(encoding="utf-8") + \
        "".join(p.read_text(encoding="utf-8") for p in (tmp_path / "web-traces").glob("*"))
    assert "secret-handle" not in text
