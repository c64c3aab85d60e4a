"""Answer checks: a look at the final answer before it stands (``Agent.answer_check``).

pydantic-ai has output validators and openai-agents output guardrails; here a check gets the
answer with what led to it (``Answering``) and returns a reminder for the model, or ``None``.
Each check speaks at most once a run, so a model that answers the same again is believed. The
coding agent's ``Workspace.unrun_check`` is one: code never run, a page never tried.

Tried and not kept as a default (BENCHMARKS.md, "Numbers the answer never used"): reminding a
word problem's solver of the question's numbers its work never wrote. The 1.5B answered the
reminder by writing the number into an unused variable, and GSM8K fell by one in 50.

A checklist comes before the work (``Agent.checklist``, issue 27): the model is asked, in a call
of its own before the first turn, which behaviours a user will check; the items are shown
(a ``Checklist`` event), sent after the task, and handed to the checks as ``Answering.checklist``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Answering:
    """What a check sees: the answer, the task, its language, and the model's replies so far
    (code blocks, tool calls and thoughts as the model wrote them)."""

    answer: str
    task: str
    lang: str
    replies: Sequence[str] = ()
    checklist: Sequence[str] = ()  # what the run's checklist said a user will check, if any


#: at most this many items, each at most this long: a checklist a person reads at a glance
MAX_ITEMS, MAX_ITEM_CHARS = 8, 200
#: the checklist's reply is cut here: eight items of a line each fit (the 1.5B writes 60-120)
CHECKLIST_TOKENS = 400
#: a list item's mark: "- ", "* ", "• ", "1. ", "1.Open" (not "1.5"), "1) ", "1、", "（1）", then "[ ]"
_ITEM = re.compile(r"^\s*(?:[-*•·]\s+|\d+[.．](?!\d)|\d+[)、]|[（(]\d+[)）])\s*"
                   r"(?:\[[ xX]?\]\s*)?(.+?)\s*$")
_THINK = re.compile(r"<think>.*?(?:</think>|$)", re.S)  # a reasoning model's thoughts
_BOLD = re.compile(r"\*\*(.+?)\*\*|__(.+?)__")


def checklist_items(text: str) -> list[str]:
    """The items of a checklist the model wrote: its lines that start like a list item
    (``- ``, ``* ``, ``1.``, ``1)``, ``1、``, a box ``[ ]``), their marks removed; none marked,
    every non-empty line. Capped (``MAX_ITEMS`` items of ``MAX_ITEM_CHARS``): a model that
    runs on writes no endless list."""
    lines = [line for line in _THINK.sub("", text).splitlines() if line.strip()]
    marked = [m.group(1) for line in lines if (m := _ITEM.match(line))]
    items = marked or [line.strip() for line in lines]
    out: list[str] = []
    for item in items:
        item = _BOLD.sub(lambda m: m.group(1) or m.group(2), item).strip()
        if item and item not in out:
            out.append(item if len(item) <= MAX_ITEM_CHARS else item[:MAX_ITEM_CHARS - 1] + "…")
    return out[:MAX_ITEMS]
