"""Questions no calculator answers, asked of ``tao run``'s default agent (issue 26, point 4).

Twelve questions of general knowledge and translation, six zh and six en
(``benchmarks/data/general_knowledge.jsonl``), to the agent ``tao run`` builds: ReAct with the
built-in calculators. A good agent answers them right and calls no tool. Prints each answer,
its tool calls and seconds, then the totals.

    python benchmarks/general_knowledge.py [--model local-1.5b] [--data FILE] [--out FILE]

``--data``: another set of the same form (one ``{"q": ..., "a": [accepted substrings]}`` a line).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from tao.factory import AgentSpec, build_agent
from tao.models.resolve import resolve_model

DATA = Path(__file__).parent / "data" / "general_knowledge.jsonl"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="local-1.5b")
    ap.add_argument("--agent", default="react")
    ap.add_argument("--data", default=str(DATA))
    ap.add_argument("--out")
    args = ap.parse_args()
    model = resolve_model(args.model)
    rows = []
    print("| question | answer | right | tool calls | s |")
    print("|---|---|---|---|---|")
    for line in Path(args.data).read_text(encoding="utf-8").splitlines():
        item = json.loads(line)
        start = time.perf_counter()
        result = build_agent(AgentSpec(args.agent), model).run(item["q"])
        right = result.answer is not None and any(a in result.answer for a in item["a"])
        rows.append({"q": item["q"], "answer": result.answer, "right": right,
                     "calls": result.tool_calls, "s": time.perf_counter() - start})
        r = rows[-1]
        print(f"| {r['q']} | {(r['answer'] or '-')[:40]} | {'yes' if right else 'no'} | "
              f"{r['calls']} | {r['s']:.1f} |", flush=True)
    print(f"\n{model.name}, {args.agent}: {sum(r['right'] for r in rows)}/{len(rows)} right, "
          f"{sum(r['calls'] == 0 for r in rows)}/{len(rows)} without a tool call, "
          f"{sum(r['calls'] for r in rows)} tool calls")
    if args.out:
        Path(args.out).write_text(json.dumps(rows, ensure_ascii=False, indent=1), "utf-8")


if __name__ == "__main__":
    main()
