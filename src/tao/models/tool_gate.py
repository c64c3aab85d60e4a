"""The embedded model's tool gate: may this question be answered with a tool at all?

Held to tao's JSON action object, the 1.5B calls a tool for every question, one that fits or
not (BFCL irrelevance 0/12; "Who wrote Jing Ye Si?" sent to the calculator ten times). Its own
tool-calling form is no better judge: unconstrained, its most likely reply to "What is the
capital of France?" with only ``add`` at hand is a fenced JSON call of an invented
``getCapital``. Asked plainly whether answering needs a call to one of the functions, though,
it mostly tells the two apart: on the development sets P("yes") was 0.72-0.96 where a
tool was needed and 0.45-0.77 where none fitted (BENCHMARKS.md, "The tool gate").

So before the model answers a user's message with tools at hand, ``LocalModel`` asks that
question (``prompts/tool_gate.toml``, one prompt evaluation, no decoding) and, when "yes" is
less likely than ``LocalModel.tool_gate``, the reply may only be a final answer. Off unless
set (``tool_gate=0.72`` or ``$TAO_LOCAL_TOOL_GATE``): the calculator and GSM8K sets are not yet
measured with it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .. import prompts
from ..lang import detect_language
from ..messages import Message
from .base import ToolSpec

#: the first tokens whose probabilities are compared
YES, NO = ("yes", "Yes"), ("no", "No")


def asks(messages: Sequence[Message]) -> bool:
    """The reply due is to a user's message (not to a tool's result): the gate's moment."""
    return bool(messages) and messages[-1].role == "user"


def wire(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> list[dict[str, str]]:
    """The yes/no question: each tool by name and description, and the user's message."""
    question = messages[-1].content
    table = prompts.table("tool_gate")["zh" if detect_language(question) == "zh" else "en"]
    functions = "\n".join(f"- {t.name}: {t.description}" for t in tools)
    return [{"role": "system", "content": table["system"]},
            {"role": "user", "content": prompts.render(table["question"], functions=functions,
                                                       question=question)}]


def p_yes(first: dict[str, Any]) -> float:
    """P("yes") among yes and no, from the engine's ``first_token`` answer."""
    p = first["p"]
    yes, no = sum(p[t] for t in YES), sum(p[t] for t in NO)
    return yes / (yes + no) if yes + no > 0 else 1.0
