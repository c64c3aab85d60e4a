"""What the Plan-and-Execute tests script: the seed plan, a shop whose pencil has no price (a step
that fails, for retries, skips and re-plans), and tools that sleep (for parallelism). Shared by
test_plan, test_plan_ray and test_plan_view, which run the same plans on other executors/sinks."""

from __future__ import annotations

import asyncio
import json
import time

from tao import tool

SEED_TASK = "小明有 50 元，买了 3 本书每本 12 元，又买了 2 支笔每支 5 元，请问他还剩多少钱？"


def step(n, operation, a, b, *deps, description=""):
    return {"id": f"step{n}", "description": description or f"{operation} {a} {b}",
            "tool": "calculator", "args": {"operation": operation, "a": a, "b": b},
            "depends_on": [f"step{d}" for d in deps]}


# The seed's plan: books and pens in parallel, then their sum, then what is left.
SEED_PLAN = {"steps": [step(1, "multiply", 3, 12, description="3 本书的钱"),
                       step(2, "multiply", 2, 5, description="2 支笔的钱"),
                       step(3, "add", "$step1", "$step2", 1, 2, description="一共花的钱"),
                       step(4, "subtract", 50, "$step3", 3, description="还剩的钱")],
             "answer": "他还剩 $step4 元"}


def plan_reply(plan) -> str:
    return json.dumps(plan, ensure_ascii=False)


def of(events, kind):
    return [e for e in events if type(e) is kind]


PRICES = {"book": 12, "pen": 5}


@tool
def price(item: str) -> float:
    """The price of one item in the shop.

    Args:
        item: the item's name
    """
    return PRICES[item]


def price_plans(describe=lambda item: f"price of a {item}"):
    """A plan whose step2 fails (no pencil in the shop), and the re-plan that buys a pen instead."""
    def priced(n, item):
        return {"id": f"step{n}", "description": describe(item), "tool": "price",
                "args": {"item": item}, "depends_on": []}

    both = {"id": "step3", "description": "both", "tool": "calculator",
            "args": {"operation": "add", "a": "$step1", "b": "$step2"}, "depends_on": ["step1", "step2"]}
    first = {"steps": [priced(1, "book"), priced(2, "pencil"), both], "answer": "Together: $step3"}
    second = {"steps": [priced(4, "pen"), {
        "id": "step5", "description": "both", "tool": "calculator",
        "args": {"operation": "add", "a": "$step1", "b": "$step4"}, "depends_on": ["step4"]}],
        "answer": "Together: $step5"}
    return first, second


def sleepy_tools():
    @tool
    async def wait(label: str, seconds: float) -> str:
        """Sleep, then return the label."""
        await asyncio.sleep(seconds)
        return label

    @tool
    def block(label: str, seconds: float) -> str:
        """Block a thread, then return the label."""
        time.sleep(seconds)
        return label

    return [wait, block]


def sleep_step(n, tool_name, seconds, *deps):
    label = " ".join(["s%d" % n] + ["$step%d" % d for d in deps])
    return {"id": f"step{n}", "description": f"sleep {seconds}", "tool": tool_name,
            "args": {"label": label, "seconds": seconds}, "depends_on": [f"step{d}" for d in deps]}
