"""How a ReAct agent talks to its model: native function calling, the seed 001/002 text protocol,
or seed 003's JSON decision object.

A protocol builds the system prompt and model arguments, opens the model stream, reads each reply
into a ``Step``, and words observations. The ReAct loop itself (``react.py``) is the same for all.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from .. import prompts
from ..messages import Message, ToolCall
from ..models.base import Chunk, Model
from ..safe_json import dumps
from ..tools.base import Toolbox, ToolResult
from .blocks import ToolParams
from .text_parser import ParsedAction, ParsedFinal, ParseFailure, parse_reply


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

    def stream(self, model: Model, messages: Sequence[Message], kwargs: dict[str, Any]
               ) -> AsyncIterator[Chunk]:
        return model.stream(messages, **kwargs)

    def system_prompt(self, lang: str, toolbox: Toolbox) -> str:
        return prompts.template("react_tools", lang)

    @staticmethod
    def answer_only(kwargs: dict[str, Any], model: Model) -> dict[str, Any]:
        """The model arguments of a turn whose reply must answer, not call (``tool_choice``);
        unchanged for a model of one's own whose ``stream`` predates the hint."""
        if not kwargs.get("tools") or not takes_tool_choice(model):
            return kwargs
        return {**kwargs, "tool_choice": "none"}

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


class _Shapes:
    """Each tool's ``ToolParams``, worked out once per toolbox (not once per turn)."""

    @staticmethod
    def answer_only(kwargs: dict[str, Any], model: Model) -> dict[str, Any]:
        """The text protocol keeps its arguments: its grammar is the tools' and the file
        blocks', and the coder it serves writes files with repeated calls on purpose."""
        return kwargs

    def __init__(self) -> None:
        self._shapes: tuple[Toolbox, dict[str, ToolParams]] | None = None

    def shapes(self, toolbox: Toolbox) -> dict[str, ToolParams]:
        if self._shapes is None or self._shapes[0] is not toolbox:
            self._shapes = (toolbox, {t.name: ToolParams.of(t.spec.parameters) for t in toolbox})
        return self._shapes[1]


class TextProtocol(_Shapes):
    """The seed 001 protocol over plain text, parsed tolerantly (see ``text_parser``); with a tool
    that takes a long text (``write_file(path, content)``), seed 002's form: ``Action:
    write_file【path】`` and the file in a fenced block, ``Action: Finish【answer】`` to end."""

    name = "text"
    stop = ["\nObservation:", "\nObservation：", "Observation:"]
    stream = ToolsProtocol.stream

    def __init__(self) -> None:
        super().__init__()
        self._ids = 0
        self._notes: dict[str, str] = {}  # a cut block's call: what its observation adds

    def block_tool(self, toolbox: Toolbox) -> str | None:
        """The first tool written as seed 002's ``name【arg】`` + block; ``None``: seed 001's form."""
        return next((n for n, p in self.shapes(toolbox).items() if p.form == "block"), None)

    def system_prompt(self, lang: str, toolbox: Toolbox) -> str:
        if self.block_tool(toolbox) is not None:
            return self._block_prompt(lang, toolbox)
        tools = "\n".join(f"- {t.signature()}: {t.description}" for t in toolbox) or "(none)"
        examples = prompts.table("examples")["react_text"]
        example = next((examples[t.name][lang] for t in toolbox if t.name in examples), "")
        return prompts.render(prompts.template("react_text", lang), tools=tools,
                              tool_names=", ".join(toolbox.names), example=example.rstrip())

    def _block_prompt(self, lang: str, toolbox: Toolbox) -> str:
        texts, shapes = prompts.table("text_protocol")[lang], self.shapes(toolbox)
        lines = []
        for i, t in enumerate(toolbox, 1):
            p = shapes[t.name]
            line = prompts.render(texts[f"form_{p.form}"], name=t.name, arg=p.bracket or "",
                                  block=p.block_param({p.bracket: ""}) or "",
                                  signature=t.signature(), description=t.description)
            lines.append(f"{i}. {line}")
        examples = prompts.table("examples")["react_block"]
        example = next((examples[t.name][lang] for t in toolbox if t.name in examples), "")
        return prompts.render(prompts.template("react_block", lang), tools="\n\n".join(lines),
                              n=str(len(lines) + 1), example=example.rstrip())

    def model_kwargs(self, model: Model, toolbox: Toolbox, lang: str) -> dict[str, Any]:
        if not model.supports_grammar:
            return {"stop": self.stop}
        from .. import grammar

        if self.block_tool(toolbox) is None:
            return {"stop": self.stop, "grammar": grammar.react_text_grammar(toolbox.specs())}
        forms = {n: (p.form, p.bracket) for n, p in self.shapes(toolbox).items()}
        # the grammar ends the reply after the action: no stop sequence to cut a file that has
        # a line starting with "Observation:"
        return {"grammar": grammar.react_block_grammar(toolbox.specs(), forms)}

    def read(self, message: Message, lang: str, toolbox: Toolbox) -> Step:
        parsed = parse_reply(message.content, self.shapes(toolbox))
        kept = Message.assistant(message.content)
        if isinstance(parsed, ParsedAction):
            self._ids += 1
            call = ToolCall(f"text_{self._ids}", parsed.tool, parsed.arguments)
            return Step(kept, parsed.thought, [call])
        if isinstance(parsed, ParsedFinal):
            return Step(kept, parsed.thought, final=parsed.answer)
        texts = prompts.table("text_protocol")[lang]
        if (cut := self._cut(parsed, toolbox)) is not None:
            self._ids += 1
            call = ToolCall(f"text_{self._ids}", cut.tool, cut.arguments)
            kept_lines = cut.arguments[parsed.values["param"]].split("\n")
            self._notes[call.id] = prompts.render(
                texts["cut_block"], tool=cut.tool, arg=parsed.values.get("arg", ""),
                lines=str(len(kept_lines)), last=kept_lines[-1][:160],
                then=toolbox[cut.tool].continued_by or "")
            return Step(kept, parsed.thought, [call])
        detail = prompts.render(texts[parsed.reason], **parsed.values)
        block = self.block_tool(toolbox)
        template = texts["unparsable"] if block is None else texts["unparsable_block"]
        correction = prompts.render(template, detail=detail, tool_names=", ".join(toolbox.names),
                                    block_tool=block or "",
                                    block_arg=(self.shapes(toolbox)[block].bracket if block else "") or "")
        return Step(kept, parsed.thought, error=detail, correction=Message.user(correction))

    def observation(self, call: ToolCall, result: ToolResult, lang: str) -> Message:
        texts = prompts.table("text_protocol")[lang]
        note = self._notes.pop(call.id, "")
        content = f"{note}\n{result.content}" if note and not result.is_error else result.content
        return Message.user(prompts.render(texts["observation"], content=content))

    @staticmethod
    def _cut(parsed: ParseFailure, toolbox: Toolbox) -> ParsedAction | None:
        """The complete lines of a block the reply never closed, as a call, where the tool has
        one that carries on its text (``Tool.continued_by``): kept, not thrown away, so a file
        longer than one reply is written in parts instead of cut again at the same place."""
        partial = parsed.partial
        if partial is None or partial.tool not in toolbox:
            return None
        then = toolbox[partial.tool].continued_by
        return partial if then is not None and then in toolbox else None


class JsonProtocol(_Shapes):
    """Seed 003's decision object, ``{"thought", "action", "action_input"}`` (action ``"final"``
    answers). The embedded model decodes it under a grammar; an API model is asked for it with a
    JSON-schema ``response_format`` (``OpenAIModel`` steps down to JSON mode, then plain text,
    where an endpoint refuses it) - read tolerantly (``decision``) whatever comes back."""

    name = "json"

    def __init__(self) -> None:
        super().__init__()
        self._ids = 0
        self._notes: dict[str, str] = {}  # a call's note for its observation (two objects sent)

    def system_prompt(self, lang: str, toolbox: Toolbox) -> str:
        tools = "\n".join(f"- {t.name}: {t.description}\n  action_input: "
                          f"{dumps(t.spec.parameters.get('properties', {}))}" for t in toolbox)
        examples = prompts.table("examples")["react_json"]
        example = next((examples[t.name][lang] for t in toolbox if t.name in examples), "")
        return prompts.render(prompts.template("react_json", lang), tools=tools or "(none)",
                              tool_names=", ".join(toolbox.names), example=example.rstrip())

    def model_kwargs(self, model: Model, toolbox: Toolbox, lang: str) -> dict[str, Any]:
        from .. import grammar

        if model.supports_grammar:
            return {"grammar": grammar.decision_grammar(toolbox.specs())}
        return {"response_format": {"type": "json_schema", "json_schema": {
            "name": "decision", "schema": grammar.decision_schema(toolbox.specs())}}}

    @staticmethod
    def answer_only(kwargs: dict[str, Any], model: Model) -> dict[str, Any]:
        """The decision object with ``"final"`` as its only action."""
        from .. import grammar

        if "grammar" in kwargs:
            return {**kwargs, "grammar": grammar.decision_grammar([])}
        return {**kwargs, "response_format": {"type": "json_schema", "json_schema": {
            "name": "decision", "schema": grammar.decision_schema([])}}}

    def stream(self, model: Model, messages: Sequence[Message], kwargs: dict[str, Any]
               ) -> AsyncIterator[Chunk]:
        """``model.stream``: an endpoint that does not take the schema is asked with JSON mode,
        then with none, by the model itself (``OpenAIModel``), said as a ``Retrying``."""
        return model.stream(messages, **kwargs)

    def read(self, message: Message, lang: str, toolbox: Toolbox) -> Step:
        from .decision import parse_decision

        decision = parse_decision(message.content, self.shapes(toolbox))
        parsed, kept = decision.parsed, Message.assistant(message.content)
        texts = prompts.table("json_protocol")[lang]
        if isinstance(parsed, ParsedAction):
            self._ids += 1
            call = ToolCall(f"json_{self._ids}", parsed.tool, parsed.arguments)
            if decision.extra:
                self._notes[call.id] = prompts.render(texts["extra"], n=str(decision.extra + 1))
            return Step(kept, parsed.thought, [call])
        if isinstance(parsed, ParsedFinal):
            return Step(kept, parsed.thought, final=parsed.answer)
        assert isinstance(parsed, ParseFailure)
        detail = prompts.render(texts[parsed.reason], tool_names=", ".join(toolbox.names),
                                **parsed.values)
        correction = prompts.render(texts["unparsable"], detail=detail,
                                    tool_names=", ".join(toolbox.names))
        return Step(kept, parsed.thought, error=detail, correction=Message.user(correction))

    def observation(self, call: ToolCall, result: ToolResult, lang: str) -> Message:
        texts = prompts.table("json_protocol")[lang]
        note = self._notes.pop(call.id, "")
        return Message.user(prompts.render(texts["observation"], content=result.content + note))


def takes_tool_choice(model: Model) -> bool:
    """Whether ``model.stream`` takes the ``tool_choice`` hint (a keyword of that name, or any
    keyword): tao's models and wrappers do; a ``Model`` subclass written before it may not."""
    import inspect

    try:
        params = inspect.signature(model.stream).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(p.name == "tool_choice" or p.kind is p.VAR_KEYWORD for p in params)


def action_text(call: ToolCall) -> str:
    """``calculator {"a": 1}`` - how sinks show an action."""
    return f"{call.name} {dumps(call.arguments)}"
