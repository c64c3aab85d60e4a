"""Helpers for scripting a CodeAct model in tests: read what the sandbox printed, the way a
model reads its observation."""

from __future__ import annotations

from tao import Message, prompts


def last_observation(messages: list[Message]) -> str:
    """The output of the last execution, as the model read it (without the reminder to call
    final_answer that follows a block which ran cleanly, or the note on a solution given too
    early). After a failed block the model is shown the error beside the last message whose
    code worked, without the failed code (``codeact._without_failed``): read from there."""
    for m in reversed(messages):
        content = m.content if m.role == "user" else ""
        for lang in ("en", "zh"):
            before, _, after = prompts.table("codeact")[lang]["failed"].partition("{observation}")
            if before in content and content.endswith(after):
                content = content.split(before, 1)[1].removesuffix(after)
        if content.startswith(("Observation:\n", "执行结果：\n")):
            text = content.split("\n", 1)[1]
            for lang in ("en", "zh"):
                for note in ("unanswered", "early_solution"):
                    text = text.removesuffix(prompts.table("codeact")[lang][note])
            return text
    raise AssertionError("no observation sent to the model yet")
