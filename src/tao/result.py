"""What a run ends with: its answer, how it ended and what it cost. Below the agents, so the
events (``RunFinished``), the journal and the sinks can read it without importing a loop."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from .messages import Message, Usage

Status = Literal["done", "max_turns", "budget", "error"]


@dataclass(slots=True)
class Result:
    answer: str | None
    status: Status
    turns: int
    tool_calls: int
    usage: Usage = field(default_factory=Usage)
    duration_s: float = 0.0
    messages: list[Message] = field(default_factory=list)
    error: str | None = None
    sandbox: str | None = None  # the backend that ran the code (CodeAct), as RunStarted names it
    #: the validated value of the run's ``output_type`` (``tao.output``); None without one
    output: Any = None
    #: the agent this run handed over to (``handoffs=``): set on the handing agent's own
    #: result, which the stream holds back; the chain's result is the last agent's
    handoff: str | None = None

    @property
    def ok(self) -> bool:
        return self.status == "done"

    def to_dict(self, with_messages: bool = False) -> dict[str, Any]:
        d: dict[str, Any] = {
            "answer": self.answer, "status": self.status, "turns": self.turns,
            "tool_calls": self.tool_calls, "usage": self.usage.to_dict(),
            "duration_s": round(self.duration_s, 6),
        }
        if self.error:
            d["error"] = self.error
        if self.sandbox:
            d["sandbox"] = self.sandbox
        if self.output is not None:
            d["output"] = _as_json(self.output)
        if self.handoff:
            d["handoff"] = self.handoff
        if with_messages:
            d["messages"] = [m.to_dict() for m in self.messages]
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Result:
        u = d.get("usage") or {}
        return cls(d.get("answer"), d["status"], d["turns"], d["tool_calls"],
                   Usage(u.get("prompt_tokens", 0), u.get("completion_tokens", 0)),
                   d.get("duration_s", 0.0), [Message.from_dict(m) for m in d.get("messages", [])],
                   d.get("error"), d.get("sandbox"), d.get("output"), d.get("handoff"))


def _as_json(value: Any) -> Any:
    """A typed output as JSON data: pydantic models and dataclasses by pydantic, the rest as is."""
    if isinstance(value, (str, int, float, bool, type(None))):
        return value
    from pydantic import TypeAdapter

    return TypeAdapter(type(value)).dump_python(value, mode="json")
