"""Answer checks: a look at the final answer before it stands (``Agent.answer_check``).

pydantic-ai has output validators and openai-agents output guardrails; here a check gets the
answer with what led to it (``Answering``) and returns a reminder for the model, or ``None``.
Each check speaks at most once a run, so a model that answers the same again is believed. The
coding agent's ``Workspace.unrun_check`` is one: code never run, a page never tried.

Tried and not kept as a default (BENCHMARKS.md, "Numbers the answer never used"): reminding a
word problem's solver of the question's numbers its work never wrote. The 1.5B answered the
reminder by writing the number into an unused variable, and GSM8K fell by one in 50.
"""

from __future__ import annotations

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
