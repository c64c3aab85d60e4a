"""What the guard layer costs per tool call: ``Toolbox.execute`` alone against the same call
with an audit append (fsync off and on, inline and through ``aappend``'s thread), and - when the
guard is in the toolbox (``Toolbox.bind(run)``) - with a deny list, then deny list + audit, as
ratios measured in one run.

The tool is ``add(a, b)``, so what is measured is the framework, not the tool. Variants run in
interleaved rounds (each round: ``--calls`` calls of every variant, in turn) and the median of
the rounds' per-call means is reported, so a background load that comes and goes hits every
variant alike. The log is written under ``--dir`` (default: a temporary folder in the working
directory, i.e. on the disk the user's data directory is on, not a tmpfs), where an fsync is a
real flush to the device. Also reports ``verify`` throughput on the log written, and appends per
second with 4 processes writing one log at once.

    python benchmarks/guard_overhead.py [--rounds 15] [--calls 200] [--dir .]
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from tao import tool
from tao.guard.audit import AuditLog, verify
from tao.messages import ToolCall
from tao.tools.base import Toolbox


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def record(call: ToolCall, result) -> dict:
    """What the toolbox writes for one call (the shape ``Toolbox.execute`` is to log)."""
    return {"kind": "tool_call", "run_id": "bench", "tool": call.name, "arguments": call.arguments,
            "is_error": result.is_error, "duration_s": round(result.duration_s, 6)}


Variant = Callable[[ToolCall], Awaitable[object]]


def variants(folder: Path) -> dict[str, Variant]:
    box = Toolbox([add])

    async def bare(call: ToolCall) -> object:
        return await box.execute(call)

    def audited(log: AuditLog, threaded: bool = False) -> Variant:
        async def run(call: ToolCall) -> object:
            result = await box.execute(call)
            if threaded:
                await log.aappend(record(call, result))
            else:
                log.append(record(call, result))
            return result
        return run

    found: dict[str, Variant] = {
        "Toolbox.execute (today)": bare,
        "+ audit, fsync off": audited(AuditLog(folder / "nofsync.jsonl", fsync=False)),
        "+ audit, fsync on": audited(AuditLog(folder / "fsync.jsonl")),
        "+ audit, fsync on, aappend (thread)": audited(AuditLog(folder / "thread.jsonl"), True),
    }
    found.update(guarded_variants(folder))
    return found


def guarded_variants(folder: Path) -> dict[str, Variant]:
    """The guard itself on the door (``tao.guard.run.Guard``, a run bound to the toolbox): a
    deny list alone, then deny list + audit; nothing when the guard has not landed here."""
    try:
        from tao.guard.run import Guard
    except ImportError:
        return {}
    if not hasattr(Toolbox, "bind"):
        return {}
    out: dict[str, Variant] = {}
    for label, audit, fsync in (("policy (deny list) only", None, False),
                                ("policy + audit, fsync off", folder / "guard-off.jsonl", False),
                                ("policy + audit, fsync on", folder / "guard-on.jsonl", True)):
        run = Guard(deny=["rm"], audit=audit, audit_fsync=fsync).start(
            "bench", "react", "scripted", "en", [add])
        box = Toolbox([add]).bind(run)

        async def go(call: ToolCall, box: Toolbox = box) -> object:
            return await box.execute(call)
        out[f"guard: {label}"] = go
    return out


async def measure(rounds: int, calls: int, folder: Path) -> dict[str, float]:
    runs = variants(folder)
    per_call: dict[str, list[float]] = {name: [] for name in runs}
    for name, run in runs.items():  # warm up: pydantic models built, files created
        for i in range(20):
            await run(ToolCall(f"w{i}", "add", {"a": i, "b": 1}))
    for r in range(rounds):
        for name, run in runs.items():
            start = time.perf_counter()
            for i in range(calls):
                await run(ToolCall(f"c{r}-{i}", "add", {"a": i, "b": 1}))
            per_call[name].append((time.perf_counter() - start) / calls)
    return {name: statistics.median(times) for name, times in per_call.items()}


def verify_speed(path: Path) -> tuple[int, float]:
    start = time.perf_counter()
    report = verify(path)
    assert report.ok, report.message()
    return report.lines, time.perf_counter() - start


WRITER = """
import sys
from tao.guard.audit import AuditLog
log = AuditLog(sys.argv[1], fsync=sys.argv[3] == "1")
for i in range(int(sys.argv[2])):
    log.append({"kind": "tool.call", "tool": "add", "arguments": {"a": i, "b": 1}, "status": "ok"})
"""


def processes(folder: Path, n: int, each: int, fsync: bool) -> float:
    """Appends per second with ``n`` processes appending ``each`` lines at once to one log
    (interpreter start included: the figure is a floor)."""
    import subprocess

    path = folder / f"procs-{fsync}.jsonl"
    start = time.perf_counter()
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(path), str(each), "1" if fsync else "0"])
             for _ in range(n)]
    assert all(p.wait() == 0 for p in procs)
    seconds = time.perf_counter() - start
    report = verify(path)
    assert report.ok and report.lines == n * each, report.message()
    return n * each / seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--calls", type=int, default=200, help="calls per variant per round")
    parser.add_argument("--dir", type=Path, default=Path.cwd(), help="where the logs are written")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="tao-guard-bench-", dir=args.dir) as tmp:
        folder = Path(tmp)
        results = asyncio.run(measure(args.rounds, args.calls, folder))
        lines, seconds = verify_speed(folder / "nofsync.jsonl")
        size = (folder / "nofsync.jsonl").stat().st_size
        shared = {fsync: processes(folder, 4, 500, fsync) for fsync in (False, True)}

    base = results["Toolbox.execute (today)"]
    print(f"guard overhead per tool call: {args.rounds} rounds x {args.calls} calls per variant, "
          f"median of round means; Python {sys.version.split()[0]}, {os.cpu_count()} cores, "
          f"logs in {args.dir.resolve()}")
    print(f"{'variant':<46} {'us/call':>10} {'ratio':>8} {'added us':>10}")
    for name, t in results.items():
        print(f"{name:<46} {t * 1e6:>10.1f} {t / base:>7.1f}x {(t - base) * 1e6:>10.1f}")
    if not any(name.startswith("guard:") for name in results):
        print("(guard: tao.guard.run.Guard / Toolbox.bind are not in this checkout yet)")
    print(f"verify: {lines} lines ({size / lines:.0f} bytes each) in {seconds * 1e3:.1f} ms "
          f"= {lines / seconds:,.0f} lines/s")
    print(f"4 processes x 500 appends to one log, verified after: {shared[False]:,.0f} appends/s "
          f"fsync off, {shared[True]:,.0f} appends/s fsync on")


if __name__ == "__main__":
    main()
