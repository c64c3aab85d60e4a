"""The Ray executor's overhead per step, against the async executor.

Workload: 50 steps of a no-op tool (``noop``: returns x at once, so the wall time is all
framework), in the shapes of ``plan_dag.py``: a chain (each step waits for the one before) and a
fan-out/fan-in (step1, 48 steps that use it, one that uses all 48). The planner is a ScriptedModel,
so planning costs ~nothing. Each cell is the median of ``--runs`` runs after three warm-up runs
(Ray starts its worker processes over the first runs: seconds each on 2 cores; with fractional
CPUs it needs more of them and the first fan-out runs take 0.5-2.3 s).

Rows: ``async`` (sync tool in the agent's thread pool), ``ray`` (each step one Ray task with Ray's
default of 1 CPU a task: on this 2-core machine 2 tasks at once) and ``ray num_cpus=0.25``
(fractional CPUs: 8 at once on 2 cores). ``overhead / step`` = (wall - async wall) / 50; for the
chain that is the latency one Ray task adds to a step, for the fan-out what it adds to throughput.

Ray is started locally (``ray.init(num_cpus=2, include_dashboard=False)``, 127.0.0.1) and stopped.

    python benchmarks/plan_ray.py [--runs 5] [--num-cpus 2]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path

import ray

from tao import ScriptedModel, tool
from tao.plan.agent import PlanExecuteAgent

sys.path.insert(0, str(Path(__file__).parent))
from plan_dag import N, chain, fan


@tool
def noop(x: int, inputs: list[float] | None = None) -> int:
    """Return x (no work at all)."""
    return x


def plan_json(deps: dict[int, list[int]]) -> str:
    steps = [{"id": f"step{n}", "description": f"noop {n}", "tool": "noop",
              "args": {"x": n, "inputs": [f"$step{d}" for d in ds]},
              "depends_on": [f"step{d}" for d in ds]} for n, ds in deps.items()]
    return json.dumps({"steps": steps, "answer": f"$step{max(deps)}"})


async def run_plan(deps, executor: str, options: dict | None) -> float:
    kwargs = {"ray_options": options} if executor == "ray" else {}
    agent = PlanExecuteAgent(ScriptedModel([plan_json(deps)]), [noop], concurrency=64,
                             executor=executor, **kwargs)
    start = time.perf_counter()
    result = await agent.arun("run the DAG")
    wall = time.perf_counter() - start
    assert result.status == "done" and result.tool_calls == N, result
    return wall


def _echo(x: int) -> int:
    return x


async def bare_ray_chain() -> float:
    """Seconds for 50 bare Ray tasks, each awaited before the next is sent: Ray's own floor."""
    echo = ray.remote(_echo)
    await echo.remote(0)
    start = time.perf_counter()
    for n in range(N):
        await asyncio.wrap_future(echo.remote(n).future())
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="runs per cell (median shown)")
    parser.add_argument("--num-cpus", type=int, default=2, help="CPUs of the local Ray instance")
    args = parser.parse_args()
    start = time.perf_counter()
    ray.init(num_cpus=args.num_cpus, include_dashboard=False, log_to_driver=False,
             _node_ip_address="127.0.0.1", object_store_memory=100 * 1024 * 1024,
             configure_logging=False)
    init_s = time.perf_counter() - start
    rows = [("async", "async", None), ("ray", "ray", None),
            ("ray num_cpus=0.25", "ray", {"num_cpus": 0.25})]
    try:
        print(f"## Ray executor overhead: 50 no-op steps, concurrency 64, median of {args.runs} "
              f"(local Ray, {args.num_cpus} CPUs; ray.init took {init_s:.1f} s)\n")
        bare = statistics.median(asyncio.run(bare_ray_chain()) for _ in range(args.runs))
        print(f"Reference: a bare Ray task, awaited, takes {bare / N * 1000:.2f} ms a round trip "
              f"(50 in a chain, no tao).\n")
        print("| shape | executor | wall s | per step ms | overhead / step vs async ms |")
        print("|---|---|---|---|---|")
        for name, make in (("chain", chain), ("fan-out/fan-in", fan)):
            deps = make()
            base = None
            for label, executor, options in rows:
                for _ in range(3):  # warm-up: Ray starts its worker processes over a few runs
                    asyncio.run(run_plan(deps, executor, options))
                wall = statistics.median(asyncio.run(run_plan(deps, executor, options))
                                         for _ in range(args.runs))
                base = wall if base is None else base
                print(f"| {name} | {label} | {wall:.3f} | {wall / N * 1000:.2f} "
                      f"| {(wall - base) / N * 1000:.2f} |")
    finally:
        ray.shutdown()


if __name__ == "__main__":
    main()
