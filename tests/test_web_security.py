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
from web_helpers import MODELS, TASK_ZH as TASK, Served, sse, start  # noqa: E402

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


# -- issue 24's probes, replayed: what held stays held, what did not now holds --------------------

def test_the_held_probes_still_hold(tmp_path: Path) -> None:
    body = {"model": {"name": "scripted-zh"}, "task": "1+1"}
    with Served(app_at(tmp_path)) as s, s.client() as c:
        for host in ("evil.example", f"127.0.0.1.nip.io:{s.port}", ""):
            assert c.get("/api/options", headers={"Host": host}).status_code == 400, host
        for origin in ("http://evil.example", "null"):
            r = c.post("/api/runs", json=body, headers={"Origin": origin})
            assert r.status_code == 403 and "access-control-allow-origin" not in r.headers
        deep = "[" * 100_000 + "]" * 100_000
        r = c.post("/api/runs", content=deep, headers={"Content-Type": "application/json"})
        assert r.status_code in (400, 422)
        r = c.post("/api/runs", content="{not json", headers={"Content-Type": "application/json"})
        assert r.status_code in (400, 422)
        assert c.get("/api/runs").json()["runs"] == []  # nothing of it ran


def test_a_session_id_is_issued_by_the_server_and_never_adopted(tmp_path: Path) -> None:
    chosen = "attacker-chosen-session-id-0123456789"  # planted from another port of 127.0.0.1
    with Served(app_at(tmp_path)) as s:
        def get(path: str, sid: str) -> httpx.Response:
            return httpx.get(f"{s.url}{path}", headers={"Cookie": f"tao_session={sid}"})

        r = get("/api/runs", chosen)  # the victim's browser, with the planted value
        cookie = r.headers["set-cookie"]
        assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
        given = cookie.split("tao_session=", 1)[1].split(";", 1)[0]
        assert given != chosen and len(given) >= 40
        with s.client(cookies={"tao_session": given}) as victim:
            run_id = start(victim, task="受害者的任务")
            assert sse(victim, run_id)[-1]["data"] == {"status": "done"}
        r = get("/api/runs", chosen)  # the attacker, with the value they chose
        assert r.json()["runs"] == [] and get(f"/api/runs/{run_id}/replay", chosen).status_code == 404
        assert r.headers["set-cookie"].split("tao_session=", 1)[1].split(";")[0] not in (chosen, given)
        forged = given[:-3] + ("AAA" if not given.endswith("AAA") else "BBB")  # a bad signature
        r = get("/api/runs", forged)
        assert r.json()["runs"] == [] and "tao_session=" in r.headers["set-cookie"]
        r = get("/api/runs", given)
        assert [x["run_id"] for x in r.json()["runs"]] == [run_id] and "set-cookie" not in r.headers
    with Served(app_at(tmp_path)) as s:  # a restarted server still knows the ids it gave
        r = httpx.get(f"{s.url}/api/runs", headers={"Cookie": f"tao_session={given}"})
        assert [x["run_id"] for x in r.json()["runs"]] == [run_id]


def test_a_link_from_another_site_does_not_replace_the_session(tmp_path: Path) -> None:
    with Served(app_at(tmp_path)) as s:
        # the browser sends no Strict cookie on it: a cookie set here would replace the user's
        r = httpx.get(f"{s.url}/", headers={"Sec-Fetch-Site": "cross-site"})
        assert r.status_code == 200 and "set-cookie" not in r.headers
        r = httpx.get(f"{s.url}/", headers={"Sec-Fetch-Site": "none"})  # typed in: a session
        assert "tao_session=" in r.headers["set-cookie"]


def test_the_whole_server_caps_its_live_runs(tmp_path: Path) -> None:
    body = {"model": {"name": "echo"}, "approve": ["calculator"], "task": "15 + 27"}
    with Served(app_at(tmp_path, max_runs=2)) as s:
        # no cookie: a new session each time, so the per-session cap alone would not hold
        codes = [httpx.post(f"{s.url}/api/runs", json=body, timeout=30) for _ in range(3)]
        assert [r.status_code for r in codes] == [201, 201, 429]
        assert codes[2].json()["code"] == "server_busy" and "--max-runs" in codes[2].json()["detail"]
        r = httpx.post(f"{s.url}/api/runs", json=body, headers={"Accept-Language": "zh-CN"})
        assert r.status_code == 429 and "上限 2" in r.json()["detail"]


def test_a_body_over_the_limit_gets_413_before_it_is_read(tmp_path: Path) -> None:
    big = {"model": {"name": "scripted-zh"}, "task": "x" * 5000}
    with Served(app_at(tmp_path, max_body=4096)) as s, s.client() as c:
        r = c.post("/api/runs", json=big)
        assert r.status_code == 413 and r.json()["code"] == "body_too_big"

        def chunks():  # no Content-Length: counted as it arrives
            yield b'{"task": "'
            for _ in range(10):
                yield b"y" * 1000
            yield b'"}'

        r = c.post("/api/runs", content=chunks(), headers={"Content-Type": "application/json"})
        assert r.status_code == 413
        assert c.get("/api/runs").json()["runs"] == []
        assert start(c, task="1+1")  # a body under the limit is read as ever


def test_a_task_that_is_not_unicode_or_too_long_gets_400_and_nothing_runs(tmp_path: Path) -> None:
    from tao.runs.journal import Journal
    from tao.web.setup import MAX_TASK

    with Served(app_at(tmp_path)) as s, s.client() as c:
        lone = '{"model": {"name": "scripted-zh"}, "task": "\\ud800"}'  # the probe
        r = c.post("/api/runs", content=lone, headers={"Content-Type": "application/json"})
        assert r.status_code == 400 and r.json()["code"] == "not_unicode"
        r = c.post("/api/compare", content=lone, headers={"Content-Type": "application/json"})
        assert r.status_code == 400
        pair = '{"model": {"name": "scripted-zh"}, "tools": [], "task": "\\ud83d\\ude00 是什么？"}'
        r = c.post("/api/runs", content=pair, headers={"Content-Type": "application/json"})
        assert r.status_code == 201  # a surrogate pair is a character (😀), not an error
        r = c.post("/api/runs", json={"model": {"name": "scripted-zh"}, "task": "长" * (MAX_TASK + 1)})
        assert r.status_code == 400 and r.json()["code"] == "task_too_long"
        assert len(c.get("/api/runs").json()["runs"]) == 1
    assert [row["task"] for row in Journal(tmp_path / "runs.db").runs()] == ["😀 是什么？"]


def test_every_run_accepted_is_in_history_even_one_that_never_started(tmp_path: Path) -> None:
    with Served(app_at(tmp_path)) as s, s.client() as c:
        r = c.post("/api/compare", json={"model": {"name": "slow"}, "task": TASK})
        assert r.status_code == 201
        ids = r.json()["run_ids"]
        c.post(f"/api/runs/{ids['plan']}/cancel")  # queued behind the other two: never starts
        c.post(f"/api/runs/{ids['react']}/cancel")
        c.post(f"/api/runs/{ids['codeact']}/cancel")
        cookie = c.cookies["tao_session"]
    with Served(app_at(tmp_path)) as s, s.client(cookies={"tao_session": cookie}) as c:
        listed = {r["run_id"]: r["status"] for r in c.get("/api/runs").json()["runs"]}
    assert set(listed) == set(ids.values())
    assert listed[ids["plan"]] == "cancelled"
