"""Helpers for scripting a CodeAct model in tests: read what the sandbox printed, the way a
model reads its observation."""

from __future__ import annotations

from tao import Message, prompts


def last_observation(messages: list[Message]) -> str:
    """The output of the last execution, as the model read it (without the reminder to call
    final_answer that follows a block which ran cleanly, or the note on a solution given too
    early)."""
    for m in reversed(messages):
        if m.role == "user" and m.content.startswith(("Observation:\n", "执行结果：\n")):
            text = m.content.split("\n", 1)[1]
            for lang in ("en", "zh"):
                for note in ("unanswered", "early_solution"):
                    text = text.removesuffix(prompts.table("codeact")[lang][note])
            return text
    raise AssertionError("no observation sent to the model yet")
