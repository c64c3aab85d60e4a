"""What every agent shares: the Result, the sync/async/stream facade, sinks, language choice."""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Callable, Iterable
from typing import Any

from ..events import NEXT_RUN_ID, Event, RunFinished, stamp
from ..lang import detect_language  # noqa: F401 - re-exported for the loops
from ..result import Result, Status  # noqa: F401 - the loops and users import them from here

Sink = Callable[[Event], Any]


def make_guard(options: dict[str, Any]) -> Any:
    """The agent's ``tao.guard`` settings from its keyword arguments (``allow=``, ``deny=``,
    ``approve=``, ``audit=``, ``max_tokens=``...; see ``tao.guard.run.Guard``). Imported here, at
    construction, so that ``import tao`` stays cheap."""
    from ..guard.run import Guard

    return Guard(**options)


def make_memory(memory: Any) -> Any:
    """The agent's ``memory=`` (``tao.memory.inject.as_memory``: None fits each call to the
    model's context, a store or ``Memory`` adds recall, ``remember`` and extraction)."""
    from ..memory.inject import as_memory

    return as_memory(memory)


def _numbered(stream: Callable[..., AsyncIterator[Event]]) -> Callable[..., AsyncIterator[Event]]:
    """A subclass's ``stream`` as the one place a run gets its identity: an id (``run_id=``
    to continue one, e.g. ``resume``), offered to the run's guard state while the loop starts
    (``events.take_run_id``), and every event stamped with it, its number and the time."""
    import functools
    import time
    import uuid

    @functools.wraps(stream)
    async def numbered(self: Agent, task: str, *args: Any, run_id: str | None = None,
                       **kwargs: Any) -> AsyncIterator[Event]:
        rid = run_id or NEXT_RUN_ID.get() or uuid.uuid4().hex  # NEXT_RUN_ID: super().stream
        token = NEXT_RUN_ID.set(rid)
        events = stream(self, task, *args, **kwargs)
        seq = 0
        try:
            async for event in events:
                if token is not None:  # the run has started: its sub-agents number their own
                    NEXT_RUN_ID.reset(token)
                    token = None
                    if NEXT_RUN_ID.get() is not None:  # an id set around the call (tao resume)
                        NEXT_RUN_ID.set(None)
                seq += 1
                yield stamp(event, rid, seq, time.time())
        finally:
            if token is not None:
                try:
                    NEXT_RUN_ID.reset(token)
                except ValueError:  # closed from another context (garbage collection)
                    pass
            await events.aclose()

    numbered.__tao_numbered__ = True  # type: ignore[attr-defined]
    return numbered


class Agent:
    """Base class: subclasses implement ``stream(task)``, an async generator of events that ends
    with ``RunFinished``. ``arun``/``run`` drive it and hand every event to the sinks. Every
    event comes out stamped with the run's id, its sequence number and a timestamp."""

    name = "agent"

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        own = cls.__dict__.get("stream")
        if own is not None and not getattr(own, "__tao_numbered__", False):
            from .. import tracing  # no OpenTelemetry until a traced run starts

            cls.stream = tracing.wrap_stream(_numbered(own))  # type: ignore[method-assign]

    def stream(self, task: str) -> AsyncIterator[Event]:  # pragma: no cover - abstract
        raise NotImplementedError

    async def arun(self, task: str, sinks: Iterable[Sink] = (), *,
                   run_id: str | None = None) -> Result:
        sinks = list(sinks)
        result = None
        async for event in (self.stream(task, run_id=run_id) if run_id else self.stream(task)):
            for sink in sinks:
                sink(event)
            if type(event) is RunFinished:
                result = event.result
        if result is None:  # pragma: no cover - every agent ends with RunFinished
            raise RuntimeError(f"{type(self).__name__}.stream() ended without RunFinished")
        return result

    def run(self, task: str, sinks: Iterable[Sink] = (), *, run_id: str | None = None) -> Result:
        """Blocking facade. Works inside a running event loop too (Jupyter) by using a thread.
        ``run_id``: continue that journaled run (what ``resume`` does)."""
        import asyncio  # here, not at import: `import tao` stays cheap

        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(self.arun(task, sinks, run_id=run_id))
        box: list[Any] = []

        def target() -> None:
            try:
                box.append(asyncio.run(self.arun(task, sinks, run_id=run_id)))
            except BaseException as e:  # noqa: BLE001 - re-raised in the caller's thread below
                box.append(e)

        thread = threading.Thread(target=target)
        thread.start()
        thread.join()
        if isinstance(box[0], BaseException):
            raise box[0]
        return box[0]

    def _journaled(self, run_id: str) -> tuple[str, str]:
        from ..runs.journal import Journal

        guard = getattr(self, "guard", None)
        journal = getattr(guard, "journal", None)
        if journal is None:
            raise ValueError(f"{type(self).__name__} has no journal to resume {run_id!r} from: "
                             "make it with journal=PATH (or journal=True for the default one)")
        assert isinstance(journal, Journal)
        row = journal.find(run_id)
        return row["run_id"], row["task"]

    def resume(self, run_id: str, sinks: Iterable[Sink] = ()) -> Result:
        """Continue journaled run ``run_id`` (a unique prefix will do) after a crash: the same
        run again, its model outputs and tool results served from the journal as far as it
        got, then live (see ``tao.runs.resume``). The agent must be built as it was."""
        rid, task = self._journaled(run_id)
        return self.run(task, sinks, run_id=rid)

    async def aresume(self, run_id: str, sinks: Iterable[Sink] = ()) -> Result:
        rid, task = self._journaled(run_id)
        return await self.arun(task, sinks, run_id=rid)
