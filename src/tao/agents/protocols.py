"""How a ReAct agent talks to its model: native function calling or the seed 001 text protocol.

A protocol builds the system prompt and model arguments, reads each reply into a ``Step``, and
words observations. The ReAct loop itself (``react.py``) is the same for both.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .. import prompts
from ..messages import Message, ToolCall
from ..models.base import Model
from ..safe_json import dumps
from ..tools.base import Toolbox, ToolResult
from .text_parser import ParsedAction, ParsedFinal, parse_reply


@dataclass(slots=True)
class Step:
    """One reply, read: the message to keep in history plus what to do next."""

    message: Message
    thought: str = ""
    calls: list[ToolCall] = field(default_factory=list)
    final: str | None = None
    error: str | None = None  # unparsable: ``correction`` goes back to the model
    correction: Message | None = None


class ToolsProtocol:
    """Native function calling: tool specs go to the model, tool calls come back structured."""

    name = "tools"

    def system_prompt(self, lang: str, toolbox: Toolbox) -> str:
        return prompts.template("react_tools", lang)

    def model_kwargs(self, model: Model, toolbox: Toolbox, lang: str) -> dict[str, Any]:
        return {"tools": toolbox.specs()} if len(toolbox) else {}

    def read(self, message: Message, lang: str, toolbox: Toolbox) -> Step:
        if message.tool_calls:
            return Step(message, message.content.strip(), list(message.tool_calls))
        if message.content.strip():
            return Step(message, final=message.content.strip())
        detail = prompts.table("text_protocol")[lang]["empty"]
        return Step(message, error=detail, correction=Message.user(detail))

    def observation(self, call: ToolCall, result: ToolResult, lang: str) -> Message:
        return Message.tool(result.content, call.id, call.name)


class TextProtocol:
    """The seed 001 protocol over plain text, parsed tolerantly (see ``text_parser``)."""

    name = "text"
    stop = ["\nObservation:", "\nObservation：", "Observation:"]

    def __init__(self) -> None:
        self._ids = 0

    def system_prompt(self, lang: str, toolbox: Toolbox) -> str:
        tools = "\n".join(f"- {t.signature()}: {t.description}" for t in toolbox) or "(none)"
        examples = prompts.table("examples")["react_text"]
        example = next((examples[t.name][lang] for t in toolbox if t.name in examples), "")
        return prompts.render(prompts.template("react_text", lang), tools=tools,
                              tool_names=", ".join(toolbox.names), example=example.rstrip())

    def model_kwargs(self, model: Model, toolbox: Toolbox, lang: str) -> dict[str, Any]:
        kwargs: dict[str, Any] = {"stop": self.stop}
        if model.supports_grammar:
            from ..grammar import react_text_grammar

            kwargs["grammar"] = react_text_grammar(toolbox.specs())
        return kwargs

    def read(self, message: Message, lang: str, toolbox: Toolbox) -> Step:
        params = {t.name: list(t.spec.parameters.get("properties", {})) for t in toolbox}
        parsed = parse_reply(message.content, params)
        kept = Message.assistant(message.content)
        if isinstance(parsed, ParsedAction):
            self._ids += 1
            call = ToolCall(f"text_{self._ids}", parsed.tool, parsed.arguments)
            return Step(kept, parsed.thought, [call])
        if isinstance(parsed, ParsedFinal):
            return Step(kept, parsed.thought, final=parsed.answer)
        texts = prompts.table("text_protocol")[lang]
        detail = prompts.render(texts[parsed.reason], **parsed.values)
        correction = prompts.render(texts["unparsable"], detail=detail,
                                    tool_names=", ".join(toolbox.names))
        return Step(kept, parsed.thought, error=detail, correction=Message.user(correction))

    def observation(self, call: ToolCall, result: ToolResult, lang: str) -> Message:
        texts = prompts.table("text_protocol")[lang]
        return Message.user(prompts.render(texts["observation"], content=result.content))


def action_text(call: ToolCall) -> str:
    """``calculator {"a": 1}`` - how sinks show an action."""
    return f"{call.name} {dumps(call.arguments)}"
