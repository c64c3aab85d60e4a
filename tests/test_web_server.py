"""``tao serve``'s HTTP side on a real uvicorn (127.0.0.1, a free port) driven by httpx, with
``ScriptedModel`` runs: a run's events over SSE in order, reconnecting with ``Last-Event-ID``
(once, or hopping from connection to connection), cancelling, approvals answered over HTTP, and
compare's three runs. Walls (token, sessions, the key, files) are in test_web_security.py; the
journal in test_web_journal.py."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

httpx = pytest.importorskip("httpx")
uvicorn = pytest.importorskip("uvicorn")
pytest.importorskip("fastapi")
pytest.importorskip("sse_starlette")

from web_helpers import MODELS, Served, sse, start  # noqa: E402

from tao.web import create_app  # noqa: E402


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    app = create_app(journal=tmp_path / "runs.db", models=MODELS,
                     workspace_root=tmp_path / "workspaces")
    with Served(app) as s:
        yield s


def test_a_chinese_run_streams_thought_action_observation_answer_in_order(served: Served) -> None:
    with served.client() as c:
        assert c.get("/").status_code == 200 and "tao_session" in c.cookies
        options = c.get("/api/options", headers={"Accept-Language": "zh-CN,zh;q=0.9"}).json()
        assert options["lang"] == "zh" and "scripted-zh" in [m["name"] for m in options["models"]]
        assert options["agents"] == ["react", "react-text", "react-json", "codeact", "plan", "code"]
        run_id = start(c)
        messages = sse(c, run_id)
    *events, end = messages
    assert end["event"] == "end" and end["data"] == {"status": "done"} and "id" not in end
    assert [int(m["id"]) for m in events] == list(range(1, len(events) + 1))
    assert all(m["data"]["seq"] == int(m["id"]) and m["data"]["type"] == m["event"]
               and m["data"]["run_id"] == run_id for m in events)
    chain = [m["event"] for m in events if m["event"] in
             ("thought", "action", "observation", "final_answer")]
    assert chain == ["thought", "action", "observation"] * 2 + ["final_answer"]
    assert events[-1]["event"] == "run_finished"
    assert events[-1]["data"]["result"]["answer"] == "小明还剩 14 元。"
    assert "".join(m["data"]["text"] for m in events if m["event"] == "token"
                   and m["data"]["turn"] == 3) == "小明还剩 14 元。"  # streamed in pieces


@pytest.mark.parametrize("query", [False, True], ids=["header", "query"])
def test_a_reconnect_with_last_event_id_loses_and_repeats_nothing(served: Served,
                                                                  query: bool) -> None:
    with served.client() as c:
        run_id = start(c, model={"name": "slow"})
        first = sse(c, run_id, limit=7)  # then the connection is dropped mid-run
        assert c.get("/api/runs").json()["runs"][0]["live"] is True
        rest = sse(c, run_id, last=int(first[-1]["id"]), query=query)
        full = c.get(f"/api/runs/{run_id}/replay").json()["events"]
        with c.stream("GET", f"/api/runs/{run_id}/events") as r:  # the browser's reconnect delay
            assert next(r.iter_lines()) == "retry: 500"  # 0.5 s, not Chromium's default 3 s
    joined = [m["data"] for m in first + rest[:-1]]
    assert joined == full and [e["seq"] for e in joined] == list(range(1, len(full) + 1))
    assert full[-1]["type"] == "run_finished" and rest[-1]["data"] == {"status": "done"}


def test_a_cancelled_run_ends_cancelled_and_keeps_the_files_written(served: Served) -> None:
    with served.client() as c:
        run_id = start(c, model={"name": "writer"}, tools=["workspace"], task="写三个文件")
        seen = sse(c, run_id, until="observation")  # a.txt is written
        assert seen[-1]["data"]["call_id"] and "a.txt" in seen[-1]["data"]["content"]
        r = c.post(f"/api/runs/{run_id}/cancel")
        assert r.status_code == 202
        rest = sse(c, run_id, last=int(seen[-1]["id"]))
        assert rest[-1]["data"] == {"status": "cancelled"}
        assert rest[-2]["event"] == "run_finished"
        assert rest[-2]["data"]["result"]["status"] == "cancelled"
        files = c.get(f"/api/runs/{run_id}/files").json()["files"]
        assert {"path": "a.txt", "size": len("第一个文件\n".encode())} in files
        assert "c.txt" not in [f["path"] for f in files]
        assert c.get(f"/api/runs/{run_id}/files/a.txt").text == "第一个文件\n"
        listed = c.get("/api/runs").json()["runs"][0]
        assert (listed["run_id"], listed["status"], listed["live"]) == (run_id, "cancelled", False)
        assert c.post(f"/api/runs/{run_id}/cancel").status_code == 202  # again: nothing to do


@pytest.mark.parametrize("answer, heard", [
    ({"verdict": "approve"}, "42"),
    ({"verdict": "reject", "reason": "不许算"}, "不许算"),
    ({"verdict": "edit", "arguments": {"operation": "add", "a": 1, "b": 2}}, "3"),
], ids=["approve", "reject", "edit"])
def test_a_gated_call_waits_for_the_answer_posted_and_the_agent_gets_it(
        served: Served, answer: dict, heard: str) -> None:
    with served.client() as c:
        run_id = start(c, model={"name": "echo"}, approve=["calculator"], task="15 加 27")
        seen = sse(c, run_id, until="approval_requested")
        asked = seen[-1]["data"]
        assert asked["tool"] == "calculator" and asked["arguments"] == {
            "operation": "add", "a": 15, "b": 27}
        assert "action" not in [m["event"] for m in seen]  # nothing shown or run before the answer
        time.sleep(0.3)
        assert c.get("/api/runs").json()["runs"][0]["live"] is True  # it waits
        wrong = c.post(f"/api/runs/{run_id}/approvals", json={"call_id": "nope", "verdict": "approve"})
        assert wrong.status_code == 404
        r = c.post(f"/api/runs/{run_id}/approvals", json={"call_id": asked["call_id"], **answer})
        assert r.status_code == 200, r.text
        rest = sse(c, run_id, last=int(seen[-1]["id"]))
        again = c.post(f"/api/runs/{run_id}/approvals", json={"call_id": asked["call_id"], **answer})
        assert again.status_code == 404  # answered already
    decided = next(m["data"] for m in rest if m["event"] == "approval_decided")
    assert decided["by"] == "web" and decided["call_id"] == asked["call_id"]
    result = rest[-2]["data"]["result"]
    assert result["status"] == "done" and heard in result["answer"]
    assert ("42" in result["answer"]) == (answer["verdict"] == "approve")  # 15 + 27 ran only then


def test_a_bad_approval_verdict_is_a_clear_400_and_the_call_still_waits(served: Served) -> None:
    with served.client() as c:
        run_id = start(c, model={"name": "echo"}, approve=["calculator"], task="15 加 27")
        asked = sse(c, run_id, until="approval_requested")[-1]
        call_id = asked["data"]["call_id"]
        r = c.post(f"/api/runs/{run_id}/approvals", json={"call_id": call_id, "verdict": "yes"})
        assert r.status_code == 400 and "approve, reject, edit" in r.json()["detail"]
        r = c.post(f"/api/runs/{run_id}/approvals", json={"call_id": call_id, "verdict": "edit"})
        assert r.status_code == 400 and "arguments" in r.json()["detail"]
        assert c.post(f"/api/runs/{run_id}/approvals",
                      json={"call_id": call_id, "verdict": "approve"}).status_code == 200
        assert sse(c, run_id, last=int(asked["id"]))[-1]["data"] == {"status": "done"}


def compare_model(agent: str):
    """Each architecture's own script for the same question (a factory that takes the agent)."""
    from test_compare import PLAN, codeact_script, react_script

    from tao.models.scripted import ScriptedModel

    return ScriptedModel({"react": react_script, "codeact": codeact_script,
                          "plan": lambda: [PLAN]}[agent]())


def test_compare_runs_the_three_architectures_each_with_its_own_events(tmp_path: Path) -> None:
    from test_compare import XIAOMING

    app = create_app(journal=tmp_path / "runs.db", models={"per-agent": compare_model},
                     workspace_root=tmp_path / "ws")
    with Served(app) as s, s.client() as c:
        r = c.post("/api/compare", json={"model": {"name": "per-agent"}, "tools": ["calculators"],
                                         "task": XIAOMING})
        assert r.status_code == 201, r.text
        ids = r.json()["run_ids"]
        assert list(ids) == ["react", "codeact", "plan"] and len(set(ids.values())) == 3
        results = {}
        for agent, run_id in ids.items():
            events = sse(c, run_id)[:-1]
            assert {e["data"]["run_id"] for e in events} == {run_id}
            results[agent] = events[-1]["data"]["result"]
    assert {a: r["status"] for a, r in results.items()} == dict.fromkeys(ids, "done")
    assert results["react"]["answer"] == "他还剩 4 元。" and results["react"]["tool_calls"] == 4
    assert "4" in results["codeact"]["answer"] and results["plan"]["answer"] == "他还剩 4 元"
    assert results["react"]["turns"] == 5 and results["plan"]["turns"] == 1


def test_a_run_waiting_for_approval_can_be_cancelled_and_a_stopping_server_cancels_the_rest(
        tmp_path: Path) -> None:
    from tao.runs.journal import Journal

    app = create_app(journal=tmp_path / "runs.db", models=MODELS, workspace_root=tmp_path / "ws")
    with Served(app) as s, s.client() as c:
        waiting = start(c, model={"name": "echo"}, approve=["calculator"])
        asked = sse(c, waiting, until="approval_requested")[-1]
        assert c.post(f"/api/runs/{waiting}/cancel").status_code == 202
        rest = sse(c, waiting, last=int(asked["id"]))
        assert rest[-2]["data"]["result"]["status"] == "cancelled"
        assert "approval_decided" not in [m["event"] for m in rest]
        late = c.post(f"/api/runs/{waiting}/approvals",
                      json={"call_id": asked["data"]["call_id"], "verdict": "approve"})
        assert late.status_code == 404  # the run is over: no one waits for that answer
        cut = start(c, model={"name": "echo"}, approve=["calculator"])
        sse(c, cut, until="approval_requested")
    status = {r["run_id"]: r["status"] for r in Journal(tmp_path / "runs.db").runs()}
    assert status == {waiting: "cancelled", cut: "cancelled"}
    with open(tmp_path / "web-traces" / f"{cut}.jsonl", encoding="utf-8") as f:
        assert json.loads(f.readlines()[-1])["result"]["status"] == "cancelled"


def test_hopping_from_connection_to_connection_mid_run_loses_and_repeats_nothing(
        served: Served) -> None:
    with served.client() as c:
        run_id = start(c, model={"name": "slow"})
        got, hops = [], 0
        while not got or got[-1]["event"] != "end":  # 3 events a connection, then drop it
            got += sse(c, run_id, last=int(got[-1]["id"]) if got else None, limit=3)
            hops += 1
        full = c.get(f"/api/runs/{run_id}/replay").json()["events"]
        assert hops > 10 and [m["data"] for m in got[:-1]] == full
        for cut in range(len(full) + 1):  # the finished run, from every point
            assert [m["data"] for m in sse(c, run_id, last=cut)[:-1]] == full[cut:]
