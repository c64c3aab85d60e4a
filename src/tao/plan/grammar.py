"""The plan grammar for the embedded model: steps numbered in order, references only backwards.

Under ``plan_schema(constrained=True)`` alone a small model still wrote plans that cannot run:
the 1.5B referred a step to itself (``step1: $step1 * 2``) or to a later one (``step1`` using
``$step2``) in 2 of the 16 calculator tasks, and three tries did not fix it (BENCHMARKS.md). A
JSON schema cannot say "step N may use steps 1..N-1", so this grammar is composed by hand around
llama-cpp-python's converter (as ``tao.grammar`` does for the other replies):

- position k of the array is the step with id ``step{first + k}``; the array has 1 to
  ``MAX_CONSTRAINED_STEPS`` steps;
- an argument (or an agent step's instruction) may refer to the steps before it in this plan and
  to ``finished`` steps of earlier plans, and to nothing else: as the whole value (``"$step1"``,
  the result with its type) or inside a string (``"$step1 * 2"``, ``"${step2}kg"``);
- a ``$`` in a string that starts no reference is kept, except ``$s`` and ``${``, which could
  only start one; a digit right after a reference is refused (``$step1`` then ``0`` would be
  ``$step10``).

Re-plans continue the numbering (``first``), so their steps may use every finished result.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from ..grammar import _converter, _visit
from ..tools.base import Toolbox
from .schema import MAX_CONSTRAINED_STEPS

#: one character of a JSON string that is neither ``$`` nor the string's end, and an escape
_PLAIN = r'[^$"\\\x00-\x1f]'
_PLAIN_NO_DIGIT = r'[^$"\\\x00-\x1f0-9]'
_ESCAPE = r'"\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4})'
#: what may follow a ``$`` that starts no reference
_DOLLAR = r'"$" [^s{$"\\\x00-\x1f]'


def _string_rule(conv: Any, name: str, allowed: list[str]) -> str:
    """A JSON string in which ``$stepN`` / ``${stepN}`` appear only for ``allowed`` ids."""
    lit = conv._format_literal
    bare = " | ".join(lit(f"${i}") for i in allowed)
    braced = " | ".join(lit(f"${{{i}}}") for i in allowed)
    free = f"{_PLAIN} | {_ESCAPE} | {_DOLLAR}"
    body, after = f"{name}-s0", f"{name}-s1"
    if allowed:
        conv._add_rule(body, f"(({free} | {braced}) {body}) | (({bare}) {after}) | \"\"")
        conv._add_rule(after, f"(({_PLAIN_NO_DIGIT} | {_ESCAPE} | {_DOLLAR}) {body}) | \"\"")
    else:
        conv._add_rule(body, f"(({free}) {body}) | \"\"")
    return conv._add_rule(name, f'"\\"" {body} "\\"" space')


def _is_free_string(schema: dict[str, Any]) -> bool:
    return schema.get("type") == "string" and not any(
        k in schema for k in ("enum", "const", "pattern", "format"))


def _step_schema(toolbox: Toolbox, agent_steps: bool, step_id: str, allowed: list[str],
                 string_ref: str) -> dict[str, Any]:
    """One position's step: its id fixed, each argument its own schema or a reference to an
    allowed step (a free string argument: the reference-checked string rule)."""
    common = {"id": {"const": step_id}, "description": {"type": "string"}}
    refs = {"enum": [f"${i}" for i in allowed]}
    ref_string = {"$ref": f"#/$defs/{string_ref}"}

    def arg(schema: dict[str, Any]) -> dict[str, Any]:
        if _is_free_string(schema):
            return ref_string
        return {"anyOf": [schema, refs]} if allowed else schema

    variants = []
    for t in toolbox:
        params = json.loads(json.dumps(t.spec.parameters))
        params["properties"] = {k: arg(v) for k, v in params.get("properties", {}).items()}
        variants.append({"type": "object", "additionalProperties": False,
                         "properties": {**common, "tool": {"const": t.name}, "args": params},
                         "required": ["id", "description", "tool", "args"]})
    if agent_steps:
        variants.append({"type": "object", "additionalProperties": False,
                         "properties": {**common, "instruction": ref_string},
                         "required": ["id", "description", "instruction"]})
    step = variants[0] if len(variants) == 1 else {"anyOf": variants}
    # the converter resolves every $ref against the schema; the rule itself is already made
    return {**step, "$defs": {string_ref: {"type": "string"}}}


def plan_grammar(toolbox: Toolbox, agent_steps: bool = False, *, first: int = 1,
                 finished: Iterable[str] = (), review: bool = False) -> str:
    """GBNF for ``{"steps": [...]}`` whose k-th step is ``step{first + k}`` (see the module).

    ``review``: the reply to a review (``Planner.review``) - those steps, or ``{"answer":
    "$stepK"}`` naming the finished step whose result answers the task."""
    conv = _converter(["id", "description", "tool", "args", "instruction"])
    _visit(conv, {"type": "string"}, "text")  # brings in the JSON ``char`` rule
    done = [i for i in dict.fromkeys(finished)]
    rules = []
    for k in range(MAX_CONSTRAINED_STEPS):
        step_id = f"step{first + k}"
        allowed = done + [f"step{first + j}" for j in range(k) if f"step{first + j}" not in done]
        string_ref = _string_rule(conv, f"refstr{k + 1}", allowed)
        rules.append(_visit(conv, _step_schema(toolbox, agent_steps, step_id, allowed, string_ref),
                            f"p{k + 1}"))
    rest = '""'
    for k in range(MAX_CONSTRAINED_STEPS - 1, 0, -1):  # the optional tail after step k
        rest = conv._add_rule(f"after{k}", f'("," space {rules[k]} {rest}) | ""')
    key = conv._format_literal(json.dumps("steps"))
    plan = conv._add_rule("plan", f'"{{" space {key} space ":" space "[" space {rules[0]} {rest} '
                                  f'"]" space "}}" space')
    if review and done:
        answer = conv._format_literal(json.dumps("answer"))
        refs = " | ".join(conv._format_literal(json.dumps(f"${i}")) for i in done)
        verdict = conv._add_rule("verdict", f'"{{" space {answer} space ":" space ({refs}) space '
                                            f'"}}" space')
        conv._add_rule("root", f"{verdict} | {plan}")
    else:
        conv._add_rule("root", plan)
    return conv.format_grammar()
