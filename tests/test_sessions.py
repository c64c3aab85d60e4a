"""Sessions (issue 28, point 4): ``agent.run(task, session=Session(id))`` remembers across runs.

The run starts from the session's conversation and appends its task and answer. SQLite by
default, PostgreSQL by URL; two processes appending to one session lose nothing.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from tao import CodeActAgent, ReActAgent, ScriptedModel, Session
from tao.memory.session import SessionError


def test_a_session_carries_the_conversation_into_the_next_run(tmp_path):
    session = Session("ann", path=tmp_path / "sessions.db")
    model = ScriptedModel(["Hi Ann", "Your name is Ann"])
    agent = ReActAgent(model)
    agent.run("My name is Ann", session=session)
    assert agent.run("What is my name?", session=session).answer == "Your name is Ann"
    sent = [(m.role, m.content) for m in model.calls[1]][1:]
    assert sent == [("user", "My name is Ann"), ("assistant", "Hi Ann"),
                    ("user", "What is my name?")]
    assert [m.content for m in session.messages()] == [
        "My name is Ann", "Hi Ann", "What is my name?", "Your name is Ann"]


def test_sessions_are_apart_and_survive_a_new_object(tmp_path):
    path = tmp_path / "s.db"
    ReActAgent(ScriptedModel(["ok"])).run("I like tea", session=Session("ann", path=path))
    assert Session("bob", path=path).messages() == []
    assert [m.content for m in Session("ann", path=path).messages()] == ["I like tea", "ok"]


def test_any_agent_takes_a_session(tmp_path):
    session = Session("c", path=tmp_path / "s.db")
    CodeActAgent(ScriptedModel(["```python\nfinal_answer(2 + 2)\n```"])).run("2+2?",
                                                                          session=session)
    assert [m.content for m in session.messages()] == ["2+2?", "4"]


def test_a_run_without_an_answer_adds_nothing(tmp_path):
    session = Session("e", path=tmp_path / "s.db")
    ReActAgent(ScriptedModel([]), max_turns=1).run("?", session=session)
    assert session.messages() == []


def test_the_history_is_fitted_to_the_models_context(tmp_path):
    session = Session("long", path=tmp_path / "s.db")
    from tao.messages import Message

    session.add([Message.user("x" * 4000), Message.assistant("y" * 4000)] * 20)
    model = ScriptedModel(["fine"])
    model.n_ctx = 4096  # tokens: 160,000 characters of history cannot all go
    ReActAgent(model).run("and now?", session=session)
    sent = sum(len(m.content) for m in model.calls[0])
    assert sent < 4096 * 4 and model.calls[0][-1].content == "and now?"


def test_a_store_that_cannot_be_opened_is_a_clear_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(SessionError, match="cannot open the session store"):
        Session("x", path=blocker / "s.db").messages()


def _appender(path: str, tag: str, n: int) -> subprocess.Popen:
    code = textwrap.dedent(f"""
        from tao import Session
        from tao.messages import Message
        s = Session("shared", path={str(path)!r})
        for i in range({n}):
            s.add([Message.user("{tag} " + str(i))])
    """)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    return subprocess.Popen([sys.executable, "-c", code], env=env)


def test_two_processes_appending_to_one_session_lose_nothing(tmp_path):
    path = tmp_path / "s.db"
    Session("shared", path=path).messages()  # the file exists before both start
    procs = [_appender(path, tag, 150) for tag in ("a", "b")]
    assert [p.wait(120) for p in procs] == [0, 0]
    texts = [m.content for m in Session("shared", path=path).messages()]
    assert len(texts) == 300
    for tag in ("a", "b"):
        assert [t for t in texts if t.startswith(tag)] == [f"{tag} {i}" for i in range(150)]


def test_a_session_in_postgresql(pg_url):
    session = Session("pg-ann", path=pg_url)
    session.clear()
    ReActAgent(ScriptedModel(["Hi"])).run("Hello", session=session)
    again = Session("pg-ann", path=pg_url)
    assert [m.content for m in again.messages()] == ["Hello", "Hi"]
    procs = [_appender(pg_url, tag, 50) for tag in ("a", "b")]
    assert [p.wait(120) for p in procs] == [0, 0]
    assert len(Session("shared", path=pg_url).messages()) == 100
