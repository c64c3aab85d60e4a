"""Provider-neutral conversation types.

Everything inside tao speaks these; translation to the OpenAI wire format or to a GGUF chat
template happens at the model's edge (``tao.models.*``) and nowhere else.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

Role = Literal["system", "user", "assistant", "tool"]


@dataclass(slots=True)
class ToolCall:
    """One call the model asked for. ``arguments`` is already a dict; when the model sent
    something that is not a JSON object, ``arguments`` is empty and ``parse_error`` says why, so
    the tool layer can answer the model with a precise observation instead of crashing."""

    id: str
    name: str
    arguments: dict[str, Any] = field(default_factory=dict)
    parse_error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"id": self.id, "name": self.name, "arguments": self.arguments}
        if self.parse_error:
            d["parse_error"] = self.parse_error
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ToolCall:
        return cls(d["id"], d["name"], d.get("arguments") or {}, d.get("parse_error"))


def estimate_tokens(text: str) -> int:
    """Tokens of ``text`` for a model whose tokenizer tao cannot run: a quarter of the ASCII
    characters plus one per other character (a CJK character is about one token)."""
    ascii_chars = sum(1 for c in text if c < "\x80")
    return (ascii_chars + 3) // 4 + (len(text) - ascii_chars)


@dataclass(slots=True)
class Usage:
    """Tokens a call (or a run) used. ``estimated``: counted by tao (``estimate_tokens``)
    because the server sent none; shown with "≈"."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    estimated: bool = False

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def add(self, other: Usage | None) -> None:
        if other is not None:
            self.prompt_tokens += other.prompt_tokens
            self.completion_tokens += other.completion_tokens
            self.estimated = self.estimated or other.estimated

    @property
    def mark(self) -> str:
        """"≈" before an estimated count, nothing before a counted one."""
        return "≈" if self.estimated else ""

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.total_tokens,
        }
        if self.estimated:
            d["estimated"] = True
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Usage:
        """Reads ``to_dict`` output (``total_tokens`` is derived, so it is ignored)."""
        return cls(d.get("prompt_tokens", 0), d.get("completion_tokens", 0),
                   bool(d.get("estimated")))


@dataclass(slots=True)
class Message:
    role: Role
    content: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    tool_call_id: str | None = None
    name: str | None = None  # tool name on role="tool" messages

    @classmethod
    def system(cls, content: str) -> Message:
        return cls("system", content)

    @classmethod
    def user(cls, content: str) -> Message:
        return cls("user", content)

    @classmethod
    def assistant(cls, content: str = "", tool_calls: list[ToolCall] | None = None) -> Message:
        return cls("assistant", content, tool_calls or [])

    @classmethod
    def tool(cls, content: str, tool_call_id: str, name: str | None = None) -> Message:
        return cls("tool", content, tool_call_id=tool_call_id, name=name)

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"role": self.role, "content": self.content}
        if self.tool_calls:
            d["tool_calls"] = [c.to_dict() for c in self.tool_calls]
        if self.tool_call_id is not None:
            d["tool_call_id"] = self.tool_call_id
        if self.name is not None:
            d["name"] = self.name
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Message:
        calls = [ToolCall.from_dict(c) for c in d.get("tool_calls") or []]
        return cls(d["role"], d.get("content") or "", calls, d.get("tool_call_id"), d.get("name"))


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """What a model needs to know about a tool: name, description, JSON schema of arguments. Here,
    in the vocabulary, because tools make it, models read it and the grammar compiles it."""

    name: str
    description: str
    parameters: dict[str, Any]


def model_key(messages: Any) -> str:
    """What identifies a model call: a hash of the messages it was sent. The journal stores
    replies under it and a ``ReplayModel`` looks them up by it, so it lives with the messages."""
    import hashlib

    from .safe_json import dumps

    body = dumps([m.to_dict() for m in messages], sort_keys=True)
    return hashlib.sha256(body.encode("utf-8", "surrogatepass")).hexdigest()[:32]
