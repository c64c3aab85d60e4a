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


def _converter() -> Any:
    from llama_cpp.llama_grammar import SchemaConverter

    return SchemaConverter(prop_order={k: i for i, k in enumerate(ACTION_ORDER)},
                           allow_fetch=False, dotall=False, raw_pattern=False)


def _visit(conv: Any, schema: dict[str, Any], name: str) -> str:
    schema = conv.resolve_refs(json.loads(json.dumps(schema)), name)
    return conv.visit(schema, name)


def json_schema_grammar(schema: dict[str, Any]) -> str:
    """Any JSON schema, for ``response_format`` structured output."""
    conv = _converter()
    _visit(conv, schema, "")
    return conv.format_grammar()


def action_schema(specs: Sequence[ToolSpec]) -> dict[str, Any]:
    """The JSON schema of one local tool-calling reply."""
    calls = [
        {"type": "object",
         "properties": {"thought": {"type": "string"}, "tool": {"const": s.name},
                        "arguments": s.parameters or {"type": "object"}},
         "required": ["thought", "tool", "arguments"], "additionalProperties": False}
        for s in specs
    ]
    final = {"type": "object",
             "properties": {"thought": {"type": "string"}, "final_answer": {"type": "string"}},
             "required": ["thought", "final_answer"], "additionalProperties": False}
    return {"anyOf": [*calls, final]}


def action_grammar(specs: Sequence[ToolSpec]) -> str:
    return json_schema_grammar(action_schema(specs))


def react_text_grammar(specs: Sequence[ToolSpec]) -> str:
    """``Thought: <line>`` then ``Action: <tool>`` + ``Action Input: <args JSON>``, or
    ``Final Answer: <line>``. The arguments follow each tool's own schema."""
    conv = _converter()
    actions = []
    for i, spec in enumerate(specs):
        args = _visit(conv, spec.parameters or {"type": "object"}, f"args{i}")
        actions.append(f'"Action: " {conv._format_literal(spec.name)} "\\nAction Input: " {args}')
    line = conv._add_rule("line", r'[^\n]+')
    final = f'"Final Answer: " {line}'
    body = " | ".join(f"({a})" for a in [*actions, final])
    conv._add_rule("root", f'"Thought: " {line} "\\n" ({body})')
    return conv.format_grammar()
