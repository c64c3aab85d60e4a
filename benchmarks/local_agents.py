"""ReAct, CodeAct and Plan-and-Execute on the embedded model: the calculator task set, then GSM8K.

    flock /tmp/tao-model.lock python benchmarks/local_agents.py [--agents codeact,react,plan]
        [--tasks ../shared/data/calculator_tasks.jsonl] [--gsm8k 50] [--model local|local-1.5b]

One row per task and agent (solved, turns = LLM calls, tool calls / executions / steps, tokens,
seconds), then a summary table per suite. The agents get the same tools, [calculate, calculator]:
``react`` with the native protocol, ``react-text`` with the text protocol, ``codeact`` plus the
seed helpers (its calls column counts code executions), ``plan`` (its calls column counts the
steps run). A task is solved when the last number of the answer is the expected one
(``tao.evals.is_correct``). GSM8K's ``answer`` field is numeric; only ``codeact`` runs GSM8K.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from tao import calculate, calculator
from tao.compare import build as build_agent
from tao.evals import is_correct, load_tasks
from tao.models.resolve import resolve_model

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
KINDS = ("codeact", "react", "react-text", "plan")
MAX_TURNS = {"codeact": 5, "react": 8, "react-text": 8, "plan": 10}  # the plan ignores it


def build(kind: str, model):
    """``tao.compare.build`` - the agent ``tao compare`` and ``tao run --agent`` make - with the
    benchmark's turn budgets (the CodeAct agent makes and closes its own sandbox per run, inside
    the timed run)."""
    return build_agent(kind, model, [calculate, calculator], max_turns=MAX_TURNS[kind])


def suite(name: str, tasks: list[dict], kind: str, model, summary: dict,
          budget_s: float = 0.0) -> None:
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
    ap.add_argument("--gsm8k", type=int, default=50, help="first N GSM8K problems for CodeAct (0: none)")
    ap.add_argument("--gsm8k-budget", type=float, default=0.0,
                    help="stop GSM8K after this many seconds (0: no limit); the table says how many ran")
    ap.add_argument("--agents", default="codeact,react,plan", help=f"some of {','.join(KINDS)}")
    ap.add_argument("--limit", type=int, default=0, help="first N calculator tasks (0: all)")
    ap.add_argument("--skip-calculator", action="store_true")
    ap.add_argument("--model", default="local")
    args = ap.parse_args()
    kinds = args.agents.split(",")
    if unknown := set(kinds) - set(KINDS):
        ap.error(f"unknown agents {sorted(unknown)}; choose from {', '.join(KINDS)}")
    model = resolve_model(args.model)
    summary: dict = {}
    print("| suite | agent | task | solved | turns | calls/executions/steps | tokens | seconds | answer |")
    print("|---|---|---|---|---|---|---|---|---|")
    calc = load_tasks(args.tasks)[: args.limit or None]
    for kind in kinds:
        if not args.skip_calculator:
            suite("calculator", calc, kind, model, summary)
        if kind == "codeact" and args.gsm8k:
            suite("gsm8k", load_tasks(args.gsm8k_file)[: args.gsm8k], kind, model, summary,
                  args.gsm8k_budget)
    print()
    print("| suite | agent | solved | turns | tool calls / executions / steps | tokens | seconds |")
    print("|---|---|---|---|---|---|---|")
    for (name, kind), (solved, n, turns, calls, tokens, seconds) in summary.items():
        print(f"| {name} | {kind} | {solved}/{n} ({100 * solved / max(n, 1):.0f} %) | {turns} | "
              f"{calls} | {tokens} | {seconds:.1f} |")


if __name__ == "__main__":
    main()
