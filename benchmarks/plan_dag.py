"""Plan-and-Execute on 50-step DAGs of 100 ms tools, against its bound and against ReAct.

Workload: three DAG shapes of 50 steps, every step one call of ``work`` (an async tool that
sleeps 100 ms; ``--sync`` uses a blocking ``time.sleep`` tool instead, run in threads):

- chain: step N uses step N-1 (critical path 50 steps);
- fan-out/fan-in: step1, then 48 independent steps that use it, then one that uses all 48 (3);
- random layered: 50 steps in random layers, each using 1-3 steps of earlier layers (seed 0).

The planner is a ScriptedModel replying with the plan (optionally after ``--latency`` seconds,
to stand for a real LLM call); the answer is the plan's answer template, so one LLM call in all.

Table 1: wall time of the run against the bound ``planner time + critical path`` (planner time
is measured: the moment ``PlanCreated`` is emitted), at ``concurrency=64`` (more than any
shape's width) and at the default 8, where the bound is the makespan of an ideal 8-slot greedy
schedule instead of the critical path. Target: wall / bound <= 1.05.

Table 3 (``--tokens-per-s``): the planner streams the plan at a token rate; with
``stream_plan=True`` each step starts as soon as its JSON object has arrived. Columns: when the
plan finished streaming, when the first tool started, when the run ended.

Table 2: the same 50 tool calls run one per turn by ``ReActAgent`` (51 scripted LLM calls, each
after the same ``--latency``), against the plan: speed-up and LLM calls saved.

    python benchmarks/plan_dag.py [--runs 3] [--latency 0 0.5] [--sync] [--tokens-per-s 200]
"""

from __future__ import annotations

import argparse
import asyncio
import heapq
import json
import random
import statistics
import time

from tao import ReActAgent, ScriptedModel, tool, tool_call
from tao.events import PlanCreated
from tao.models.base import Model
from tao.plan.agent import PlanExecuteAgent

STEP_S = 0.1
N = 50


@tool
async def work(x: int, inputs: list[float] | None = None) -> int:
    """Do 100 ms of work on x (and the results of the steps it uses)."""
    await asyncio.sleep(STEP_S)
    return x


@tool(name="work")
def work_sync(x: int, inputs: list[float] | None = None) -> int:
    """Do 100 ms of blocking work on x (and the results of the steps it uses)."""
    time.sleep(STEP_S)
    return x


# -- shapes: step n (1-based) -> the steps it uses ------------------------------------------------

def chain() -> dict[int, list[int]]:
    return {n: [n - 1] if n > 1 else [] for n in range(1, N + 1)}


def fan() -> dict[int, list[int]]:
    deps = {1: []}
    deps.update({n: [1] for n in range(2, N)})
    deps[N] = list(range(2, N))
    return deps


def layered(seed: int = 0) -> dict[int, list[int]]:
    rng = random.Random(seed)
    layers, n = [], 1
    while n <= N:
        width = min(rng.randint(2, 8), N - n + 1)
        layers.append(list(range(n, n + width)))
        n += width
    deps = {s: [] for s in layers[0]}
    for i, layer in enumerate(layers[1:], 1):
        earlier = [s for lay in layers[max(0, i - 3):i] for s in lay]
        for s in layer:
            deps[s] = sorted({layers[i - 1][rng.randrange(len(layers[i - 1]))]}
                             | set(rng.sample(earlier, min(len(earlier), rng.randint(0, 2)))))
    return deps


SHAPES = {"chain": chain, "fan-out/fan-in": fan, "random layered": layered}


def plan_json(deps: dict[int, list[int]]) -> str:
    steps = [{"id": f"step{n}", "description": f"work {n}", "tool": "work",
              "args": {"x": n, "inputs": [f"$step{d}" for d in ds]},
              "depends_on": [f"step{d}" for d in ds]} for n, ds in deps.items()]
    return json.dumps({"steps": steps, "answer": f"$step{max(deps)}"})


def critical_path(deps: dict[int, list[int]]) -> float:
    finish: dict[int, float] = {}
    for n in sorted(deps):  # ids are topologically ordered in every shape
        finish[n] = max((finish[d] for d in deps[n]), default=0.0) + STEP_S
    return max(finish.values())


def ideal_makespan(deps: dict[int, list[int]], slots: int) -> float:
    """Greedy event-driven schedule with ``slots`` workers and zero overhead."""
    waiting = {n: set(ds) for n, ds in deps.items()}
    ready = sorted(n for n, ds in waiting.items() if not ds)
    running: list[tuple[float, int]] = []
    now, done = 0.0, set()
    while len(done) < len(deps):
        while ready and len(running) < slots:
            heapq.heappush(running, (now + STEP_S, ready.pop(0)))
        now, n = heapq.heappop(running)
        done.add(n)
        for m, ds in waiting.items():
            if n in ds:
                ds.discard(n)
                if not ds:  # its last dependency just finished
                    ready.append(m)
        ready.sort()
    return now


class TrickleModel(Model):
    """Streams its one reply 4 characters (about a token) at a time at ``tokens_per_s``."""

    name = "scripted-stream"

    def __init__(self, reply: str, tokens_per_s: float):
        self.inner, self.pause = ScriptedModel([reply], chunk_size=4), 1 / tokens_per_s

    async def stream(self, messages, **kwargs):
        async for chunk in self.inner.stream(messages, **kwargs):
            if isinstance(chunk, str):
                await asyncio.sleep(self.pause)
            yield chunk


async def run_streamed(deps, tokens_per_s: float, stream_plan: bool, tools):
    """(seconds until the plan finished streaming, until the first tool started, until the end)."""
    agent = PlanExecuteAgent(TrickleModel(plan_json(deps), tokens_per_s), tools,
                             concurrency=64, stream_plan=stream_plan)
    start = time.perf_counter()
    last_token = first_tool = None
    async for event in agent.stream("run the DAG"):
        now = time.perf_counter() - start
        if event.kind == "token":
            last_token = now
        elif event.kind == "step_started" and first_tool is None:
            first_tool = now
        result = getattr(event, "result", None)
    assert result.status == "done" and result.tool_calls == N, result
    return last_token, first_tool, time.perf_counter() - start


class SlowModel(Model):
    """ScriptedModel whose every call takes ``latency`` seconds, like a real LLM call."""

    name = "scripted-slow"

    def __init__(self, replies, latency: float):
        self.inner, self.latency = ScriptedModel(replies), latency

    async def stream(self, messages, **kwargs):
        if self.latency:
            await asyncio.sleep(self.latency)
        async for chunk in self.inner.stream(messages, **kwargs):
            yield chunk


async def run_plan(deps, concurrency: int, latency: float, tools) -> tuple[float, float, int]:
    model = SlowModel([plan_json(deps)], latency)
    agent = PlanExecuteAgent(model, tools, concurrency=concurrency)
    start = time.perf_counter()
    planned = None
    async for event in agent.stream("run the DAG"):
        if type(event) is PlanCreated:
            planned = time.perf_counter() - start
        result = getattr(event, "result", None)
    wall = time.perf_counter() - start
    assert result.status == "done" and result.tool_calls == N, result
    return wall, planned, result.turns


async def run_react(deps, latency: float, tools) -> tuple[float, int]:
    script = [tool_call("work", x=n, inputs=[float(d) for d in deps[n]]) for n in sorted(deps)]
    model = SlowModel(script + [f"{max(deps)}"], latency)
    agent = ReActAgent(model, tools, max_turns=N + 1)
    start = time.perf_counter()
    result = await agent.arun("run the steps")
    wall = time.perf_counter() - start
    assert result.status == "done" and result.tool_calls == N, result
    return wall, result.turns


async def sleeps() -> float:
    start = time.perf_counter()
    for _ in range(N):
        await asyncio.sleep(STEP_S)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="runs per cell (median shown)")
    parser.add_argument("--latency", type=float, nargs="+", default=[0.0, 0.5],
                        help="seconds per LLM call in the ReAct comparison")
    parser.add_argument("--sync", action="store_true", help="a blocking tool run in threads")
    parser.add_argument("--tokens-per-s", type=float, default=200,
                        help="how fast the planner streams in the streamed-plan table (0: skip it)")
    args = parser.parse_args()
    tools = [work_sync if args.sync else work]
    kind = "sync tool (threads)" if args.sync else "async tool"

    asyncio.run(run_plan(fan(), 8, 0.0, tools))  # warm-up: imports, pydantic models, schemas
    bare = statistics.median(asyncio.run(sleeps()) for _ in range(args.runs))
    print(f"## 50-step DAGs of 100 ms steps ({kind}), median of {args.runs}\n")
    print(f"Reference: 50 bare sequential `asyncio.sleep(0.1)` take {bare:.3f} s "
          f"({(bare - N * STEP_S) / N * 1000:.2f} ms a step of timer slack, no framework).\n")
    print("| shape | concurrency | planner s | critical path s | bound s | wall s | wall / bound | overhead / step ms |")
    print("|---|---|---|---|---|---|---|---|")
    for name, make in SHAPES.items():
        deps = make()
        for concurrency in (64, 8):
            runs = [asyncio.run(run_plan(deps, concurrency, 0.0, tools)) for _ in range(args.runs)]
            wall = statistics.median(r[0] for r in runs)
            planner = statistics.median(r[1] for r in runs)
            path = critical_path(deps) if concurrency >= N else ideal_makespan(deps, concurrency)
            bound = planner + path
            print(f"| {name} | {concurrency} | {planner:.4f} | {path:.2f} | {bound:.3f} | {wall:.3f} "
                  f"| {wall / bound:.3f} | {(wall - bound) / N * 1000:.2f} |")

    print(f"\n## The same 50 tool calls, one per turn by ReActAgent ({kind})\n")
    print("| shape | LLM latency s | ReAct s | ReAct LLM calls | plan s | plan LLM calls | speed-up | LLM calls saved |")
    print("|---|---|---|---|---|---|---|---|")
    for latency in args.latency:
        runs = 1 if latency else args.runs
        for name, make in SHAPES.items():
            deps = make()
            react = [asyncio.run(run_react(deps, latency, tools)) for _ in range(runs)]
            plan = [asyncio.run(run_plan(deps, 8, latency, tools)) for _ in range(runs)]
            r_wall, r_calls = statistics.median(r[0] for r in react), react[0][1]
            p_wall, p_calls = statistics.median(p[0] for p in plan), plan[0][2]
            print(f"| {name} | {latency:g} | {r_wall:.2f} | {r_calls} | {p_wall:.2f} | {p_calls} "
                  f"| {r_wall / p_wall:.2f}× | {r_calls - p_calls} ({(r_calls - p_calls) / r_calls:.0%}) |")
    if args.tokens_per_s:
        streamed_table(args.tokens_per_s, tools, kind)


def streamed_table(tokens_per_s: float, tools, kind: str) -> None:
    print(f"\n## Streamed plan: the planner streams at {tokens_per_s:g} tokens/s "
          f"(4 characters a token), concurrency 64 ({kind})\n")
    print("| shape | plan chars | stream_plan | effective tokens/s | plan streamed at s | first tool at s | wall s | wall - stream s |")
    print("|---|---|---|---|---|---|---|---|")
    for name, make in SHAPES.items():
        deps = make()
        for stream_plan in (False, True):
            streamed, first, wall = asyncio.run(run_streamed(deps, tokens_per_s, stream_plan, tools))
            chars = len(plan_json(deps))
            print(f"| {name} | {chars} | {stream_plan} | {chars / 4 / streamed:.0f} | {streamed:.2f} | {first:.2f} "
                  f"| {wall:.2f} | {wall - streamed:.2f} |")


if __name__ == "__main__":
    main()
