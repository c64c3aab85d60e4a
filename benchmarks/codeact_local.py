"""CodeAct vs ReAct on the embedded model: the calculator task set, then GSM8K problems.

    flock /tmp/tao-model.lock python benchmarks/codeact_local.py [--agents codeact,react]
        [--tasks ../shared/data/calculator_tasks.jsonl] [--gsm8k 50] [--model local]

One row per task and agent (solved, turns, tool calls or executions, tokens, seconds), then a
summary table per suite. ReAct gets the tools [calculate, calculator] with the native protocol;
CodeAct gets the same tools plus the seed helpers, and its "calls" column counts executions
(code blocks run). A task is solved when the last number of the answer is the expected one
(``tao.evals.is_correct``). GSM8K's ``answer`` field is numeric.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from tao import ReActAgent, calculate, calculator
from tao.agents.codeact import CodeActAgent
from tao.evals import is_correct, load_tasks
from tao.models.resolve import resolve_model

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


def build(kind: str, model):
    if kind == "codeact":  # its own sandbox per run, started and closed inside the timed run
        return CodeActAgent(model, [calculate, calculator], max_turns=5)
    return ReActAgent(model, [calculate, calculator], protocol="tools", max_turns=8)


def suite(name: str, tasks: list[dict], kinds: list[str], model, summary: dict,
          budget_s: float = 0.0) -> None:
    for kind in kinds:
        solved = turns = calls = tokens = done = 0
        seconds = 0.0
        for task in tasks:
            if budget_s and seconds > budget_s:
                break
            done += 1
            t = time.perf_counter()
            r = build(kind, model).run(task["question"])
            dt = time.perf_counter() - t
            ok = is_correct(r.answer, task["answer"])
            solved += ok
            turns += r.turns
            calls += r.tool_calls
            tokens += r.usage.total_tokens
            seconds += dt
            answer = (r.answer or r.status).replace("\n", " ").replace("|", "/")[:50]
            print(f"| {name} | {kind} | {task['id']} | {'yes' if ok else 'no'} | {r.turns} | "
                  f"{r.tool_calls} | {r.usage.total_tokens} | {dt:.1f} | {answer} |", flush=True)
        summary[(name, kind)] = (solved, done, turns, calls, tokens, seconds)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tasks", default=str(DATA / "calculator_tasks.jsonl"))
    ap.add_argument("--gsm8k-file", default=str(DATA / "gsm8k" / "train_sample_200.jsonl"))
    ap.add_argument("--gsm8k", type=int, default=50, help="first N GSM8K problems (0: none)")
    ap.add_argument("--gsm8k-budget", type=float, default=0.0,
                    help="stop GSM8K after this many seconds (0: no limit); the table says how many ran")
    ap.add_argument("--agents", default="codeact,react")
    ap.add_argument("--limit", type=int, default=0, help="first N calculator tasks (0: all)")
    ap.add_argument("--skip-calculator", action="store_true")
    ap.add_argument("--model", default="local")
    args = ap.parse_args()
    model = resolve_model(args.model)
    kinds = args.agents.split(",")
    summary: dict = {}
    print("| suite | agent | task | solved | turns | calls/executions | tokens | seconds | answer |")
    print("|---|---|---|---|---|---|---|---|---|")
    calc = load_tasks(args.tasks)[: args.limit or None]
    if not args.skip_calculator and "codeact" in kinds:
        suite("calculator", calc, ["codeact"], model, summary)
    if args.gsm8k and "codeact" in kinds:
        suite("gsm8k", load_tasks(args.gsm8k_file)[: args.gsm8k], ["codeact"], model, summary,
              args.gsm8k_budget)
    if not args.skip_calculator and "react" in kinds:  # last: BENCHMARKS.md has older ReAct rows
        suite("calculator", calc, ["react"], model, summary)
    print()
    print("| suite | agent | solved | turns | tool calls / executions | tokens | seconds |")
    print("|---|---|---|---|---|---|---|")
    for (name, kind), (solved, n, turns, calls, tokens, seconds) in summary.items():
        print(f"| {name} | {kind} | {solved}/{n} ({100 * solved / max(n, 1):.0f} %) | {turns} | "
              f"{calls} | {tokens} | {seconds:.1f} |")


if __name__ == "__main__":
    main()
