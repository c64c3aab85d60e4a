"""Human approval: what a gated call asks, what comes back, and who answers.

An approver answers a batch (the gated calls of one turn, asked together): ``approve=callback``
gets one ``ApprovalRequest`` at a time and returns ``True``/``False`` or a ``Decision``
(``Decision.reject("why")``, ``Decision.edit({...})``); an object with ``decide(requests)`` gets
the batch. ``approve=None`` asks on the terminal when stdin is one, and otherwise rejects with a
message saying why (CI must never hang on a prompt no one sees).
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Literal

from .. import prompts
from ..safe_json import dumps


@dataclass(frozen=True, slots=True)
class ApprovalRequest:
    call_id: str
    tool: str
    arguments: dict[str, Any]
    reason: str  # why it needs approval, in the run's language
    digest: str  # SHA-256 of tool + arguments: the decision is bound to it


@dataclass(frozen=True, slots=True)
class Decision:
    """``approved``, ``rejected`` (``reason`` goes to the model) or ``edited`` (runs with
    ``arguments``; the model is told). ``digest``, when set, must be the request's."""

    verdict: Literal["approved", "rejected", "edited"]
    reason: str = ""
    arguments: dict[str, Any] | None = None
    digest: str | None = None
    by: str = "callback"

    def __post_init__(self) -> None:
        # a verdict misspelt ("deny", "yes") must not read as approval: say so, the user's bug
        if self.verdict not in ("approved", "rejected", "edited"):
            raise ValueError(f"a Decision's verdict is 'approved', 'rejected' or 'edited', not "
                             f"{self.verdict!r} (Decision.approve() / .reject(why) / .edit(args))")
        if self.verdict == "edited" and not isinstance(self.arguments, dict):
            raise TypeError(f"an edited Decision carries the new arguments as a dict, not "
                            f"{type(self.arguments).__name__}")

    @classmethod
    def approve(cls, digest: str | None = None) -> Decision:
        return cls("approved", digest=digest)

    @classmethod
    def reject(cls, reason: str = "", digest: str | None = None) -> Decision:
        return cls("rejected", reason, digest=digest)

    @classmethod
    def edit(cls, arguments: dict[str, Any], digest: str | None = None) -> Decision:
        if not isinstance(arguments, dict):
            raise TypeError(f"Decision.edit takes a dict of arguments, not {type(arguments).__name__}")
        return cls("edited", arguments=dict(arguments), digest=digest)


def _normal(value: Any, request: ApprovalRequest, by: str, lang: str) -> Decision:
    """A decision bound to ``request``: True/False/None read as approve/reject; a decision made
    for another digest is a rejection."""
    if isinstance(value, Decision):
        if value.digest is not None and value.digest != request.digest:
            return Decision("rejected", prompts.table("guard")[lang]["stale"], None, request.digest, by)
        return Decision(value.verdict, value.reason, value.arguments, request.digest,
                        value.by if value.by != "callback" else by)
    if isinstance(value, bool):
        return Decision("approved" if value else "rejected", digest=request.digest, by=by)
    raise TypeError(f"an approver returns True, False or a Decision, not {value!r}")


async def decide(approver: Any, requests: Sequence[ApprovalRequest], lang: str) -> list[Decision]:
    """Ask ``approver`` about ``requests`` (one batch); one bound decision per request. An
    approver that raises is the user's bug and ends the run."""
    if approver is None:
        approver = TerminalApprover(lang) if _interactive() else AutoReject(
            prompts.table("guard")[lang]["auto_reject"])
    by = getattr(approver, "by", "callback")
    if hasattr(approver, "decide"):
        values = approver.decide(list(requests))
        values = await values if inspect.isawaitable(values) else values
    else:
        values = []
        for r in requests:
            v = approver(r)
            values.append(await v if inspect.isawaitable(v) else v)
    if len(values) != len(requests):
        raise ValueError(f"the approver gave {len(values)} decisions for {len(requests)} requests")
    return [_normal(v, r, by, lang) for v, r in zip(values, requests)]


def _interactive() -> bool:
    try:
        return sys.stdin is not None and sys.stdin.isatty()
    except (ValueError, OSError):  # closed or detached
        return False


class AutoReject:
    """Rejects every call with ``reason`` (the non-interactive default)."""

    by = "auto"

    def __init__(self, reason: str):
        self.reason = reason

    def decide(self, requests: list[ApprovalRequest]) -> list[Decision]:
        return [Decision.reject(self.reason) for _ in requests]


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


def _read_line(prompt: str) -> str:
    """``input(prompt)``, kept out of readline's history: in ``tao chat`` a y / n / reason typed
    here must not come back as a task on the up arrow (nor be saved with the chat's lines)."""
    text = input(prompt)
    readline = sys.modules.get("readline")
    if readline is not None and text:
        n = readline.get_current_history_length()
        if n and readline.get_history_item(n) == text:
            readline.remove_history_item(n - 1)
    return text


class TerminalApprover:
    """Asks on the terminal: the batch listed together, then y / n (and a reason) / e (new JSON
    arguments) for each. Reads in a thread, so the other steps of a plan keep running."""

    by = "terminal"

    def __init__(self, lang: str = "en", read: Any = None, write: Any = None):
        self.t = prompts.table("guard")[lang if lang == "zh" else "en"]
        self.read = read or _read_line
        self.write = write or (lambda s: print(s, file=sys.stderr, flush=True))

    async def decide(self, requests: list[ApprovalRequest]) -> list[Decision]:
        import asyncio

        return await asyncio.to_thread(self._ask_all, requests)

    def _ask_all(self, requests: list[ApprovalRequest]) -> list[Decision]:
        with SCREEN.held():  # a live view drawn over the question would garble it
            return self._ask_batch(requests)

    def _ask_batch(self, requests: list[ApprovalRequest]) -> list[Decision]:
        t = self.t
        self.write(prompts.render(t["ask_header"], n=str(len(requests))))
        for i, r in enumerate(requests, 1):
            self.write(prompts.render(t["ask_one"], i=str(i), tool=r.tool,
                                      arguments=dumps(r.arguments), reason=r.reason))
        decisions = []
        for i, r in enumerate(requests, 1):
            try:
                decisions.append(self._ask(i, r))
            except EOFError:  # the terminal went away: no one can answer
                decisions.append(Decision.reject(self.t["auto_reject"]))
        return decisions

    def _ask(self, i: int, r: ApprovalRequest) -> Decision:
        from ..safe_json import loads

        while True:
            answer = self.read(prompts.render(self.t["ask"], i=str(i), tool=r.tool)).strip().lower()
            if answer in ("y", "yes", "是"):
                return Decision.approve()
            if answer in ("n", "no", "否"):
                return Decision.reject(self.read(self.t["ask_reason"]).strip())
            if answer in ("e", "edit", "改"):
                while text := self.read(self.t["ask_edit"]).strip():  # empty: back to y/n/e
                    try:
                        value = loads(text)
                        if not isinstance(value, dict):
                            raise ValueError("not an object")
                        return Decision.edit(value)
                    except ValueError as e:
                        self.write(prompts.render(self.t["bad_edit"], error=str(e)))
