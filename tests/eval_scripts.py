"""Scripted models for the ``tao eval`` tests: they read the question and answer it, so any worker
can take any task in any order and the scores still come out the same."""

from __future__ import annotations

import json

from tao import ScriptedModel
from tao.evals.suites import DATA

ANSWERS = {t["question"]: t["answer"]
           for t in map(json.loads, (DATA / "calculator.jsonl").read_text("utf-8").splitlines())}


def question(messages) -> str:
    return next(m.content for m in reversed(messages) if m.role == "user" and m.content in ANSWERS)


def right_on_even_length(messages) -> str:
    """The expected answer when the question has an even number of characters, else one more."""
    q = question(messages)
    answer = float(ANSWERS[q]) + (0 if len(q) % 2 == 0 else 1)
    return f"Final Answer: {answer:g}"


def calculator_model() -> ScriptedModel:
    """A picklable factory (workers and Ray actors build their model from it)."""
    return ScriptedModel([right_on_even_length] * 1000, name="scripted-calculator")


def expected_solved(questions) -> int:
    return sum(len(q) % 2 == 0 for q in questions)


def wrong_when_greedy(messages) -> str:
    """Right only in a sampled run (``tao.Vote``'s runs after the first): votes fix it."""
    from tao.models import sampling

    answer = float(ANSWERS[question(messages)]) + (1 if sampling.current() is None else 0)
    return f"Final Answer: {answer:g}"


def voting_model() -> ScriptedModel:
    return ScriptedModel([wrong_when_greedy] * 1000, name="scripted-voting")
