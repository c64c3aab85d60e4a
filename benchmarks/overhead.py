"""Framework overhead per run and per added turn, with an instant ScriptedModel and add(a, b).

Workload (the one the peers were measured with on this machine): a 2-turn run (one tool call,
then the answer "42") and a 10-turn run (nine calls, then the answer). Per added turn =
(median 10-turn - median 2-turn) / 8. A hand-written asyncio loop doing the same work runs in the
same process as the reference, so compare ratios, not absolute numbers, across machines.
Also measures cold ``import tao`` in fresh interpreters against a bare interpreter start.

    python benchmarks/overhead.py [--runs 2000]
    python benchmarks/overhead.py --durability [--runs 200] [--rounds 5]
    python benchmarks/overhead.py --guarded [--runs 2000] [--rounds 3]

``--durability``: the same workload with the run journal (fsync before each tool / batched) and
with OpenTelemetry tracing (the SDK, a batch processor, an in-memory exporter) against neither,
modes alternated in rounds in one process, as ratios per added turn (issue 14, point 7).

``--guarded``: plain tao against tao with a deny list, an audit log and a journal, neither
fsync'd (the same with the audit log flushed before each run counts as done; each of the
three alone; and the guarded run and the journal alone with ``add`` marked
``side_effects=False``, whose start the journal writes behind), at 2, 10, 50 and 200 turns, the modes alternated in rounds in one process: the
run's time, the time per turn and the time per added turn 2->10 and 50->200 - equal when the
cost of a turn does not grow with the run (issue 25, point 5). ``runs // turns`` runs of each
length (at least 5) per round.

``--cpu`` (with ``--guarded`` or the default workload): each run timed by the main thread's CPU
time (``time.thread_time``) instead of the wall clock - on a machine shared with other work,
the figure that other processes disturb least. It leaves out what other threads do (the
journal's writer and checkpoint threads, the audit log's syncer) and the time spent waiting.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import time

from tao import ReActAgent, ScriptedModel, tool, tool_call


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool(side_effects=False)
def pure_add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def script(turns: int, name: str = "add") -> list:
    return [tool_call(name, a=i, b=1) for i in range(turns - 1)] + ["42"]


async def bench_handwritten(turns: int, runs: int) -> list[float]:
    """The reference: the least a loop can do - call model, call tool, append, repeat."""

    async def model(i: int) -> dict:
        return {"tool": "add", "args": {"a": i, "b": 1}} if i < turns - 1 else {"answer": "42"}

    async def agent() -> str:
        history: list = []
        for i in range(turns):
            reply = await model(i)
            if "answer" in reply:
                return reply["answer"]
            history.append(reply)
            history.append(add.fn(**reply["args"]))
        return ""

    times = []
    for _ in range(runs):
        t = time.perf_counter()
        assert await agent() == "42"
        times.append(time.perf_counter() - t)
    return times


def cold_import(n: int) -> tuple[float, float]:
    def median_of(code: str) -> float:
        samples = []
        for _ in range(n):
            t = time.perf_counter()
            subprocess.run([sys.executable, "-c", code], check=True)
            samples.append(time.perf_counter() - t)
        return statistics.median(samples)

    return median_of("pass"), median_of("import tao")


#: what ``bench_with`` times a run with (``--cpu``: the main thread's CPU time)
clock = time.perf_counter


async def bench_with(turns: int, runs: int, journal=None, flush=None, tool=add,
                     **guard) -> list[float]:
    times = []
    for _ in range(runs):
        agent = ReActAgent(ScriptedModel(script(turns, tool.name)), [tool], max_turns=turns,
                           journal=journal, **guard)
        t = clock()
        result = await agent.arun("what is 41 + 1?")
        if flush is not None:
            await flush()
        times.append(clock() - t)
        assert result.answer == "42" and result.turns == turns
    return times


def guarded(runs: int, n_rounds: int) -> None:
    import tempfile
    from pathlib import Path

    import tao
    from tao.guard.audit import AuditLog, verify
    from tao.runs import Journal

    sizes = (2, 10, 50, 200)
    with tempfile.TemporaryDirectory(dir=Path.cwd(), prefix="overhead-") as d:  # a disk, not tmpfs
        log = AuditLog(Path(d) / "audit.jsonl", fsync=False)
        journal = Journal(Path(d) / "runs.db", fsync=False).check()
        guard = {"deny": ["run_command"], "audit": log, "journal": journal}
        aflush = getattr(log, "aflush", None)  # before the audit writer: append wrote at once
        modes = {  # name: (guard keywords, what the run waits for after it ends)
            "plain tao ReAct": ({}, None),
            "deny list + audit log + journal, no fsync": (guard, None),
            "the same, audit log flushed at each run's end": (guard, aflush),
            "deny list only": ({"deny": guard["deny"]}, None),
            "audit log only": ({"audit": log}, None),
            "journal only": ({"journal": journal}, None),
            # the tool says it has no side effects: its start need not be committed before it
            # runs, so nothing in the turn waits for the journal (tao.runs.writer)
            "deny + audit + journal, add marked side_effects=False": ({**guard, "tool": pure_add},
                                                                      None),
            "journal only, add marked side_effects=False": ({"journal": journal,
                                                              "tool": pure_add}, None),
        }

        async def measure(kw: dict, flush, k: int) -> list[float]:
            return [statistics.median(await bench_with(n, max(5, k // n), flush=flush, **kw))
                    * 1000 for n in sizes]

        for kw, flush in modes.values():
            asyncio.run(measure(kw, flush, 50))  # warm up
        results: dict[str, list[list[float]]] = {m: [] for m in modes}
        for _ in range(n_rounds):
            for mode, (kw, flush) in modes.items():
                results[mode].append(asyncio.run(measure(kw, flush, runs)))
        if hasattr(log, "flush"):
            log.flush()
        report = verify(log.path)
        assert report.ok, report.message()
    print(f"tao {tao.__file__}; {n_rounds} rounds; audit log verified: {report.lines} lines; "
          f"timed by {clock.__name__}")
    print("| mode | run ms: " + " / ".join(f"{n}" for n in sizes) + " turns | ms per turn at "
          + " / ".join(f"{n}" for n in sizes[1:]) + " | ms per added turn 2->10 | 50->200 |")
    print("|---|---|---|---|---|")
    for mode, rs in results.items():
        t = [statistics.median(r[i] for r in rs) for i in range(len(sizes))]
        print(f"| {mode} | " + " / ".join(f"{x:.3f}" for x in t) + " | "
              + " / ".join(f"{x / n:.4f}" for x, n in zip(t[1:], sizes[1:])) + " | "
              + f"{(t[1] - t[0]) / 8:.4f} | {(t[3] - t[2]) / 150:.4f} |")


def durability(runs: int, n_rounds: int) -> None:
    import tempfile
    from pathlib import Path

    import tao
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from tao.runs import Journal

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(exporter, max_queue_size=1 << 20))
    with tempfile.TemporaryDirectory(dir=Path.cwd(), prefix="overhead-") as d:  # a disk, not tmpfs
        modes = {  # name: (journal, tracing on)
            "off": (None, False),
            "journal, fsync before each tool (default)": (Journal(Path(d) / "a.db", fsync=True).check(), False),
            "journal, batched (journal_fsync=False)": (Journal(Path(d) / "b.db", fsync=False).check(), False),
            "tracing, SDK + batch processor": (None, True),
        }

        def measure(journal, traced: bool, k: int) -> tuple[float, float]:
            tao.instrument(provider) if traced else tao.uninstrument()
            return (statistics.median(asyncio.run(bench_with(2, k, journal))) * 1000,
                    statistics.median(asyncio.run(bench_with(10, k, journal))) * 1000)

        for journal, traced in modes.values():
            measure(journal, traced, 20)  # warm up
        results: dict[str, list[tuple[float, float]]] = {m: [] for m in modes}
        for _ in range(n_rounds):
            for mode, (journal, traced) in modes.items():
                results[mode].append(measure(journal, traced, runs))
        tao.uninstrument()
        provider.force_flush()
        assert exporter.get_finished_spans(), "the tracing rounds exported no spans"
    per = {m: (statistics.median(r[1] for r in rs) - statistics.median(r[0] for r in rs)) / 8
           for m, rs in results.items()}
    print("| mode | per added turn (ms) | x off |")
    print("|---|---|---|")
    for mode, ms in per.items():
        print(f"| {mode} | {ms:.4f} | {ms / per['off']:.2f} |")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=2000)
    ap.add_argument("--imports", type=int, default=15)
    ap.add_argument("--durability", action="store_true", help="journal and tracing against neither")
    ap.add_argument("--guarded", action="store_true",
                    help="plain against deny list + audit + journal at 2/10/50/200 turns")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--cpu", action="store_true",
                    help="time runs by the main thread's CPU time (time.thread_time), not the "
                         "wall clock: on a shared machine, what other processes disturb least")
    args = ap.parse_args()
    if args.cpu:
        global clock
        clock = time.thread_time
    if args.durability:
        durability(args.runs, args.rounds)
        return
    if args.guarded:
        guarded(args.runs, args.rounds)
        return
    rows = []
    for label, fn in (("tao ReActAgent", bench_with), ("hand-written asyncio loop", bench_handwritten)):
        asyncio.run(fn(2, 200))  # warm up: lazy schemas, imports
        t2 = statistics.median(asyncio.run(fn(2, args.runs))) * 1000
        t10 = statistics.median(asyncio.run(fn(10, args.runs))) * 1000
        rows.append((label, t2, t10, (t10 - t2) / 8))
    print(f"| loop | 2-turn run (ms) | 10-turn run (ms) | per added turn (ms) |")
    print("|---|---|---|---|")
    for label, t2, t10, per in rows:
        print(f"| {label} | {t2:.4f} | {t10:.4f} | {per:.4f} |")
    bare, tao_import = cold_import(args.imports)
    print()
    print("| cold start | median (s) |")
    print("|---|---|")
    print(f"| python -c pass | {bare:.3f} |")
    print(f"| python -c 'import tao' | {tao_import:.3f} |")
    print(f"| import tao alone (difference) | {tao_import - bare:.3f} |")


if __name__ == "__main__":
    main()
