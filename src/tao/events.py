"""The event vocabulary: the one contract between agents and whatever shows or stores a run.

Agents emit these and never print. Console, JSONL trace, web and OpenTelemetry sinks all read
the same stream. Events are small frozen dataclasses; ``to_dict``/``event_from_dict`` round-trip
them through JSON so a trace file can be replayed into any sink.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any, ClassVar

from .messages import ToolCall

if TYPE_CHECKING:
    from .agents.base import Result


@dataclass(frozen=True, slots=True)
class Event:
    kind: ClassVar[str] = "event"

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"type": self.kind}
        for f in fields(self):
            v = getattr(self, f.name)
            d[f.name] = v.to_dict() if hasattr(v, "to_dict") else v
        return d


@dataclass(frozen=True, slots=True)
class RunStarted(Event):
    kind: ClassVar[str] = "run_started"
    task: str
    agent: str
    model: str


@dataclass(frozen=True, slots=True)
class TurnStarted(Event):
    kind: ClassVar[str] = "turn_started"
    turn: int


@dataclass(frozen=True, slots=True)
class TokenDelta(Event):
    """A piece of model output as it streams."""

    kind: ClassVar[str] = "token"
    text: str
    turn: int


@dataclass(frozen=True, slots=True)
class ModelRetry(Event):
    """The model call failed transiently and is retried; text streamed so far in this turn is void."""

    kind: ClassVar[str] = "model_retry"
    turn: int
    attempt: int
    reason: str
    delay_s: float


@dataclass(frozen=True, slots=True)
class Thought(Event):
    kind: ClassVar[str] = "thought"
    text: str
    turn: int


@dataclass(frozen=True, slots=True)
class Action(Event):
    """A tool call the agent is about to run."""

    kind: ClassVar[str] = "action"
    call: ToolCall
    turn: int


@dataclass(frozen=True, slots=True)
class Observation(Event):
    """What a tool call returned (or why it failed) - exactly what the model will read."""

    kind: ClassVar[str] = "observation"
    call_id: str
    name: str
    content: str
    is_error: bool
    turn: int
    duration_s: float = 0.0


@dataclass(frozen=True, slots=True)
class FinalAnswer(Event):
    kind: ClassVar[str] = "final_answer"
    text: str
    turn: int


@dataclass(frozen=True, slots=True)
class Error(Event):
    """Something went wrong. ``recoverable`` errors (a reply that did not parse) were fed back to
    the model and the run goes on; the others end the run with status "error"."""

    kind: ClassVar[str] = "error"
    message: str
    turn: int
    recoverable: bool = False


@dataclass(frozen=True, slots=True)
class RunFinished(Event):
    kind: ClassVar[str] = "run_finished"
    result: Result

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.kind, "result": self.result.to_dict(with_messages=True)}


EVENT_TYPES: dict[str, type[Event]] = {
    cls.kind: cls
    for cls in (RunStarted, TurnStarted, TokenDelta, ModelRetry, Thought, Action, Observation,
                FinalAnswer, Error, RunFinished)
}


def event_from_dict(d: dict[str, Any]) -> Event:
    """Rebuild an event from ``Event.to_dict()`` output (a JSONL trace line)."""
    d = dict(d)
    cls = EVENT_TYPES[d.pop("type")]
    if cls is Action:
        c = d["call"]
        d["call"] = ToolCall(c["id"], c["name"], c.get("arguments") or {}, c.get("parse_error"))
    elif cls is RunFinished:
        from .agents.base import Result

        d["result"] = Result.from_dict(d["result"])
    return cls(**d)
