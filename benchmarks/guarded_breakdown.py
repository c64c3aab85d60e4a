"""Where a guarded turn's time goes (issue 25, point 5): the parts of deny list + audit log +
journal (no fsync) switched off one after another, each step keeping the ones before it off, and
the main thread's CPU time (``time.thread_time``) per added turn from 50 to 200 turns, median
of the rounds, all in one process. A part is switched off by a stub that does none of its work
(the audit line's ``append``, the SQLite commits, the records' JSON and queue, the model door's
journal wrapper, the start's key); the difference between two rows is what that part costs.
The stubs break what they stub (no audit line, no journal): this is a measurement, not a mode.

    python benchmarks/guarded_breakdown.py [ROUNDS]
"""

from __future__ import annotations

import asyncio
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from overhead import add, script

from tao import ReActAgent, ScriptedModel
from tao.guard.audit import AuditLog
from tao.runs import journal as J
from tao.runs.resume import Journaled
from tao.runs.writer import Writer


def no_append(self, record, *, secret=()):
    return record


def no_commit(self, batch):
    self.committed += len(batch)
    self.writes += len(batch)


def no_record(self, kind, key, data, sync=False):
    self.seq += 1
    return self.seq


async def passthrough(self, messages, **kwargs):
    async for chunk in self.inner.stream(messages, **kwargs):
        yield chunk


def no_start_key(self, name, arguments, wait=True):
    self.seq += 1
    return J.Pending(self.seq, "k", self.run_id, False)


STUBS = [("- the audit line", AuditLog, "append", no_append),
         ("- the SQLite commits", Writer, "_commit", no_commit),
         ("- the records' JSON and queue", J.RunJournal, "_record", no_record),
         ("- the model door's key and wrapper", Journaled, "stream", passthrough),
         ("- the start's key", J.RunJournal, "started", no_start_key)]


async def cpu_per_run(turns: int, runs: int, kw: dict) -> float:
    times = []
    for _ in range(runs):
        agent = ReActAgent(ScriptedModel(script(turns)), [add], max_turns=turns, **kw)
        t = time.thread_time()
        await agent.arun("what is 41 + 1?")
        times.append(time.thread_time() - t)
    return statistics.median(times)


def main(rounds: int) -> None:
    d = tempfile.mkdtemp(dir=Path.cwd(), prefix="breakdown-")  # a disk, not tmpfs
    journal = J.Journal(Path(d) / "runs.db", fsync=False).check()
    guard = {"deny": ["run_command"], "audit": AuditLog(Path(d) / "audit.jsonl", fsync=False),
             "journal": journal}
    # (row, agent keywords, how many of STUBS are on)
    steps = [("guarded: deny + audit + journal", guard, 0)]
    steps += [(name, guard, i + 1) for i, (name, *_) in enumerate(STUBS)]
    steps += [("deny list only", {"deny": ["run_command"]}, 0), ("plain", {}, 0)]
    saved = [(cls, attr, getattr(cls, attr)) for _, cls, attr, _ in STUBS]
    results: list[list[float]] = [[] for _ in steps]
    try:
        for _ in range(rounds):
            for i, (_, kw, stubbed) in enumerate(steps):
                for _, cls, attr, stub in STUBS[:stubbed]:
                    setattr(cls, attr, stub)
                try:
                    short = asyncio.run(cpu_per_run(50, 12, kw))
                    long = asyncio.run(cpu_per_run(200, 4, kw))
                finally:
                    for cls, attr, original in saved:
                        setattr(cls, attr, original)
                results[i].append((long - short) / 150 * 1e6)
    finally:
        journal.close()
        shutil.rmtree(d)
    print("| main thread CPU per added turn 50->200 | µs | the part |")
    print("|---|---|---|")
    before = None
    for (name, _, _), r in zip(steps, results):
        us = statistics.median(r)
        print(f"| {name} | {us:.1f} | {'' if before is None else f'{before - us:.1f}'} |")
        before = us


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 5)
