"""The journal's group commit (``tao.runs.writer``): a tool with side effects never runs before its
start is committed (and fsynced, with ``fsync=True``); model replies, results, notes and the
starts of tools without side effects are written behind, yet every read, ``finish``, ``close``
and the interpreter's exit sees them committed; what a crash leaves is always every record up to
some point (issue 25, point 5)."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tao import ReActAgent, ScriptedModel, tool, tool_call
from tao.runs import Journal, writer
from tao.runs.journal import _start, tool_key
from tao.safe_json import dumps


def committed(path):
    """What another connection sees: (seq, kind, tool) of the committed records."""
    with sqlite3.connect(path) as db:
        rows = db.execute("SELECT seq, kind, data FROM records ORDER BY seq").fetchall()
    return [(seq, kind, '"tool": "' in data and data.split('"tool": "')[1].split('"')[0])
            for seq, kind, data in rows]


@pytest.fixture
def slow_writer(monkeypatch):
    """The writer thread waits long: only what someone waits for is committed meanwhile."""
    monkeypatch.setattr(writer, "LINGER_S", 30.0)


def test_a_side_effecting_tools_start_is_committed_before_its_body_runs(tmp_path, slow_writer):
    path = tmp_path / "runs.db"
    seen = {}

    @tool
    def send(to: str) -> str:
        """Send a message."""
        seen["send"] = committed(path)
        return "sent"

    @tool(side_effects=False)
    def look(name: str) -> str:
        """Look something up."""
        seen["look"] = committed(path)
        return name.upper()

    agent = ReActAgent(ScriptedModel([tool_call("look", name="ann"), tool_call("send", to="ann"),
                                      "done"]), [look, send], journal=str(path))
    result = agent.run("tell ann")
    assert result.answer == "done"
    # look has no side effects: its start is written behind, not yet in the file as it runs
    assert seen["look"] == []
    # send's start is, with everything before it, in order
    assert seen["send"] == [(1, "model", False), (2, "tool.start", "look"),
                            (3, "tool.result", False), (4, "model", False),
                            (5, "tool.start", "send")]
    # and after the run, everything: finish waited for all of it
    assert [k for _, k, _ in committed(path)] == ["model", "tool.start", "tool.result", "model",
                                                  "tool.start", "tool.result", "model"]
    (run,) = Journal(path).runs()
    assert run["status"] == "done"


def test_an_idempotent_tools_start_is_committed_before_it_runs_too(tmp_path, slow_writer):
    """Its idempotency key (run_id:seq) is only worth something if the start that holds it is."""
    path = tmp_path / "runs.db"
    seen = []

    @tool(idempotent=True)
    def pay(amount: int) -> str:
        """Pay."""
        seen.append(committed(path))
        return "paid"

    ReActAgent(ScriptedModel([tool_call("pay", amount=5), "ok"]), [pay],
               journal=str(path)).run("pay")
    assert seen == [[(1, "model", False), (2, "tool.start", "pay")]]


def test_a_written_behind_record_is_seen_by_every_read(tmp_path, slow_writer):
    journal = Journal(tmp_path / "runs.db", fsync=False)
    run = journal.start("r1", "react", "scripted", "count")
    run.note("step", {"n": 1})
    data = {"n": 2}
    run.note("step", data)
    data["n"] = 99  # serialized when noted: a later change is not in the record
    assert committed(tmp_path / "runs.db") == []  # queued, not committed yet
    assert [r["data"] for r in journal.records("r1")] == [{"n": 1}, {"n": 2}]
    assert journal.runs()[0]["run_id"] == "r1"
    assert len(committed(tmp_path / "runs.db")) == 2
    journal.close()


def test_a_run_cut_off_by_an_exception_is_read_whole_through_another_journal(tmp_path,
                                                                           slow_writer):
    """Its records are still queued in the journal it ran with; a ``Journal`` of the same file
    in this process (what ``resume`` makes) reads them all - else the resumed run would
    number its records over theirs."""
    path = tmp_path / "runs.db"

    @tool(side_effects=False)
    def look(name: str) -> str:
        """Look something up."""
        return name.upper()

    def ctrl_c(messages):
        raise KeyboardInterrupt

    agent = ReActAgent(ScriptedModel([tool_call("look", name="a"), ctrl_c]), [look],
                       journal=str(path))
    with pytest.raises(KeyboardInterrupt):
        agent.run("look")
    assert committed(path) == []  # all written behind, none waited for
    other = Journal(tmp_path / "." / "runs.db")
    (run,) = other.runs()
    assert [r["kind"] for r in other.records(run["run_id"])] == ["model", "tool.start",
                                                                 "tool.result"]


def test_the_writer_thread_commits_what_nobody_waits_for(tmp_path, monkeypatch):
    monkeypatch.setattr(writer, "LINGER_S", 0.01)
    path = tmp_path / "runs.db"
    journal = Journal(path, fsync=False)
    run = journal.start("r1", "react", "scripted", "count")
    for i in range(5):
        run.note("step", {"n": i})
    deadline = time.monotonic() + 10
    while len(committed(path)) < 5 and time.monotonic() < deadline:
        time.sleep(0.005)
    assert [seq for seq, _, _ in committed(path)] == [1, 2, 3, 4, 5]
    journal.close()


def test_fsync_true_syncs_the_commit_that_holds_a_start_and_only_that(tmp_path, slow_writer):
    journal = Journal(tmp_path / "runs.db", fsync=True).check()
    trace: list[str] = []
    journal._conn().set_trace_callback(trace.append)
    run = journal.start("r1", "react", "scripted", "x")
    trace.clear()  # its reads
    run.record_model("k", {"message": {}})
    run.started("look", {"q": 1}, wait=False)  # no side effects: behind, no fsync of its own
    assert trace == []
    run.started("send", {"to": "ann"})  # side effects: one fsynced commit, all four in it
    # the three records are one INSERT of three rows (tao.runs.writer._joined)
    statements = [t.split(" (")[0].split(" VALUES")[0] + "".join(
        f" #{n}" for n in range(2, t.count(",('r1',") + 2)) for t in trace]
    assert statements == ["PRAGMA synchronous=FULL", "BEGIN", "INSERT INTO runs",
                          "INSERT INTO records #2 #3", "COMMIT", "PRAGMA synchronous=NORMAL"]
    assert [seq for seq, _, _ in committed(tmp_path / "runs.db")] == [1, 2, 3]
    trace.clear()
    run.note("x", {})
    journal.flush()  # a flush with nothing that must be synced: no FULL
    assert [t.split(" (")[0].split(" VALUES")[0] for t in trace] == ["INSERT INTO records"]
    journal.close()


def test_a_long_queue_is_committed_whole_in_order_across_joined_inserts(tmp_path, slow_writer):
    """More records than one joined INSERT takes (``JOIN_ROWS``), between two other kinds of
    statement: every row lands once, in order, with its own data."""
    journal = Journal(tmp_path / "runs.db", fsync=False)
    run = journal.start("r1", "react", "scripted", "x")
    trace: list[str] = []
    journal._conn().set_trace_callback(trace.append)
    n = 2 * writer.JOIN_ROWS + 3
    for i in range(n):
        run.note("n", {"i": i})
    run.finish("done")  # an UPDATE after them, in the same transaction
    rows = [t.count("('r1',") for t in trace if t.startswith("INSERT INTO records")]
    assert rows == [writer.JOIN_ROWS, writer.JOIN_ROWS, 3]  # no statement failed and was redone
    assert trace[0] == "BEGIN" and trace[-1] == "COMMIT" and trace[-2].startswith("UPDATE runs")
    assert [r["data"]["i"] for r in journal.records("r1")] == list(range(n))
    assert [seq for seq, _, _ in committed(tmp_path / "runs.db")] == list(range(1, n + 1))
    assert journal.find("r1")["status"] == "done"
    journal.close()


def test_a_failed_write_behind_is_raised_by_the_next_call_and_the_rest_still_lands(tmp_path,
                                                                                    slow_writer):
    journal = Journal(tmp_path / "runs.db", fsync=False)
    first = journal.start("r1", "react", "scripted", "x")
    first.note("a", {})
    journal.flush()
    again = journal.start("r1", "react", "scripted", "x")  # a second writer of the same run
    twin = type(first)(journal, "r1", [])  # ... that believes it is new: seq 1 again
    twin.note("clash", {})
    again.note("b", {})
    with pytest.raises(sqlite3.IntegrityError):
        journal.flush()
    assert [r["kind"] for r in journal.records("r1")] == ["a", "b"]
    journal.close()


def test_what_is_queued_at_exit_is_committed(tmp_path):
    path = tmp_path / "runs.db"
    code = textwrap.dedent(f"""
        import tao.runs.writer as writer
        writer.LINGER_S = 60.0
        from tao.runs import Journal
        run = Journal({str(path)!r}, fsync=False).start("r1", "react", "scripted", "x")
        for i in range(3):
            run.note("step", {{"n": i}})
    """)  # no close, no finish: the interpreter's exit commits them
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
    assert [seq for seq, _, _ in committed(path)] == [1, 2, 3]


def test_a_forked_child_does_not_commit_its_parents_queue(tmp_path, slow_writer):
    path = tmp_path / "runs.db"
    journal = Journal(path, fsync=False).check()
    run = journal.start("parent", "react", "scripted", "x")
    run.note("queued", {"n": 1})  # queued in the parent when it forks
    pid = os.fork()
    if pid == 0:
        try:
            child = journal.start("child", "react", "scripted", "x")
            child.note("mine", {})
            journal.close()
        finally:
            os._exit(0)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    assert [r["kind"] for r in journal.records("parent")] == ["queued"]  # once: no clash
    assert [r["kind"] for r in journal.records("child")] == ["mine"]
    journal.close()


KILLED = """
import os, signal, sys
import tao.runs.writer as writer
writer.LINGER_S = 60.0  # nothing is committed unless someone waits for it
from tao import ReActAgent, ScriptedModel, tool, tool_call

@tool(side_effects=False)
def look(name: str) -> str:
    '''Look something up.'''
    return name.upper()

@tool
def launch(target: str) -> str:
    '''The side effect; the process dies while it runs (a crash, an OOM kill).'''
    os.kill(os.getpid(), signal.SIGKILL)

model = ScriptedModel([tool_call("look", name="a"), tool_call("look", name="b"),
                       tool_call("launch", target="moon"), "never"])
ReActAgent(model, [look, launch], journal=sys.argv[1], journal_fsync=False).run("go")
"""


def test_a_process_killed_inside_a_side_effect_leaves_every_record_up_to_its_start(tmp_path):
    """SIGKILL mid-tool, write-behind records never committed by the thread: what the file holds
    is exactly the records up to the start of the call that was running - so a resume asks
    about ``launch`` (it may have gone off) and repeats nothing."""
    path = tmp_path / "runs.db"
    proc = subprocess.run([sys.executable, "-c", KILLED, str(path)], timeout=60, check=False)
    assert proc.returncode == -signal.SIGKILL
    assert committed(path) == [(1, "model", False), (2, "tool.start", "look"),
                               (3, "tool.result", False), (4, "model", False),
                               (5, "tool.start", "look"), (6, "tool.result", False),
                               (7, "model", False), (8, "tool.start", "launch")]


def nested(depth: int) -> dict:
    value: dict = {"leaf": 1}
    for _ in range(depth - 1):
        value = {"k": value}
    return value


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False)
    | st.text(st.characters(min_codepoint=0, max_codepoint=0xFFFF)),  # lone surrogates too
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner,
                                                                max_size=3), max_leaves=10)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.text(max_size=4), json_values, max_size=4)
       | st.sampled_from([nested(98), nested(99), nested(100), {"n": 10 ** 5000}]))
def test_a_start_serializes_its_arguments_once_and_keys_them_as_journals_always_did(arguments):
    """``tool_key`` is byte for byte the hash of ``dumps([name, arguments], sort_keys=True)`` (a
    journal written before still resumes), and the start record reads back as what was called,
    though both come from one serialization of the arguments."""
    body = dumps(["add", arguments], sort_keys=True)
    key, text = _start("add", arguments)
    assert key == tool_key("add", arguments) == hashlib.sha256(
        body.encode("utf-8", "surrogatepass")).hexdigest()[:32]
    assert json.loads(text) == json.loads(dumps({"tool": "add", "arguments": arguments}))
