"""``WrappedModel``: a model around a model - what the run's middlewares at the model door are
(budget meter, journal, tracing, memory, history, the workbench's key mask). It does the two
things every such wrapper needs once: what it does not define is the inner model's (``stats()``,
``llm``, ``n_ctx``, ``limits()``...), and the inner stream is closed when the wrapper's is, also
when the loop stops reading early."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

from ..messages import Message
from .base import Chunk, Model


class WrappedModel(Model):
    """Subclasses override ``stream`` and read the inner model's chunks through
    ``self.chunks(messages, **kwargs)``; ``base`` is the model at the bottom of the stack."""

    def __init__(self, inner: Model):
        self.inner = inner
        self.name, self.supports_grammar = inner.name, inner.supports_grammar

    def __getattr__(self, name: str) -> Any:
        if name == "inner":  # not set yet (a copy, a pickle): no recursion
            raise AttributeError(name)
        return getattr(self.inner, name)

    @property
    def base(self) -> Model:
        """The model at the bottom of the stack (any wrapper that keeps it as ``inner``)."""
        model: Model = self.inner
        while isinstance(inner := getattr(model, "__dict__", {}).get("inner"), Model):
            model = inner
        return model

    @asynccontextmanager
    async def chunks(self, messages: Sequence[Message], **kwargs: Any) -> AsyncIterator[Any]:
        """The inner model's stream, closed on the way out."""
        stream = self.inner.stream(messages, **kwargs).__aiter__()
        try:
            yield stream
        finally:
            aclose = getattr(stream, "aclose", None)
            if aclose is not None:
                await aclose()

    async def stream(self, messages: Sequence[Message], **kwargs: Any) -> AsyncIterator[Chunk]:
        async with self.chunks(messages, **kwargs) as chunks:
            async for chunk in chunks:
                yield chunk
