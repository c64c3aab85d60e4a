"""GBNF grammars for constrained decoding on the embedded model.

JSON schema → GBNF is llama-cpp-python's own ``SchemaConverter``; this module only composes its
rules into the two shapes tao needs: the JSON action object of the local tool-calling format and
the seed 001 text protocol. Under these grammars every reply the model can produce parses.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from .models.base import ToolSpec

#: The local model's tool-calling reply: a thought, then either a call or the final answer.
ACTION_ORDER = ["thought", "tool", "arguments", "final_answer"]


def _converter(order: Sequence[str] = ()) -> Any:
    """llama-cpp-python's converter; properties are written in ``order``, then in the schema's
    own order (which is what a plan needs: a step's description before its tool and args, so
    the model says what the step is for before it picks the operation)."""
    from llama_cpp.llama_grammar import SchemaConverter

    return SchemaConverter(prop_order={k: i for i, k in enumerate(order)},
                           allow_fetch=False, dotall=False, raw_pattern=False)


def _visit(conv: Any, schema: dict[str, Any], name: str) -> str:
    schema = conv.resolve_refs(json.loads(json.dumps(schema)), name)
    return conv.visit(schema, name)


def json_schema_grammar(schema: dict[str, Any]) -> str:
    """Any JSON schema, for ``response_format`` structured output."""
    conv = _converter()
    _visit(conv, schema, "")
    return conv.format_grammar()


#: Free-text fields are bounded so that a rambling model finishes its JSON well within
#: ``max_tokens``: an action cut off mid-way would not parse, and every action must.
THOUGHT_CHARS = 200
ANSWER_CHARS = 300


def action_schema(specs: Sequence[ToolSpec]) -> dict[str, Any]:
    """The JSON schema of one local tool-calling reply (what ``action_grammar`` enforces)."""
    calls = [
        {"type": "object",
         "properties": {"thought": {"type": "string", "maxLength": THOUGHT_CHARS},
                        "tool": {"const": s.name}, "arguments": s.parameters or {"type": "object"}},
         "required": ["thought", "tool", "arguments"], "additionalProperties": False}
        for s in specs
    ]
    final = {"type": "object",
             "properties": {"thought": {"type": "string", "maxLength": THOUGHT_CHARS},
                            "final_answer": {"type": "string", "maxLength": ANSWER_CHARS}},
             "required": ["thought", "final_answer"], "additionalProperties": False}
    return {"anyOf": [*calls, final]}


def action_grammar(specs: Sequence[ToolSpec]) -> str:
    """``{"thought": ..., "tool": ..., "arguments": {...}}`` or ``{"thought": ...,
    "final_answer": ...}``, written by hand around the converter's argument rules so the shared
    ``thought`` prefix is one rule and lengths use GBNF's ``{m,n}``."""
    conv = _converter(ACTION_ORDER)
    _visit(conv, {"type": "string"}, "text")  # brings in the JSON ``char`` rule
    key = lambda k: conv._format_literal(json.dumps(k)) + " space \":\" space"  # noqa: E731
    thought = conv._add_rule("thought", f'"\\"" char{{0,{THOUGHT_CHARS}}} "\\"" space')
    answer = conv._add_rule("answer", f'"\\"" char{{0,{ANSWER_CHARS}}} "\\"" space')
    alts = []
    for i, spec in enumerate(specs):
        args = _visit(conv, spec.parameters or {"type": "object"}, f"args{i}")
        name = conv._format_literal(json.dumps(spec.name))
        alts.append(f'{key("tool")} {name} space "," space {key("arguments")} {args}')
    alts.append(f'{key("final_answer")} {answer}')
    body = " | ".join(f"({a})" for a in alts)
    conv._add_rule("root", f'"{{" space {key("thought")} {thought} "," space ({body}) "}}" space')
    return conv.format_grammar()


def react_text_grammar(specs: Sequence[ToolSpec]) -> str:
    """``Thought: <line>`` then ``Action: <tool>`` + ``Action Input: <args JSON>``, or
    ``Final Answer: <line>``. The arguments follow each tool's own schema."""
    conv = _converter()
    actions = []
    for i, spec in enumerate(specs):
        args = _visit(conv, spec.parameters or {"type": "object"}, f"args{i}")
        actions.append(f'"Action: " {conv._format_literal(spec.name)} "\\nAction Input: " {args}')
    line = conv._add_rule("line", f"[^\\n]{{1,{THOUGHT_CHARS}}}")
    answer = conv._add_rule("answer-line", f"[^\\n]{{1,{ANSWER_CHARS}}}")
    final = f'"Final Answer: " {answer}'
    body = " | ".join(f"({a})" for a in [*actions, final])
    conv._add_rule("root", f'"Thought: " {line} "\\n" ({body})')
    return conv.format_grammar()
