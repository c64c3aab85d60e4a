"""ReAct on the embedded model over the calculator task set, both protocols.

    python benchmarks/react_local.py [--tasks ../shared/data/calculator_tasks.jsonl] [--model local]

Prints one row per task and protocol (solved, turns, tool calls, tokens, seconds) and a summary.
A task is solved when the last number of the answer equals the expected one.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from tao import ReActAgent, calculate, calculator
from tao.evals import is_correct, load_tasks
from tao.models.resolve import resolve_model

DEFAULT_TASKS = Path(__file__).resolve().parents[2] / "shared" / "data" / "calculator_tasks.jsonl"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tasks", default=str(DEFAULT_TASKS))
    ap.add_argument("--model", default="local")
    ap.add_argument("--protocols", default="tools,text")
    ap.add_argument("--limit", type=int, default=0)
    args = ap.parse_args()
    tasks = load_tasks(args.tasks)[: args.limit or None]
    model = resolve_model(args.model)
    summary = {}
    print("| protocol | task | solved | turns | tool calls | tokens | seconds | answer |")
    print("|---|---|---|---|---|---|---|---|")
    for protocol in args.protocols.split(","):
        solved = turns = calls = tokens = 0
        seconds = 0.0
        for task in tasks:
            agent = ReActAgent(model, [calculate, calculator], protocol=protocol, max_turns=8)
            t = time.perf_counter()
            r = agent.run(task["question"])
            dt = time.perf_counter() - t
            ok = is_correct(r.answer, task["answer"])
            solved += ok
            turns += r.turns
            calls += r.tool_calls
            tokens += r.usage.total_tokens
            seconds += dt
            answer = (r.answer or r.status).replace("\n", " ").replace("|", "/")[:60]
            print(f"| {protocol} | {task['id']} | {'yes' if ok else 'no'} | {r.turns} | "
                  f"{r.tool_calls} | {r.usage.total_tokens} | {dt:.1f} | {answer} |", flush=True)
        summary[protocol] = (solved, turns, calls, tokens, seconds)
    print()
    print("| protocol | solved | turns | tool calls | tokens | seconds |")
    print("|---|---|---|---|---|---|")
    for protocol, (solved, turns, calls, tokens, seconds) in summary.items():
        print(f"| {protocol} | {solved}/{len(tasks)} | {turns} | {calls} | {tokens} | {seconds:.1f} |")


if __name__ == "__main__":
    main()
