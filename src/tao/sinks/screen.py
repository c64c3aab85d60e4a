"""The terminal's live displays, which a question typed at the terminal must hold still. Here,
with the sinks that draw them (``PlanView``), so a view registers itself without importing the
approver above it; the approver (``tao.guard.terminal``) holds them through ``SCREEN.held()``."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


class Screen:
    """The live displays on the terminal (``PlanView``'s tree, redrawn in place): the terminal
    approver holds them still while it asks, or the redraw would run over the question and the
    answer being typed. A view ``add``s itself while it is live; held, it stops drawing and keeps
    what comes meanwhile for after. Held views are kept weakly: a view never closed is no leak."""

    def __init__(self) -> None:
        import threading
        import weakref

        self._views: weakref.WeakSet[Any] = weakref.WeakSet()
        self._lock = threading.Lock()

    def add(self, view: Any) -> None:
        with self._lock:
            self._views.add(view)

    def discard(self, view: Any) -> None:
        with self._lock:
            self._views.discard(view)

    @contextmanager
    def held(self) -> Iterator[None]:
        """Every view's ``pause()`` now, its ``resume()`` at the end (also on an error)."""
        with self._lock:
            views = list(self._views)
        paused = []
        try:
            for view in views:
                view.pause()
                paused.append(view)
            yield
        finally:
            for view in reversed(paused):
                view.resume()


#: the terminal's live displays (one terminal per process)
SCREEN = Screen()
