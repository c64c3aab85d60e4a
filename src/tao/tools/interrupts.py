"""A tool's ``BaseException`` is the tool failing; the user's Ctrl-C and cancellation stop the run.

A tool that raises ``SystemExit``, ``KeyboardInterrupt``, ``GeneratorExit`` or another
``BaseException`` is a tool failing: the model gets an error observation and the run goes on.
But the exception a real Ctrl-C raises in the middle of a tool is the same ``KeyboardInterrupt``,
and that one must stop the run. Python only tells a SIGINT handler which it was, so while tools
run in the main thread (the only thread signals reach) ``enter`` puts a handler in front of the
one there before that counts each SIGINT and passes it on unchanged: asyncio's (the first Ctrl-C
cancels the run, the second raises) and the default one behave exactly as without it. A
``KeyboardInterrupt`` with no SIGINT counted since the call began is the tool's own. Likewise a
``CancelledError`` stops the run only when the task is being cancelled (``Task.cancelling()``)."""

from __future__ import annotations

import threading
from typing import Any

try:  # the C layer under ``signal``: 0.2 µs a call, where ``signal``'s enum wrapping costs 3-5 µs
    import _signal as _sig
except ImportError:  # pragma: no cover - not CPython
    import signal as _sig

_SIGINT = 2  # signal.SIGINT on every platform CPython runs on


class _Watch:
    def __init__(self) -> None:
        self.count = 0  # SIGINTs seen while installed
        self.users = 0  # calls running in the main thread (an event loop runs several at once)
        self.previous: Any = None
        self._handle = self.handle  # one bound method, so that ``is`` finds it again

    def handle(self, signum: int, frame: Any) -> None:
        self.count += 1
        # ``previous`` is None only if someone put this handler back after we left: act as
        # Python's own, never swallow a Ctrl-C
        (self.previous or _sig.default_int_handler)(signum, frame)

    def enter(self) -> None:
        if self.users == 0:
            previous = _sig.getsignal(_SIGINT)
            # SIG_IGN: Ctrl-C does nothing anyway; SIG_DFL / None (set outside Python): it kills
            # the process without an exception. Only a Python handler can raise in a tool.
            if callable(previous):
                try:
                    _sig.signal(_SIGINT, self._handle)
                    self.previous = previous
                except ValueError:  # a subinterpreter: signals are not ours to watch
                    pass
        self.users += 1

    def exit(self) -> None:
        self.users -= 1
        if self.users == 0 and self.previous is not None:
            if _sig.getsignal(_SIGINT) is self._handle:  # nobody replaced us meanwhile
                _sig.signal(_SIGINT, self.previous)
            self.previous = None


_WATCH = _Watch()


def enter() -> int | None:
    """Start watching for the length of one tool call; the mark to hand to ``user_interrupted``
    and ``leave``. ``None`` off the main thread, where no signal can raise."""
    if threading.current_thread() is not threading.main_thread():
        return None
    _WATCH.enter()
    return _WATCH.count


def user_interrupted(mark: int | None) -> bool:
    """Whether a real SIGINT arrived since ``enter`` gave ``mark``."""
    return mark is not None and _WATCH.count > mark


def leave(mark: int | None) -> None:
    if mark is not None:
        _WATCH.exit()


def stops_the_run(e: BaseException, mark: int | None) -> bool:
    """Whether ``e``, raised while a tool ran, is the user stopping the run (re-raise it) rather
    than the tool failing (an error observation)."""
    if isinstance(e, KeyboardInterrupt):
        return user_interrupted(mark)
    return _is_cancellation(e)


class Contained(Exception):
    """A tool's ``BaseException`` carried as an ``Exception`` out of a coroutine: raised inside a
    task (``wait_for`` runs its coroutine in one) it would escape the event loop itself."""

    def __init__(self, error: BaseException):
        super().__init__(error)
        self.error = error


async def contained(coro: Any) -> Any:
    """Await ``coro``; a ``BaseException`` from it comes out as ``Contained`` (a cancellation of
    this task still comes out as itself)."""
    try:
        return await coro
    except Exception:
        raise
    except BaseException as e:
        if _is_cancellation(e):
            raise
        raise Contained(e) from e


def _is_cancellation(e: BaseException) -> bool:
    """A ``CancelledError`` while this task is being cancelled: the run is being stopped. One a
    tool raises on its own, with no cancel pending, is just the tool failing."""
    import asyncio  # loaded by then: a tool call is running

    if not isinstance(e, asyncio.CancelledError):
        return False
    try:
        task = asyncio.current_task()
    except RuntimeError:  # no running loop: a sync call driven by hand (plan's pool threads)
        return False
    return task is not None and task.cancelling() > 0
