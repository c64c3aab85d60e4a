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
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from .. import prompts


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
        from .terminal import TerminalApprover

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


def __getattr__(name: str) -> Any:  # the terminal's side lives in guard.terminal
    if name in ("TerminalApprover", "SCREEN", "Screen"):
        from . import terminal

        return getattr(terminal, name)
    raise AttributeError(name)
