"""``WithHistory(model, history, task)``: a model that also hears the conversation so far.

    history: list[Message] = []
    question = "北京今天天气怎么样？"
    answer = ReActAgent(WithHistory(model, history, question), tools).run(question).answer
    history += [Message.user(question), Message.assistant(answer)]
    question = "那上海呢？"                     # the model sees the first exchange too
    ReActAgent(WithHistory(model, history, question), tools).run(question)

Every agent sends its model the system prompt, maybe a worked example, then the task as a user
message. This wrapper puts ``history`` just before that task message in each call of the run, so
ReAct (both protocols), CodeAct and Plan-and-Execute all take part in a conversation without a
change to their loops: one hook at the model door instead of one in each loop. The system prompt
and example stay first, so the embedded model's saved prefix state still applies. A call that
does not carry the task (a plan's model-run step) goes through as it is. ``Result.messages``
stay the run's own, without the history.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any

from ..messages import Message
from .base import Chunk, Model
from .wrapped import WrappedModel


class WithHistory(WrappedModel):
    """``model`` with ``history`` (``Message``s, usually user/answer pairs; read at each call)
    put before the user message that is ``task``. Name and grammar support are the model's."""

    def __init__(self, model: Model, history: Sequence[Message], task: str):
        super().__init__(model)
        self.history = history
        self.task = task

    def with_history(self, messages: Sequence[Message]) -> list[Message]:
        messages = list(messages)
        for i, m in enumerate(messages):
            if m.role == "user" and m.content == self.task:
                return [*messages[:i], *self.history, *messages[i:]]
        return messages

    def stream(self, messages: Sequence[Message], **kwargs: Any) -> AsyncIterator[Chunk]:
        return self.inner.stream(self.with_history(messages), **kwargs)


__all__ = ["WithHistory"]
