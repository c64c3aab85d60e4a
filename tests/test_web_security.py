"""The workbench's walls: a token when asked for, local Host names without one, sessions that
never see each other's runs, a coding run's files read path-safely, and the endpoint's API key,
which reaches the endpoint and nothing else - not the events, the replay, the listing, the
journal, the trace files, the logs or an error message."""

from __future__ import annotations

import json
import logging
import os
import secrets
from pathlib import Path

import pytest

httpx = pytest.importorskip("httpx")
pytest.importorskip("uvicorn")
pytest.importorskip("fastapi")
pytest.importorskip("sse_starlette")

from openai_server import Error, OpenAIServer, Reply  # noqa: E402
from web_helpers import MODELS, Served, sse, start  # noqa: E402

from tao.models.scripted import ScriptedModel  # noqa: E402
from tao.web import create_app  # noqa: E402


def app_at(tmp_path: Path, **kw):
    return create_app(journal=tmp_path / "runs.db", models=MODELS, audit=tmp_path / "audit.jsonl",
                      workspace_root=tmp_path / "ws", **kw)


def test_with_a_token_the_api_answers_only_who_carries_it(tmp_path: Path) -> None:
    with Served(app_at(tmp_path, token="t0ken-abc")) as s, s.client() as c:
        assert c.get("/").status_code == 200  # the page itself opens
        r = c.get("/api/options")
        assert r.status_code == 401 and "token" in r.json()["detail"]
        assert c.get("/api/options", headers={"Authorization": "Bearer wrong"}).status_code == 401
        assert c.get("/api/options", headers={"Authorization": "Bearer t0ken-abc"}).status_code == 200
        r = c.get("/?token=t0ken-abc")  # the address tao serve prints: the cookie, then /
        assert r.status_code == 303 and r.headers["location"] == "/"
        assert "HttpOnly" in r.headers["set-cookie"] and "tao_token" in c.cookies
        run_id = start(c)  # the cookie alone now carries it, for the page's EventSource too
        assert sse(c, run_id)[-1]["data"] == {"status": "done"}


def test_without_a_token_only_local_host_names_are_answered(tmp_path: Path) -> None:
    with Served(app_at(tmp_path)) as s, s.client() as c:
        assert c.get("/api/options").status_code == 200
        r = c.get("/api/options", headers={"Host": "evil.example:8765"})  # DNS rebinding
        assert r.status_code == 400 and "token" in r.text
        assert c.get("/", headers={"Host": f"localhost:{s.port}"}).status_code == 200


def test_sessions_see_only_their_own_runs_and_share_no_model(tmp_path: Path) -> None:
    made: list[ScriptedModel] = []

    def recording() -> ScriptedModel:
        made.append(ScriptedModel(["A 的答案", "B 的答案"][len(made):len(made) + 1]))
        return made[-1]

    app = create_app(journal=tmp_path / "runs.db", models={**MODELS, "rec": recording},
                     workspace_root=tmp_path / "ws")
    with Served(app) as s, s.client() as a, s.client() as b:
        waiting = start(a, model={"name": "echo"}, approve=["calculator"], task="A 的秘密任务")
        asked = sse(a, waiting, until="approval_requested")[-1]["data"]
        first = start(a, model={"name": "rec"}, tools=[], task="A 的秘密任务")
        sse(a, first)
        second = start(b, model={"name": "rec"}, tools=[], task="B 的任务")
        events = sse(b, second)
        assert {e["data"]["run_id"] for e in events[:-1]} == {second}
        for run_id in (waiting, first):
            assert b.get(f"/api/runs/{run_id}/events").status_code == 404
            assert b.get(f"/api/runs/{run_id}/replay").status_code == 404
            assert b.get(f"/api/runs/{run_id}/files").status_code == 404
            assert b.post(f"/api/runs/{run_id}/cancel").status_code == 404
        assert b.post(f"/api/runs/{waiting}/approvals",
                      json={"call_id": asked["call_id"], "verdict": "approve"}).status_code == 404
        assert [r["run_id"] for r in b.get("/api/runs").json()["runs"]] == [second]
        assert {r["run_id"] for r in a.get("/api/runs").json()["runs"]} == {waiting, first}
        assert a.get("/api/runs").json()["runs"][-1]["live"] is True  # B did not end A's run
        a.post(f"/api/runs/{waiting}/cancel")
    assert len(made) == 2 and made[0] is not made[1]
    sent_to_b = " ".join(m.content for call in made[1].calls for m in call)
    assert "B 的任务" in sent_to_b and "A 的秘密任务" not in sent_to_b  # no shared history


def test_a_coding_runs_files_are_read_inside_its_workspace_only(tmp_path: Path) -> None:
    (tmp_path / "secret.txt").write_text("not for the page")
    with Served(app_at(tmp_path)) as s, s.client() as c:
        run_id = start(c, agent="code", model={"name": "coder"}, tools=[], task="写 index.html")
        result = sse(c, run_id)[-2]["data"]["result"]
        assert result["status"] == "done", result
        files = c.get(f"/api/runs/{run_id}/files").json()["files"]
        assert c.get(f"/api/runs/{run_id}/files/index.html").text.strip() == "<h1>hi</h1>"
        size = len(c.get(f"/api/runs/{run_id}/files/index.html").content)
        assert files == [{"path": "index.html", "size": size}]
        root = tmp_path / "ws" / run_id
        os.symlink(tmp_path / "secret.txt", root / "link.txt")
        base = f"{s.url}/api/runs/{run_id}/files/"
        for bad in ("link.txt", "%2E%2E/%2E%2E/secret.txt", "..%2F..%2Fsecret.txt",
                    "%2Fetc%2Fpasswd", "nothing.txt"):
            r = c.get(base + bad)
            assert r.status_code in (400, 404), (bad, r.status_code)
            assert "not for the page" not in r.text and "root:" not in r.text
        assert "link.txt" not in [f["path"] for f in c.get(f"/api/runs/{run_id}/files").json()["files"]]


MODELS["coder"] = lambda: ScriptedModel([
    "Thought: 写页面\nAction: write_file【index.html】\n```html\n<h1>hi</h1>\n```",
    "Thought: 写好了\nAction: Finish【index.html 已写好】"])


def test_the_api_key_reaches_the_endpoint_and_nothing_else(tmp_path: Path, caplog, capfd) -> None:
    key = "zz-KEY-" + secrets.token_urlsafe(18)
    caplog.set_level(logging.DEBUG)
    app = app_at(tmp_path)
    with OpenAIServer() as endpoint, Served(app, log_level="debug") as s, s.client() as c:
        endpoint.push(Reply(f"The key you gave me is {key}."),  # a model that leaks it back
                      Error(401, f"Incorrect API key provided: {key}."))  # as OpenAI says it
        model = {"name": "openai", "base_url": endpoint.url, "api_key": key, "model": "m"}
        leaked = start(c, model=model, tools=[], task=f"say my key, {key}")  # typed in, too
        refused = start(c, model=model, tools=[], task="again")
        seen = [c.get(f"/api/runs/{r}/events").text for r in (leaked, refused)]
        seen += [c.get(f"/api/runs/{r}/replay").text for r in (leaked, refused)]
        seen.append(c.get("/api/runs").text)
        bad = [c.post("/api/runs", json={"model": model, "task": "x", "max_turns": 0}),
               c.post("/api/runs", json={"model": {**model, "base_url": "ftp://x"}, "task": "x"}),
               c.post("/api/runs", json={"model": model, "task": "x", "tools": ["nope"]}),
               c.post("/api/compare", json={"model": model, "task": "x", "tools": [key]})]
        assert [r.status_code for r in bad] == [422, 400, 400, 400]
        seen += [r.text for r in bad]
    assert [r["headers"]["authorization"] for r in endpoint.requests] == [f"Bearer {key}"] * 2
    assert "***" in seen[2] and "status\": \"error" in seen[1]  # redacted, and the error told
    out, err = capfd.readouterr()
    seen += [out, err, caplog.text]
    seen += [p.read_bytes().decode("utf-8", "replace") for p in tmp_path.rglob("*") if p.is_file()]
    assert len(seen) > 12 and not [text[:200] for text in seen if key in text]
    assert leaked in (tmp_path / "audit.jsonl").read_text()  # the audit log was among them


def test_a_served_run_is_audited_as_tao_run_audits_it(tmp_path: Path) -> None:
    from tao.guard.audit import entries, verify

    with Served(app_at(tmp_path)) as s, s.client() as c:
        run_id = start(c, model={"name": "echo"}, approve=["calculator"], task="15 加 27")
        asked = sse(c, run_id, until="approval_requested")[-1]["data"]
        c.post(f"/api/runs/{run_id}/approvals", json={"call_id": asked["call_id"],
                                                      "verdict": "reject", "reason": "先别算"})
        assert sse(c, run_id)[-1]["data"] == {"status": "done"}
    log = [e for e in entries(tmp_path / "audit.jsonl") if e.get("run_id") == run_id]
    assert [e["kind"] for e in log] == ["run.start", "approval", "tool.call", "run.end"]
    assert log[0]["task"] == "15 加 27" and log[0]["agent"] == "react"
    assert log[1]["decision"] == "rejected" and log[1]["reason"] == "先别算"
    assert log[2]["tool"] == "calculator" and log[2]["status"] == "rejected"
    assert verify(tmp_path / "audit.jsonl").ok  # the hash chain tao audit verify checks


def test_a_key_typed_into_an_approval_is_not_in_the_audit_log_or_the_journal(tmp_path: Path) -> None:
    key = "plainkey" + secrets.token_hex(8)  # no shape redaction knows: only the run knows it
    with OpenAIServer() as endpoint, Served(app_at(tmp_path)) as s, s.client() as c:
        endpoint.push(Reply("", tool_calls=[("call_1", "calculator",
                                             '{"operation": "add", "a": 1, "b": 2}')]),
                      Reply("好的，不算了。"))
        model = {"name": "openai", "base_url": endpoint.url, "api_key": key, "model": "m"}
        run_id = start(c, model=model, approve=["calculator"], task="1+2")
        asked = sse(c, run_id, until="approval_requested")[-1]["data"]
        c.post(f"/api/runs/{run_id}/approvals", json={
            "call_id": asked["call_id"], "verdict": "edit", "reason": f"用 {key} 的账户",
            "arguments": {"operation": "add", "a": 1, "b": 2, "note": key}})
        events = sse(c, run_id)
        assert events[-1]["data"] == {"status": "done"} and key not in json.dumps(events)
    audit = (tmp_path / "audit.jsonl").read_text()
    assert '"kind":"approval"' in audit and "***" in audit and key not in audit
    assert key.encode() not in (tmp_path / "runs.db").read_bytes()


def test_another_sites_page_cannot_start_or_answer_anything(tmp_path: Path) -> None:
    body = {"model": {"name": "scripted-zh"}, "task": "1+1"}
    with Served(app_at(tmp_path)) as s, s.client() as c:
        r = c.post("/api/runs", json=body, headers={"Origin": "http://evil.example"})
        assert r.status_code == 403
        r = c.post("/api/runs", json=body, headers={"Origin": f"http://localhost:{s.port}"})
        assert r.status_code == 403  # another origin, though the same machine
        r = c.post("/api/runs", content=json.dumps(body), headers={"Content-Type": "text/plain"})
        assert r.status_code == 422  # the form a page may send without asking: not read as JSON
        r = c.post("/api/runs", json=body, headers={"Origin": s.url})  # the page itself
        assert r.status_code == 201
        assert c.get("/api/runs").json()["runs"][0]["run_id"] == r.json()["run_id"]


def test_another_apps_odd_cookie_on_localhost_does_not_cost_the_session(tmp_path: Path) -> None:
    with Served(app_at(tmp_path)) as s, s.client() as c:
        run_id = start(c)
        sid = c.cookies["tao_session"]
        odd = f'x y=1; username-localhost-8888="2|1:0|10:17|44:abc="; $$=1; tao_session={sid}'
        r = httpx.get(f"{s.url}/api/runs/{run_id}/replay", headers={"Cookie": odd})
        assert r.status_code == 200 and r.json()["events"][-1]["type"] == "run_finished"
