"""Sandbox latency per backend: cold start (the first ``execute`` of a fresh sandbox, worker start
included) and warm execution (median of many ``x = 1`` in the same worker), plus a tool-bridge
round trip. Targets (issue 3): warm <= 5 ms, cold <= 30 ms with bubblewrap.

For reference it also times a *bare* start - the backend's own wrapper running
``python -I -S -c pass`` with the same namespaces and mounts but no worker - so the sandbox's own
cost over process start can be read off whatever the machine's speed is (it varies a lot on a
loaded 2-core VM: compare rows measured together, not numbers across runs).

    python benchmarks/sandbox_latency.py [--cold 20] [--warm 300] [--kinds bwrap,subprocess]

On a machine busy with other jobs, start times mostly measure the scheduler (a bare bwrap start
went from 21 to 65 ms here under a load of 6); ``chrt -f 50 python benchmarks/sandbox_latency.py``
(root) runs the benchmark and its children ahead of them.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time

from tao.sandbox import KINDS, backend_problem, get_sandbox


def bare_argv(kind: str, ws: str) -> list[str] | None:
    """The wrapper + interpreter start alone: no worker, no protocol, no uid drop."""
    if kind == "bwrap":
        from tao.sandbox.bwrap import filesystem_args, namespace_args

        return ["bwrap", *namespace_args(os.geteuid() == 0), *filesystem_args(ws, 1 << 20),
                "--", sys.executable, "-I", "-S", "-c", "pass"]
    if kind == "subprocess":
        return [sys.executable, "-I", "-S", "-c", "pass"]
    return None


def _time_run(argv: list[str]) -> float:
    t = time.perf_counter()
    subprocess.run(argv, check=True, env={"PATH": "/usr/bin:/bin"})
    return time.perf_counter() - t


async def cold_starts(kind: str, runs: int) -> tuple[list[float], list[float]]:
    """Bare starts and sandbox cold starts, interleaved so both see the same machine load."""
    bare, cold = [], []
    with tempfile.TemporaryDirectory() as ws:
        argv = bare_argv(kind, ws)
        for _ in range(runs):
            if argv:
                bare.append(_time_run(argv))
            box = get_sandbox(kind)
            t = time.perf_counter()
            r = await box.execute("x = 1")
            cold.append(time.perf_counter() - t)
            assert r.ok, r
            await box.close()
    return bare, cold


async def warm(kind: str, runs: int) -> tuple[list[float], list[float]]:
    async with get_sandbox(kind, tools={"add": lambda a, b: a + b}) as box:
        await box.execute("x = 1")
        for _ in range(20):  # settle: first-use imports inside the worker
            await box.execute("x = add(1, 2)")
        plain, bridged = [], []
        for _ in range(runs):
            t = time.perf_counter()
            await box.execute("x = 1")
            plain.append(time.perf_counter() - t)
        for _ in range(runs):
            t = time.perf_counter()
            await box.execute("x = add(1, 2)")
            bridged.append(time.perf_counter() - t)
    return plain, bridged


def ms(values: list[float], q: float = 0.5) -> str:
    if not values:
        return "-"
    values = sorted(values)
    return f"{values[min(len(values) - 1, int(q * len(values)))] * 1000:.2f}"


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cold", type=int, default=20)
    ap.add_argument("--warm", type=int, default=300)
    ap.add_argument("--kinds", default=",".join(KINDS))
    args = ap.parse_args()
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, uid {os.geteuid()}, "
          f"load {os.getloadavg()[0]:.2f}")
    header = ("| backend | bare start ms (median / min) | cold ms (median / min) | warm `x = 1` ms "
              "(median / p95) | warm tool call ms (median) |")
    print(header)
    print("|---|---|---|---|---|")
    for kind in args.kinds.split(","):
        problem = backend_problem(kind)
        if problem:
            print(f"| {kind} | unavailable: {problem} | | | |")
            continue
        bare, cold = await cold_starts(kind, args.cold)
        plain, bridged = await warm(kind, args.warm)
        print(f"| {kind} | {ms(bare)} / {ms(bare, 0)} | {ms(cold)} / {ms(cold, 0)} | "
              f"{ms(plain)} / {ms(plain, 0.95)} | {ms(bridged)} |")
    print(f"(cold n={args.cold}, warm n={args.warm}; load at the end "
          f"{os.getloadavg()[0]:.2f}: compare the cold column with the bare one measured "
          "alongside it)")


if __name__ == "__main__":
    asyncio.run(main())
