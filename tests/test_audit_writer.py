"""The audit log off the event loop (issue 25, point 5): a line appended on an event loop is in
the file when ``append`` returns (a killed process loses none), and its fsync is left to the
file's one syncer thread, never done on the loop; the hash chain stays exact and in order with
many runs and threads writing at once; nothing is left unsynced at ``close``, at
``asyncio.run``'s end or at the interpreter's exit; a failed write or fsync is reported, not
dropped. (The chain itself and ``verify`` are tests/test_audit.py's; processes sharing a file,
tests/test_audit_processes.py's.)"""

from __future__ import annotations

import asyncio
import errno
import json
import logging
import multiprocessing
import os
import shutil
import subprocess
import sys
import threading

import pytest

import tao.guard.audit as audit
from tao import ReActAgent, ScriptedModel, calculator, tool_call
from tao.guard.audit import AuditError, AuditLog, verify


def raw_entries(path) -> list[dict]:
    """The file as it is on disk, read without the log's help."""
    return [json.loads(line) for line in path.read_bytes().splitlines()]


@pytest.fixture
def fsyncs(monkeypatch):
    """Each fsync of the audit log: the name of the thread that made it."""
    seen: list[str] = []
    real = os.fsync

    def fsync(fd):
        seen.append(threading.current_thread().name)
        return real(fd)

    monkeypatch.setattr(audit.os, "fsync", fsync)
    return seen


def test_many_runs_at_once_share_one_log_and_every_record_is_there_in_order(tmp_path, fsyncs):
    """40 ReAct runs on one event loop and 4 threads appending at the same time, all to one
    ``AuditLog``: every record is in the file once, numbered 1..n, the chain verifies, each
    run's records are in the order it made them - and the loop's thread made no fsync."""
    path = tmp_path / "audit.jsonl"
    log = AuditLog(path, fsync=True)

    def script(k: int) -> ScriptedModel:
        return ScriptedModel([tool_call("calculator", operation="add", a=k, b=i) for i in range(3)]
                             + [f"done {k}"])

    async def runs() -> list:
        return await asyncio.gather(*(ReActAgent(script(k), [calculator], audit=log).arun(
            f"task {k}") for k in range(40)))

    def appender(t: int) -> None:
        for i in range(50):
            log.append({"kind": "note", "thread": t, "n": i})

    threads = [threading.Thread(target=appender, args=(t,), name=f"appender-{t}")
               for t in range(4)]
    for t in threads:
        t.start()
    results = asyncio.run(runs())
    for t in threads:
        t.join()
    log.close()

    assert all(r.answer.startswith("done") for r in results)
    assert fsyncs and "MainThread" not in fsyncs  # the loop's lines: fsync'd by the syncer
    assert {name for name in fsyncs if name.startswith("appender")} == {
        f"appender-{t}" for t in range(4)}  # outside a loop: before append returns, as ever
    entries = raw_entries(path)
    assert len(entries) == 40 * 5 + 4 * 50
    assert [e["seq"] for e in entries] == list(range(1, len(entries) + 1))
    report = verify(path)
    assert report.ok and not report.torn_tail and report.lines == len(entries)
    by_run: dict[str, list[str]] = {}
    for e in entries:
        if "run_id" in e:
            by_run.setdefault(e["run_id"], []).append(e["kind"])
    assert len(by_run) == 40
    assert all(kinds == ["run.start", "tool.call", "tool.call", "tool.call", "run.end"]
               for kinds in by_run.values())
    for t in range(4):
        assert [e["n"] for e in entries if e.get("thread") == t] == list(range(50))


def test_a_line_appended_on_a_loop_is_in_the_file_when_append_returns(tmp_path, fsyncs):
    path = tmp_path / "audit.jsonl"
    log = AuditLog(path, fsync=True)
    seen = []

    async def main() -> list[dict]:
        written = []
        for i in range(300):
            written.append(log.append({"kind": "step", "n": i}))
            seen.append(len(path.read_bytes().splitlines()))  # a SIGKILL now would lose none
        return written

    entries = asyncio.run(main())
    assert seen == list(range(1, 301))
    assert raw_entries(path) == entries and verify(path).ok
    assert fsyncs and set(fsyncs) == {"tao-audit-sync"}


def test_asyncio_run_returns_once_its_lines_are_fsynced(tmp_path, monkeypatch):
    """The syncer is slow (50 ms an fsync); ``asyncio.run`` still does not return before every
    line its loop wrote is fsync'd."""
    import time

    real, done = os.fsync, []

    def slow(fd):
        time.sleep(0.05)
        real(fd)
        done.append(os.fstat(fd).st_size)

    monkeypatch.setattr(audit.os, "fsync", slow)
    path = tmp_path / "audit.jsonl"
    log = AuditLog(path, fsync="batch")

    async def main() -> None:
        for i in range(20):
            log.append({"kind": "a", "n": i})
            await asyncio.sleep(0.001)

    asyncio.run(main())
    assert done and done[-1] == path.stat().st_size  # the last fsync came after the last line
    log.close()


def test_close_and_aflush_wait_for_the_syncer(tmp_path, fsyncs):
    path = tmp_path / "audit.jsonl"
    log = AuditLog(path, fsync="batch")
    syncer = audit._syncer(audit.os.path.realpath(path))

    async def main() -> tuple[int, int]:
        for i in range(500):
            log.append({"kind": "a", "n": i})
        await log.aflush()
        return syncer.queued, syncer.synced

    loop = asyncio.new_event_loop()  # a loop left without asyncio.run's end: close() waits
    try:
        queued, synced = loop.run_until_complete(main())
        assert synced >= queued >= 500
        for i in range(500, 1000):
            log.append({"kind": "a", "n": i})  # outside the loop, "batch": the syncer's too
        log.close()
        assert syncer.synced == syncer.queued >= 1000
    finally:
        loop.run_until_complete(settle())  # the log's own task ends once its lines are synced
        loop.close()
    assert [e["n"] for e in raw_entries(path)] == list(range(1000)) and verify(path).ok
    assert set(fsyncs) == {"tao-audit-sync"} and len(fsyncs) < 1000  # gathered, not one a line


async def settle() -> None:
    await asyncio.gather(*(t for t in asyncio.all_tasks() if t is not asyncio.current_task()))


def test_aappend_returns_the_line_as_written_once_fsynced(tmp_path, fsyncs):
    path = tmp_path / "audit.jsonl"
    log = AuditLog(path)

    async def main() -> dict:
        return await log.aappend({"kind": "run.start", "token": "hunter2"})

    entry = asyncio.run(main())
    assert entry["seq"] == 1 and entry["token"] == "***" and raw_entries(path) == [entry]
    assert fsyncs and set(fsyncs) == {"tao-audit-sync"}  # the line, and the new file's folder


EXITS = """
import asyncio, os, sys, time
import tao.guard.audit as audit
real = os.fsync
def slow(fd):
    time.sleep(0.2)
    real(fd)
    with open(sys.argv[1] + ".synced", "w") as f:
        f.write(str(os.fstat(fd).st_size))
audit.os.fsync = slow
log = audit.AuditLog(sys.argv[1], fsync="batch")
async def main():
    for i in range(2000):
        log.append({"kind": "a", "n": i})
loop = asyncio.new_event_loop()
loop.run_until_complete(main())  # the loop is neither closed nor flushed: the exit must wait
"""


def test_nothing_is_left_unsynced_at_the_interpreters_exit(tmp_path):
    path = tmp_path / "audit.jsonl"
    subprocess.run([sys.executable, "-c", EXITS, str(path)], check=True, timeout=120)
    assert [e["n"] for e in raw_entries(path)] == list(range(2000)) and verify(path).ok
    assert int((tmp_path / "audit.jsonl.synced").read_text()) == path.stat().st_size


def test_a_failed_write_raises_where_it_was_appended(tmp_path):
    folder = tmp_path / "logs"
    folder.mkdir()
    log = AuditLog(folder / "audit.jsonl").check()
    shutil.rmtree(folder)
    folder.write_text("a file where the log's folder was")  # every write now fails

    with pytest.raises(OSError):
        log.append({"kind": "a"})

    async def main() -> None:
        log.append({"kind": "b"})

    with pytest.raises(OSError):  # on a loop too: the write is the append's own
        asyncio.run(main())
    folder.unlink()  # the folder can be made again: the log goes on
    log.append({"kind": "c"})
    assert [e["kind"] for e in raw_entries(folder / "audit.jsonl")] == ["c"]


def test_a_failed_fsync_is_reported_not_dropped(tmp_path, monkeypatch, caplog):
    def broken(fd):
        raise OSError(errno.EIO, "Input/output error")

    path = tmp_path / "audit.jsonl"
    log = AuditLog(path).check()
    monkeypatch.setattr(audit.os, "fsync", broken)

    with pytest.raises(OSError, match="Input/output"):  # outside a loop: the caller's error
        log.append({"kind": "a"})

    async def main() -> None:
        log.append({"kind": "b"})
        log.append({"kind": "c"})

    with caplog.at_level(logging.ERROR, logger="tao.audit"):
        asyncio.run(main())  # on a loop: the syncer's fsync fails; asyncio.run waited for it
    assert "could not be fsync'd" in caplog.text and "audit.jsonl" in caplog.text
    with pytest.raises(AuditError, match=r"2 audit line\(s\) of .*audit.jsonl could not be "
                                         r"fsync'd: .*Input/output error"):
        log.append({"kind": "d"})  # the next append says so, and is not written
    log.flush()  # said once

    async def again() -> None:
        log.append({"kind": "e"})

    asyncio.run(again())
    with pytest.raises(AuditError, match="1 audit line"):
        log.close()
    monkeypatch.undo()
    assert [e["kind"] for e in raw_entries(path)] == ["a", "b", "c", "e"]  # written, not synced
    assert verify(path).ok


def test_records_are_written_as_they_were_when_appended(tmp_path):
    from pathlib import Path

    path = tmp_path / "audit.jsonl"
    log = AuditLog(path)
    cyclic: dict = {"n": 1}
    cyclic["self"] = cyclic
    args = {"items": [1, 2], "api_key": "sk-" + "x" * 30}

    async def main() -> None:
        log.append({"kind": "plain", "arguments": args})
        log.append({"kind": "object", "where": Path("/tmp/x"), "arguments": args})
        log.append({"kind": "cycle", "value": cyclic})
        args["items"].append(3)  # after the appends: not in the lines

    asyncio.run(main())
    entries = raw_entries(path)
    assert [e["kind"] for e in entries] == ["plain", "object", "cycle"]
    assert entries[0]["arguments"] == entries[1]["arguments"] == {"items": [1, 2], "api_key": "***"}
    assert entries[1]["where"] == "/tmp/x" and entries[2]["value"]["n"] == 1
    assert verify(path).ok


def _child(path: str) -> None:
    log = AuditLog(path, fsync="batch")
    for i in range(100):
        log.append({"kind": "child", "n": i})
    log.close()  # its own syncer: the parent's thread was not forked with it


def test_a_forked_child_syncs_on_its_own(tmp_path):
    path = tmp_path / "audit.jsonl"
    log = AuditLog(path, fsync="batch")
    log.append({"kind": "parent", "n": -1})  # the parent's syncer exists before the fork
    child = multiprocessing.get_context("fork").Process(target=_child, args=(str(path),))
    child.start()
    for i in range(100):
        log.append({"kind": "parent", "n": i})
    child.join(60)
    assert child.exitcode == 0
    log.close()
    entries = raw_entries(path)
    assert [e["n"] for e in entries if e["kind"] == "child"] == list(range(100))
    assert [e["n"] for e in entries if e["kind"] == "parent"] == list(range(-1, 100))
    assert verify(path).ok and verify(path).lines == 201
