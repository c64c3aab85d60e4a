"""Sampling settings for the model calls of one run, without touching the model object.

A model is shared: by the agents of an evaluation, by the runs of a voting agent, by a web
server's sessions. ``Vote`` needs some of its runs to sample (a temperature, a seed per run)
while the model stays greedy for everyone else, so the setting travels with the run's context
instead: ``LocalModel`` and ``OpenAIModel`` read ``current()`` when a call starts, and a
setting made around one step of a run also reaches the tasks that step starts (plan steps).

    with sampling(temperature=0.7, seed=3):
        ...  # every model call started here samples, seed 3

``sampled(events, Sampling(...))`` does the same for an agent's event stream, step by step,
so the caller's own code between events is never affected.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TypeVar

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Sampling:
    temperature: float
    seed: int | None = None


_CURRENT: ContextVar[Sampling | None] = ContextVar("tao_sampling", default=None)


def current() -> Sampling | None:
    """The setting of the run this call belongs to, or None (the model's own)."""
    return _CURRENT.get()


@contextmanager
def sampling(temperature: float, seed: int | None = None) -> Iterator[Sampling]:
    if temperature < 0:
        raise ValueError(f"temperature must be at least 0, not {temperature}")
    value = Sampling(float(temperature), seed)
    token = _CURRENT.set(value)
    try:
        yield value
    finally:
        _CURRENT.reset(token)


async def sampled(events: AsyncIterator[T], value: Sampling | None) -> AsyncIterator[T]:
    """``events`` with ``value`` set while each of its steps runs (None: passed through)."""
    it = events.__aiter__()
    try:
        while True:
            token = _CURRENT.set(value) if value is not None else None
            try:
                event = await it.__anext__()
            except StopAsyncIteration:
                return
            finally:
                if token is not None:
                    _CURRENT.reset(token)
            yield event
    finally:  # closed early (the consumer stopped): the run stops now, not at garbage collection
        close = getattr(it, "aclose", None)
        if close is not None:
            await close()
