"""The audit log's one writer (issue 25, point 5): records appended on an event loop are queued
and written off it by one thread, in order, the hash chain exact; nothing queued is lost at
``close``, at ``asyncio.run``'s end or at the interpreter's exit; a write that fails is reported,
not dropped. (The chain itself and ``verify`` are tests/test_audit.py's; processes sharing a file,
tests/test_audit_processes.py's.)"""

from __future__ import annotations

import asyncio
import json
import logging
import multiprocessing
import shutil
import subprocess
import sys
import threading

import pytest

from tao import ReActAgent, ScriptedModel, calculator, tool_call
from tao.guard.audit import AuditError, AuditLog, verify


def raw_entries(path) -> list[dict]:
    """The file as it is on disk, read without the log's help (no waiting for its writer)."""
    return [json.loads(line) for line in path.read_bytes().splitlines()]


def test_many_runs_at_once_share_one_log_and_every_record_is_there_in_order(tmp_path):
    """40 ReAct runs on one event loop and 4 threads appending at the same time, all to one
    ``AuditLog``: after ``close`` every record is in the file once, numbered 1..n, the chain
    verifies, and each run's records are in the order it made them."""
    path = tmp_path / "audit.jsonl"
    log = AuditLog(path, fsync="batch")

    def script(k: int) -> ScriptedModel:
        return ScriptedModel([tool_call("calculator", operation="add", a=k, b=i) for i in range(3)]
                             + [f"done {k}"])

    async def runs() -> list:
        return await asyncio.gather(*(ReActAgent(script(k), [calculator], audit=log).arun(
            f"task {k}") for k in range(40)))

    def appender(t: int) -> None:
        for i in range(50):
            log.append({"kind": "note", "thread": t, "n": i})

    threads = [threading.Thread(target=appender, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    results = asyncio.run(runs())
    for t in threads:
        t.join()
    log.close()

    assert all(r.answer.startswith("done") for r in results)
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


def test_appends_on_a_loop_return_at_once_and_land_in_the_order_made(tmp_path):
    path = tmp_path / "audit.jsonl"
    log = AuditLog(path, fsync=True)

    async def main() -> list[dict]:
        return [log.append({"kind": "step", "n": i}) for i in range(300)]

    entries = asyncio.run(main())  # no flush: asyncio.run waits for the log's writer itself
    on_disk = raw_entries(path)
    assert [e["n"] for e in on_disk] == list(range(300))
    assert on_disk == entries  # each entry returned was completed with its seq, prev and hash
    assert verify(path).ok


def test_a_sync_run_has_its_records_on_disk_when_it_returns(tmp_path):
    path = tmp_path / "audit.jsonl"
    model = ScriptedModel([tool_call("calculator", operation="add", a=1, b=2), "3"])
    ReActAgent(model, [calculator], audit=path).run("1+2?")
    kinds = [e["kind"] for e in raw_entries(path)]  # read straight off the disk
    assert kinds == ["run.start", "tool.call", "run.end"]


async def settle() -> None:
    await asyncio.gather(*(t for t in asyncio.all_tasks() if t is not asyncio.current_task()))


def test_close_and_aflush_wait_for_everything_queued(tmp_path):
    path = tmp_path / "audit.jsonl"
    log = AuditLog(path, fsync=False)

    async def main() -> int:
        for i in range(500):
            log.append({"kind": "a", "n": i})
        await log.aflush()
        seen = len(raw_entries(path))
        for i in range(500, 1000):
            log.append({"kind": "a", "n": i})
        return seen

    loop = asyncio.new_event_loop()  # a loop left without asyncio.run's end: close() waits
    try:
        assert loop.run_until_complete(main()) == 500
        log.close()
        assert [e["n"] for e in raw_entries(path)] == list(range(1000))
    finally:
        loop.run_until_complete(settle())  # the log's own task ends once its records are written
        loop.close()
    assert verify(path).ok


def test_aappend_returns_the_line_as_written(tmp_path):
    path = tmp_path / "audit.jsonl"
    log = AuditLog(path)

    async def main() -> dict:
        return await log.aappend({"kind": "run.start", "token": "hunter2"})

    entry = asyncio.run(main())
    assert entry["seq"] == 1 and entry["token"] == "***" and raw_entries(path) == [entry]


EXITS = """
import asyncio, sys
from tao.guard.audit import AuditLog
log = AuditLog(sys.argv[1], fsync=False)
async def main():
    for i in range(2000):
        log.append({"kind": "a", "n": i})
loop = asyncio.new_event_loop()
loop.run_until_complete(main())  # the loop is neither closed nor flushed: the exit must wait
"""


def test_nothing_queued_is_lost_at_the_interpreters_exit(tmp_path):
    path = tmp_path / "audit.jsonl"
    subprocess.run([sys.executable, "-c", EXITS, str(path)], check=True, timeout=120)
    assert [e["n"] for e in raw_entries(path)] == list(range(2000))
    assert verify(path).ok


def test_a_failed_write_is_reported_not_dropped(tmp_path, caplog):
    folder = tmp_path / "logs"
    folder.mkdir()
    log = AuditLog(folder / "audit.jsonl").check()
    shutil.rmtree(folder)
    folder.write_text("a file where the log's folder was")  # every write now fails

    with pytest.raises(OSError):  # outside a loop: the caller waits and gets the error
        log.append({"kind": "a"})

    async def main() -> None:
        log.append({"kind": "b"})
        log.append({"kind": "c"})

    with caplog.at_level(logging.ERROR, logger="tao.audit"):
        asyncio.run(main())  # on a loop: queued; asyncio.run waits for the (failed) writes
    assert "could not be written" in caplog.text and "audit.jsonl" in caplog.text
    with pytest.raises(AuditError, match=r"2 audit record\(s\) could not be written .*audit.jsonl"):
        log.append({"kind": "d"})  # the next append says so, and is not taken
    log.flush()  # said once: nothing more is pending

    async def again() -> None:
        log.append({"kind": "e"})
        await asyncio.sleep(0)

    asyncio.run(again())
    with pytest.raises(AuditError, match="1 audit record"):
        log.close()

    folder.unlink()  # the folder can be made again: the log goes on
    log.append({"kind": "f"})
    assert [e["kind"] for e in raw_entries(folder / "audit.jsonl")] == ["f"]


def _child(path: str) -> None:
    log = AuditLog(path, fsync=False)
    for i in range(100):
        log.append({"kind": "child", "n": i})


def test_a_forked_child_writes_on_its_own(tmp_path):
    path = tmp_path / "audit.jsonl"
    log = AuditLog(path, fsync=False)
    log.append({"kind": "parent", "n": -1})  # the parent's writer exists before the fork
    child = multiprocessing.get_context("fork").Process(target=_child, args=(str(path),))
    child.start()
    for i in range(100):
        log.append({"kind": "parent", "n": i})
    child.join(60)
    assert child.exitcode == 0
    entries = raw_entries(path)
    assert [e["n"] for e in entries if e["kind"] == "child"] == list(range(100))
    assert [e["n"] for e in entries if e["kind"] == "parent"] == list(range(-1, 100))
    assert verify(path).ok and verify(path).lines == 201
