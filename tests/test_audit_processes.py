"""The audit log shared by processes: four writers at once never interleave or misnumber lines,
and a writer killed with SIGKILL mid-append leaves every complete line verifiable."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

from tao.guard.audit import AuditLog, verify

WRITER = """
import os, sys, time
from tao.guard.audit import AuditLog
path, who, count, fsync, size = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4] == "1", int(sys.argv[5])
open(path + ".ready." + who, "w").close()
while not os.path.exists(path + ".go"):  # all writers start together, once all have imported
    time.sleep(0.001)
log = AuditLog(path, fsync=fsync)
i = 0
while count < 0 or i < count:
    log.append({"kind": "tool_call", "writer": who, "n": i, "arguments": {"text": "字" * size}})
    i += 1
"""


def writer(path, who: str, count: int, *, fsync: bool = True, size: int = 40) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", WRITER, str(path), who, str(count),
                             "1" if fsync else "0", str(size)])


def test_four_processes_appending_500_lines_each_never_interleave(tmp_path):
    path = tmp_path / "audit.jsonl"
    procs = [writer(path, f"w{k}", 500) for k in range(4)]
    deadline = time.monotonic() + 120
    while len(list(tmp_path.glob("audit.jsonl.ready.*"))) < 4 and time.monotonic() < deadline:
        time.sleep(0.01)
    (tmp_path / "audit.jsonl.go").touch()
    seen = []
    while any(p.poll() is None for p in procs):  # read while they write: never a half line
        if path.exists():
            seen.append(verify(path))
        time.sleep(0.01)
    assert [p.wait(timeout=240) for p in procs] == [0, 0, 0, 0]
    assert seen and all(r.ok and not r.torn_tail for r in seen)

    report = verify(path)
    assert report.ok and not report.torn_tail and report.lines == 2000
    entries = [json.loads(line) for line in path.read_bytes().splitlines()]
    assert [e["seq"] for e in entries] == list(range(1, 2001))
    for k in range(4):  # each writer's own lines are all there, in its own order
        assert [e["n"] for e in entries if e["writer"] == f"w{k}"] == list(range(500))
    assert len({e["writer"] for e in entries[:100]}) > 1  # they really did run at once


def kill_mid_append(tmp_path, size: int, at_least: int) -> tuple:
    path = tmp_path / "audit.jsonl"
    AuditLog(path).append({"kind": "run_start"})
    (tmp_path / "audit.jsonl.go").touch()
    proc = writer(path, "w", -1, fsync=False, size=size)
    deadline = time.monotonic() + 60
    while verify(path).lines < at_least and time.monotonic() < deadline:
        time.sleep(0.005)
    os.kill(proc.pid, signal.SIGKILL)
    assert proc.wait(timeout=10) == -signal.SIGKILL
    return path, verify(path)


def test_a_writer_killed_mid_appends_leaves_every_complete_line_verifiable(tmp_path):
    path, report = kill_mid_append(tmp_path, size=40, at_least=200)
    assert report.ok and report.lines >= 200
    complete = path.read_bytes().count(b"\n")
    assert report.lines == complete  # every complete line verified, torn tail or not
    AuditLog(path).append({"kind": "run_end"})  # and the log goes on
    after = verify(path)
    assert after.ok and not after.torn_tail and after.lines in (complete + 1, complete + 2)


def test_a_writer_killed_inside_a_large_write(tmp_path):
    """Lines of ~3 MB: a SIGKILL can land inside the one ``write`` of a line and leave part of
    it on disk. Whether it did this time or not, what came before verifies."""
    path, report = kill_mid_append(tmp_path, size=1_000_000, at_least=3)
    assert report.ok and report.lines == path.read_bytes().count(b"\n") >= 3
    if report.torn_tail:
        assert report.torn_bytes > 0
    AuditLog(path).append({"kind": "run_end"})
    assert verify(path).ok and not verify(path).torn_tail


def test_threads_and_two_logs_on_one_file_in_one_process(tmp_path):
    from concurrent.futures import ThreadPoolExecutor

    path = tmp_path / "audit.jsonl"
    logs = [AuditLog(path, fsync=False), AuditLog(path, fsync=False)]  # two open files, one lock
    with ThreadPoolExecutor(4) as pool:
        list(pool.map(lambda k: [logs[k % 2].append({"kind": "tool.call", "t": k, "n": i})
                                 for i in range(200)], range(4)))
    report = verify(path)
    assert report.ok and report.lines == 800
