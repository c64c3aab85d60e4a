"""The Model protocol every backend implements.

A model call is an async stream: ``str`` chunks are text deltas as they arrive, ``Retrying``
says a transient failure is being retried (drop what streamed so far this call), and exactly one
``ModelResponse`` comes last. ``complete()`` is the non-streaming convenience built on it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..messages import Message, ToolSpec, Usage  # ToolSpec: re-exported (models.base.ToolSpec)


@dataclass(slots=True)
class ModelResponse:
    message: Message
    usage: Usage = field(default_factory=Usage)
    finish_reason: str | None = None


@dataclass(frozen=True, slots=True)
class Retrying:
    attempt: int
    reason: str
    delay_s: float


Chunk = str | Retrying | ModelResponse

#: Seconds a model behind a network may stay silent (before its first token, between chunks)
#: before the attempt is given up: ample for a big model reading a long prompt, and far below the
#: minutes a dead endpoint would otherwise cost. Here, not in openai.py, so that the CLI can show
#: it without importing the SDK.
DEFAULT_TIMEOUT_S = 60.0


class Model(ABC):
    """Base class of models. Subclasses implement ``stream``.

    Keyword arguments of ``stream`` are hints a backend honours as far as it can:
    ``tools`` (native function calling), ``response_format`` (OpenAI's JSON-schema structured
    output), ``grammar`` (a GBNF grammar; backends without constrained decoding ignore it and
    rely on the agent's tolerant parser), ``stop`` sequences, ``max_tokens`` and ``tool_choice``
    (``"none"``: the tools stay in the prompt, but this reply must be text, not a call - what a
    run asks once a model keeps making a call whose result it already has).
    """

    name: str = "model"
    #: True when ``grammar=`` is enforced during decoding (the embedded model).
    supports_grammar: bool = False

    @abstractmethod
    def stream(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[ToolSpec] | None = None,
        response_format: dict[str, Any] | None = None,
        grammar: str | None = None,
        stop: Sequence[str] | None = None,
        max_tokens: int | None = None,
        tool_choice: str | None = None,
    ) -> AsyncIterator[Chunk]: ...

    async def complete(self, messages: Sequence[Message], **kwargs: Any) -> ModelResponse:
        response = None
        async for chunk in self.stream(messages, **kwargs):
            if isinstance(chunk, ModelResponse):
                response = chunk
        if response is None:  # a backend bug, not a user error
            raise RuntimeError(f"{type(self).__name__}.stream() ended without a ModelResponse")
        return response

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"
