"""Every run the workbench serves is journaled (``tao.runs``): after a restart of the server the
same browser (its ``tao_session`` cookie) still lists its runs and replays their events; another
browser sees none of them; ``tao runs`` lists them too."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

httpx = pytest.importorskip("httpx")
pytest.importorskip("uvicorn")
pytest.importorskip("fastapi")
pytest.importorskip("sse_starlette")

from web_helpers import MODELS, Crashy, Served, free_port, sse, start  # noqa: E402

from tao.runs.journal import Journal  # noqa: E402
from tao.web import create_app  # noqa: E402


def served(tmp_path: Path) -> Served:
    return Served(create_app(journal=tmp_path / "runs.db", models=MODELS,
                             workspace_root=tmp_path / "ws"))


def test_past_runs_are_listed_and_replayed_after_a_restart(tmp_path: Path) -> None:
    with served(tmp_path) as s, s.client() as c:
        answered = start(c)
        live = sse(c, answered)[:-1]
        written = start(c, model={"name": "writer"}, tools=["workspace"], task="写三个文件")
        sse(c, written)
        cookie = c.cookies["tao_session"]
    rows = {r["run_id"]: r for r in Journal(tmp_path / "runs.db").runs()}
    assert rows[answered]["status"] == "done" and rows[answered]["agent"] == "react"
    assert rows[answered]["model"] == "scripted-zh" and "小明" in rows[answered]["task"]
    assert cookie not in str(rows[answered]["meta"])  # the journal keeps a hash, not the cookie

    with served(tmp_path) as s, s.client(cookies={"tao_session": cookie}) as c, \
            s.client() as stranger:
        runs = c.get("/api/runs").json()["runs"]
        assert [r["run_id"] for r in runs] == [written, answered]  # newest first
        assert runs[1] == {"run_id": answered, "agent": "react", "model": "scripted-zh",
                           "task": rows[answered]["task"], "status": "done",
                           "started": rows[answered]["started"], "live": False}
        replayed = c.get(f"/api/runs/{answered}/replay").json()["events"]
        assert replayed == [m["data"] for m in live]
        again = sse(c, answered, last=3)  # a past run's events over SSE, from where asked
        assert [m["data"] for m in again[:-1]] == replayed[3:]
        assert again[-1]["data"] == {"status": "done"}
        assert c.get(f"/api/runs/{written}/files/src/b.txt").text == "second\n"
        assert stranger.get("/api/runs").json()["runs"] == []
        assert stranger.get(f"/api/runs/{answered}/replay").status_code == 404
        assert stranger.get(f"/api/runs/{written}/files/a.txt").status_code == 404


def test_finished_runs_leave_memory_but_not_the_journal(tmp_path: Path, monkeypatch) -> None:
    from tao.web import sessions

    monkeypatch.setattr(sessions, "KEEP", 2)
    app = create_app(journal=tmp_path / "runs.db", models=MODELS, workspace_root=tmp_path / "ws")
    with Served(app) as s, s.client() as c:
        runs = []
        for _ in range(4):
            runs.append(start(c))
            events = sse(c, runs[-1])
        server = app.state.tao
        kept = [r for sess in server.sessions.values() for r in sess.runs]
        assert len(kept) <= 3 and runs[0] not in kept  # the newest, and the one just started
        assert [r["run_id"] for r in c.get("/api/runs").json()["runs"]] == runs[::-1]
        first = c.get(f"/api/runs/{runs[0]}/replay").json()["events"]
        assert first[-1]["result"]["answer"] == events[-2]["data"]["result"]["answer"]


def test_a_run_cut_off_by_a_killed_server_is_listed_as_interrupted(tmp_path: Path) -> None:
    from tao.web.gate import issue, session_key
    from tao.web.sessions import hashed

    cookie = issue(session_key(tmp_path))  # the id the server gave this browser before it died
    trace = tmp_path / "web-traces" / "cut.jsonl"
    trace.parent.mkdir()
    trace.write_text('{"type": "run_started", "run_id": "cut", "seq": 1, "ts": 1.0, "task": "t", '
                     '"agent": "react", "model": "m", "tools": []}\n{"type": "turn_st', "utf-8")
    journal = Journal(tmp_path / "runs.db", meta={"web": {"session": hashed(cookie),
                                                          "trace": str(trace)}})
    journal.start("cut", "react", "m", "t")  # and then the server died: no finish, a torn line
    journal.close()
    with served(tmp_path) as s, s.client(cookies={"tao_session": cookie}) as c:
        assert [(r["run_id"], r["status"]) for r in c.get("/api/runs").json()["runs"]] == [
            ("cut", "interrupted")]
        assert [e["type"] for e in c.get("/api/runs/cut/replay").json()["events"]] == ["run_started"]
        assert sse(c, "cut")[-1]["data"] == {"status": "interrupted"}


def server_process(tmp_path: Path) -> tuple[subprocess.Popen, str]:
    """The workbench with the tests' scripted models, as its own process (it can be killed)."""
    port = free_port()
    code = ("import sys, uvicorn; sys.path.insert(0, sys.argv[1]); from web_helpers import MODELS; "
            "from tao.web import create_app; uvicorn.run(create_app(journal=sys.argv[2], "
            "models=MODELS), host='127.0.0.1', port=int(sys.argv[3]), log_level='warning')")
    proc = subprocess.Popen([sys.executable, "-c", code, str(Path(__file__).parent),
                             str(tmp_path / "runs.db"), str(port)], stderr=subprocess.PIPE, text=True)
    base = f"http://127.0.0.1:{port}"
    for _ in range(200):
        try:
            httpx.get(f"{base}/api/options", timeout=2)
            return proc, base
        except httpx.TransportError:
            time.sleep(0.05)
    proc.kill()
    raise AssertionError("the server did not start")


def test_after_kill_9_mid_run_the_run_is_listed_interrupted_with_its_events(tmp_path: Path) -> None:
    proc, base = server_process(tmp_path)
    try:
        with httpx.Client(base_url=base, timeout=30) as c:
            run_id = start(c, model={"name": "slow"})
            seen = sse(c, run_id, limit=12)
            cookie = c.cookies["tao_session"]
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
    with served(tmp_path) as s, s.client(cookies={"tao_session": cookie}) as c:
        listed = c.get("/api/runs").json()["runs"]
        assert [(r["run_id"], r["status"], r["live"]) for r in listed] == [
            (run_id, "interrupted", False)]
        kept = c.get(f"/api/runs/{run_id}/replay").json()["events"]
        assert kept[:12] == [m["data"] for m in seen]  # what was sent before the kill is kept


def test_a_server_stopped_with_sigterm_ends_open_streams_cleanly_and_cancels_runs(
        tmp_path: Path) -> None:
    import threading

    proc, base = server_process(tmp_path)
    got: list = []
    with httpx.Client(base_url=base, timeout=30) as c:
        run_id = start(c, model={"name": "echo"}, approve=["calculator"])
        reader = threading.Thread(target=lambda: got.append(sse(c, run_id)))
        reader.start()
        time.sleep(0.5)  # the stream is open, the run waits for an approval
        proc.terminate()
        proc.wait(15)
        reader.join(10)
    assert got and got[0][-1]["event"] == "approval_requested"  # no "end": the run is not over
    assert "ASGI callable returned without completing response" not in proc.stderr.read()
    assert Journal(tmp_path / "runs.db").find(run_id)["status"] == "cancelled"


def test_a_run_ended_by_a_model_crash_is_resumed_from_its_journal(tmp_path: Path) -> None:
    crashy = Crashy()
    app = create_app(journal=tmp_path / "runs.db", models={**MODELS, "crashy": crashy},
                     workspace_root=tmp_path / "ws")
    with Served(app) as s, s.client() as c, s.client() as stranger:
        run_id = start(c, model={"name": "crashy"}, task="15 加 27 等于几？")
        *_, end = sse(c, run_id)
        assert end["data"] == {"status": "error"}
        assert crashy.calls == ["ask"]
        assert Journal(tmp_path / "runs.db").find(run_id)["status"] == "error"

        stranger.get("/")
        assert stranger.post(f"/api/runs/{run_id}/resume").status_code == 404  # not theirs
        r = c.post(f"/api/runs/{run_id}/resume")
        assert r.status_code == 201 and r.json() == {"run_id": run_id}
        events = sse(c, run_id)
        assert events[-1]["data"] == {"status": "done"}
        result = events[-2]["data"]["result"]
        assert result["answer"] == "答案是 42。" and result["tool_calls"] == 1
        # the first reply and the tool's result came from the journal: asked once, answered once
        assert crashy.calls == ["ask", "answer"]
        assert [m["event"] for m in events].count("observation") == 1
        assert Journal(tmp_path / "runs.db").find(run_id)["status"] == "done"

        again = c.post(f"/api/runs/{run_id}/resume")  # done: nothing to continue
        assert again.status_code == 409 and "cannot be resumed" in again.json()["detail"], again.text
