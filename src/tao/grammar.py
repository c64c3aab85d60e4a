"""GBNF grammars for constrained decoding on the embedded model.

JSON schema → GBNF is llama-cpp-python's own ``SchemaConverter``; this module only composes its
rules into the shapes tao needs: the JSON action object of the local tool-calling format, the
seed 001 text protocol, seed 002's bracket-and-block form and seed 003's JSON decision object.
Under these grammars every reply the model can produce parses.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from .messages import ToolSpec

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


#: Tool calls one local reply may make at once (BFCL's parallel categories ask for up to 4; an
#: OpenAI model returns several ``tool_calls`` the same way).
MAX_CALLS = 8


def action_grammar(specs: Sequence[ToolSpec], answer_schema: dict[str, Any] | None = None) -> str:
    """``{"thought": ..., "tool": ..., "arguments": {...}}``, ``{"thought": ..., "calls":
    [{"tool": ..., "arguments": {...}}, ...]}`` (2 to ``MAX_CALLS`` calls that do not wait on
    each other) or ``{"thought": ..., "final_answer": ...}``, written by hand around the
    converter's argument rules so the shared ``thought`` prefix is one rule and lengths use
    GBNF's ``{m,n}``. Several calls are a key of their own the model picks after its thought,
    not more objects after the first: a model that likes a newline after its JSON would then
    be pushed into a call it never meant (seen: a 10-turn loop on a task one call a turn solves).
    ``answer_schema``: ``final_answer`` is a JSON value of that schema, not a string (a typed
    result, ``tao.output``)."""
    return _object_grammar(specs, ACTION_ORDER, "tool", "arguments", None, "final_answer",
                           many=MAX_CALLS, answer_schema=answer_schema)


#: The longest answer in plain text the native tool format lets the model write.
NATIVE_ANSWER_CHARS = 2000


def native_tools_grammar(specs: Sequence[ToolSpec]) -> str:
    """The model's own tool-calling form (Qwen2.5's chat template): one to ``MAX_CALLS``
    ``<tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>`` blocks, each tool's
    arguments by its schema, or an answer in plain text that does not start with ``<``. Which of
    the two comes first is the model's choice, as it was trained to make it."""
    conv = _converter(["name", "arguments"])
    alts = []
    for i, spec in enumerate(specs):
        args = _visit(conv, spec.parameters or {"type": "object"}, f"args{i}")
        name = conv._format_literal(json.dumps(spec.name))
        alts.append(f'{name} ", \\"arguments\\": " {args}')
    call = conv._add_rule("call", '"<tool_call>\\n{\\"name\\": " (' + " | ".join(
        f"({a})" for a in alts) + ') "}\\n</tool_call>"')
    conv._add_rule("answer", f'[^<] [^\\x00]{{0,{NATIVE_ANSWER_CHARS}}}')
    conv._add_rule("root", f'{call} ("\\n" {call}){{0,{MAX_CALLS - 1}}} | answer')
    return conv.format_grammar()


#: Seed 003's decision object: ``action`` is a tool's name or ``"final"``.
DECISION_ORDER = ["thought", "action", "action_input"]
FINAL_ACTION = "final"


def decision_grammar(specs: Sequence[ToolSpec]) -> str:
    """``{"thought": ..., "action": "<tool>", "action_input": {...}}`` or ``{"thought": ...,
    "action": "final", "action_input": "<answer>"}`` - each tool's arguments by its own schema."""
    return _object_grammar(specs, DECISION_ORDER, "action", "action_input", FINAL_ACTION, "action_input")


def _object_grammar(specs: Sequence[ToolSpec], order: Sequence[str], tool_key: str, args_key: str,
                    final_name: str | None, answer_key: str, many: int = 1,
                    answer_schema: dict[str, Any] | None = None) -> str:
    conv = _converter(order)
    _visit(conv, {"type": "string"}, "text")  # brings in the JSON ``char`` rule
    key = lambda k: conv._format_literal(json.dumps(k)) + " space \":\" space"  # noqa: E731
    thought = conv._add_rule("thought", f'"\\"" char{{0,{THOUGHT_CHARS}}} "\\"" space')
    answer = (_visit(conv, answer_schema, "answer") if answer_schema is not None else
              conv._add_rule("answer", f'"\\"" char{{0,{ANSWER_CHARS}}} "\\"" space'))
    alts = []
    for i, spec in enumerate(specs):
        args = _visit(conv, spec.parameters or {"type": "object"}, f"args{i}")
        name = conv._format_literal(json.dumps(spec.name))
        alts.append(f'{key(tool_key)} {name} space "," space {key(args_key)} {args}')
    final = f'{key(answer_key)} {answer}'
    if final_name is not None:
        final = f'{key(tool_key)} {conv._format_literal(json.dumps(final_name))} space "," space {final}'
    if many > 1 and specs:
        call = conv._add_rule("call", f'"{{" space ({" | ".join(f"({a})" for a in alts)}) "}}" space')
        alts.append(f'{key("calls")} "[" space {call} ("," space {call}){{1,{many - 1}}} "]" space')
    body = " | ".join(f"({a})" for a in [*alts, final])
    conv._add_rule("root", f'"{{" space {key("thought")} {thought} "," space ({body}) "}}" space')
    return conv.format_grammar()


def decision_schema(specs: Sequence[ToolSpec]) -> dict[str, Any]:
    """The decision object as a JSON schema for ``response_format`` on API models: one object at
    the root (what OpenAI's structured output takes), ``action`` one of the tools or ``final``."""
    return {"type": "object", "additionalProperties": False,
            "required": ["thought", "action", "action_input"],
            "properties": {"thought": {"type": "string"},
                           "action": {"type": "string",
                                      "enum": [*(s.name for s in specs), FINAL_ACTION]},
                           "action_input": {"anyOf": [{"type": "object"}, {"type": "string"}]}}}


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


#: GBNF pieces of seed 002's fenced block. A line inside the block is any line that is not a
#: fence (up to three spaces, then three backticks) - so the one place the model can write a bare
#: fence is the end of the file, and the parser (``agents.blocks``) closes the block exactly where
#: the grammar did. A line with a language tag (```` ```bash ````) opens one nested block, as a
#: Markdown file's own example, closed by the next bare fence.
_BLOCK_RULES = r"""
block ::= "```" lang "\n" (text-line | nested)* "```"
lang ::= [a-zA-Z0-9_+#.-]{0,20}
nested ::= "```" [a-zA-Z0-9_+#.-] [^`\n]{0,40} "\n" text-line* "```\n"
text-line ::= ([^ `\n] [^\n]* | "`" tick1 | " " sp1)? "\n"
sp1 ::= ([^ `\n] [^\n]* | "`" tick1 | " " sp2)?
sp2 ::= ([^ `\n] [^\n]* | "`" tick1 | " " sp3)?
sp3 ::= ([^ `\n] [^\n]* | "`" tick1 | " " [^\n]*)?
tick1 ::= ([^`\n] [^\n]* | "`" tick2)?
tick2 ::= ([^`\n] [^\n]*)?
"""


def react_block_grammar(specs: Sequence[ToolSpec], forms: Mapping[str, tuple[str, str | None]]) -> str:
    """Seed 002's form: ``Thought: <line>``, then ``Action: name【arg】`` and a fenced block
    (``forms[name]`` is ``("block", param)``), ``Action: name【arg】`` (``"bracket"``),
    ``Action: name`` + ``Action Input: <JSON>`` (``"json"``), or ``Action: Finish【answer】``."""
    conv = _converter()
    actions = []
    for i, spec in enumerate(specs):
        form = forms.get(spec.name, ("json", None))[0]
        name = conv._format_literal(spec.name)
        if form == "json":
            args = _visit(conv, spec.parameters or {"type": "object"}, f"args{i}")
            actions.append(f'"Action: " {name} "\\nAction Input: " {args}')
        else:
            tail = ' "\\n" block' if form == "block" else ""
            actions.append(f'"Action: " {name} "【" arg "】"{tail}')
    conv._add_rule("line", f"[^\\n]{{1,{THOUGHT_CHARS}}}")
    conv._add_rule("arg", "[^【】\\n]{1,200}")
    conv._add_rule("finish-answer", f"[^【】]{{1,{ANSWER_CHARS}}}")
    body = " | ".join(f"({a})" for a in [*actions, '"Action: Finish【" finish-answer "】"'])
    # a newline may end the reply: the tokenizer has "```\n" as one token, which a model that
    # means to close its block picks first (the 0.5B model, refused it, wrote ``" instead)
    conv._add_rule("root", f'"Thought: " line "\\n" ({body}) "\\n"?')
    return conv.format_grammar() + _BLOCK_RULES
