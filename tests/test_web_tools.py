"""The tools the run form offers besides the calculators: seed 001's weather demo and the MCP
servers ``./tao.toml`` names, each started for the run that picked it (and stopped with it)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

pytest.importorskip("httpx")
pytest.importorskip("uvicorn")
pytest.importorskip("fastapi")
pytest.importorskip("sse_starlette")

from web_helpers import Served, sse, start  # noqa: E402

from tao.models.scripted import ScriptedModel, tool_call  # noqa: E402
from tao.web import create_app  # noqa: E402

DEMO = Path(__file__).parent / "mcp_servers" / "demo.py"


def observations(events: list[dict]) -> list[str]:
    return [m["data"]["content"] for m in events if m["event"] == "observation"]


def test_an_mcp_server_from_tao_toml_is_offered_and_its_tools_run(tmp_path: Path,
                                                                   monkeypatch) -> None:
    spec = f"{sys.executable} {DEMO}"
    (tmp_path / "tao.toml").write_text(f"mcp = [{json.dumps(spec)}]\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    models = {"timer": lambda: ScriptedModel([tool_call("get_time"), "现在是中午。"])}
    app = create_app(journal=tmp_path / "runs.db", models=models, workspace_root=tmp_path / "ws")
    with Served(app) as s, s.client() as c:
        tools = [t["name"] for t in c.get("/api/options").json()["tools"]]
        assert f"mcp:{spec}" in tools
        run_id = start(c, model={"name": "timer"}, tools=[f"mcp:{spec}"], task="几点了？")
        events = sse(c, run_id)
        assert "12:00" in observations(events)[0]
        assert events[-2]["data"]["result"]["answer"] == "现在是中午。"
        r = c.post("/api/runs", json={"model": {"name": "timer"}, "task": "x",
                                      "tools": ["mcp:python3 elsewhere.py"]})
        assert r.status_code == 400 and r.json()["code"] == "unknown_tool"  # only tao.toml's


def test_an_mcp_server_that_cannot_start_is_a_clear_error(tmp_path: Path, monkeypatch) -> None:
    spec = f"{sys.executable} -c 'import sys; sys.exit(4)'"
    (tmp_path / "tao.toml").write_text(f"mcp = [{json.dumps(spec)}]\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    app = create_app(journal=tmp_path / "runs.db", models={"m": lambda: ScriptedModel(["x"])},
                     workspace_root=tmp_path / "ws")
    with Served(app) as s, s.client() as c:
        r = c.post("/api/runs", json={"model": {"name": "m"}, "task": "x", "tools": [f"mcp:{spec}"]})
        assert r.status_code == 400 and r.json()["code"] == "cannot_build"
        assert "MCP" in r.json()["detail"]


def test_the_weather_demo_answers_in_the_language_it_is_asked_in(tmp_path: Path) -> None:
    models = {"w": lambda: ScriptedModel([tool_call("get_weather", city="北京"), "北京晴。"])}
    app = create_app(journal=tmp_path / "runs.db", models=models, workspace_root=tmp_path / "ws")
    with Served(app) as s, s.client() as c:
        run_id = start(c, model={"name": "w"}, tools=["weather"], task="北京天气怎么样？")
        assert "晴，19°C" in observations(sse(c, run_id))[0]


def test_each_tool_set_is_offered_with_its_tools_from_the_package_itself(tmp_path: Path) -> None:
    from tao.workspace import Workspace

    app = create_app(journal=tmp_path / "runs.db", workspace_root=tmp_path / "ws")
    with Served(app) as s, s.client() as c:
        sets = {t["name"]: t.get("tools") for t in c.get("/api/options").json()["tools"]}
    assert sets["calculators"] == ["calculate", "calculator"]
    assert sets["weather"] == ["get_weather", "search_web", "calculate"]  # not examples/: a wheel
    with Workspace(tmp_path / "w") as ws:  # with its sandbox, as a served coding run has it
        assert sorted(sets["workspace"]) == sorted(t.name for t in ws)


def test_calculators_and_weather_picked_together_make_one_working_run(tmp_path: Path) -> None:
    models = {"both": lambda: ScriptedModel([
        [tool_call("get_weather", city="上海"), tool_call("calculate", expression="(19 + 16) / 2")],
        "平均 17.5°C。"])}
    app = create_app(journal=tmp_path / "runs.db", models=models, workspace_root=tmp_path / "ws")
    with Served(app) as s, s.client() as c:
        run_id = start(c, model={"name": "both"}, tools=["calculators", "weather"],
                       task="上海和北京的平均气温？", approve=["get_weather"])
        asked = sse(c, run_id, until="approval_requested")[-1]["data"]
        c.post(f"/api/runs/{run_id}/approvals", json={"call_id": asked["call_id"],
                                                      "verdict": "approve"})
        events = sse(c, run_id)
        weather, mean = observations(events)
        assert "中雨，16°C" in weather and mean == "17.5"  # the calculators' calculate: a number
        assert events[-2]["data"]["result"]["status"] == "done"


@pytest.mark.parametrize("lang, words", [("zh-CN,zh;q=0.9", "都有名为 'calculator' 的工具"),
                                         ("en-GB", "both have a tool named 'calculator'")])
def test_an_mcp_server_whose_tool_shares_a_name_is_refused_in_the_form(
        tmp_path: Path, monkeypatch, lang: str, words: str) -> None:
    spec = f"{sys.executable} {DEMO}"  # its tools: add, weather, get_time, calculator, crash
    (tmp_path / "tao.toml").write_text(f"mcp = [{json.dumps(spec)}]\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    app = create_app(journal=tmp_path / "runs.db", models={"m": lambda: ScriptedModel(["x"])},
                     workspace_root=tmp_path / "ws")
    with Served(app) as s, s.client(headers={"Accept-Language": lang}) as c:
        r = c.post("/api/runs", json={"model": {"name": "m"}, "task": "x",
                                      "tools": ["calculators", f"mcp:{spec}"]})
        assert r.status_code == 400 and r.json()["code"] == "tool_clash"
        assert words in r.json()["detail"] and "calculators" in r.json()["detail"]
        assert c.get("/api/runs").json()["runs"] == []  # nothing started
