"""A tolerant parser for the seed 001 text protocol (Thought / Action / Action Input / Final Answer).

Models - small local ones above all - drift from the format: blank lines, bold labels, full-width
colons (``Action：``), JSON in code fences, single quotes, Python call syntax, prose after the
JSON, an ``Observation:`` they made up, or both an action and an answer. This module accepts all
of that and returns a ``ParseFailure`` (never raises) for what it cannot use, so the agent can
send a corrective observation and go on.

Rules worth knowing:
- Everything from the first ``Observation`` label on is cut off: only tools produce observations.
- A reply with both an Action and a Final Answer runs the Action; the answer is dropped because it
  was written before the observation it depends on.
- Prose before the first label counts as the thought when there is no ``Thought:`` label.
"""

from __future__ import annotations

import ast
import json
import re
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..safe_json import MAX_DEPTH, raw_decode, too_deep

_LABELS = {
    "thought": "thought", "thoughts": "thought", "思考": "thought", "想法": "thought",
    "action input": "input", "action_input": "input", "actioninput": "input", "input": "input",
    "行动输入": "input", "动作输入": "input",
    "action": "action", "行动": "action", "动作": "action",
    "observation": "observation", "观察": "observation",
    "final answer": "final", "final_answer": "final", "finalanswer": "final", "answer": "final",
    "最终答案": "final", "答案": "final",
}
_LABEL_RE = re.compile(
    r"^[ \t>*_#-]*(?P<label>"
    + "|".join(sorted((re.escape(k).replace(r"\ ", r"[ \t]*") for k in _LABELS), key=len, reverse=True))
    + r")[ \t*_]*[:：][ \t*_]*",
    re.IGNORECASE | re.MULTILINE,
)
# What ast.parse/literal_eval raise on hostile text: unhashable keys (TypeError), lone surrogates
# (UnicodeEncodeError, a ValueError), huge integers (ValueError), deep nesting (RecursionError,
# MemoryError, or SyntaxError: "too many nested parentheses").
_AST_ERRORS = (ValueError, TypeError, SyntaxError, MemoryError, RecursionError)
_FENCE_RE = re.compile(r"```[a-zA-Z]*[ \t]*\n?(.*?)(?:```|$)", re.DOTALL)


@dataclass(frozen=True, slots=True)
class ParsedAction:
    tool: str
    arguments: dict[str, Any]
    thought: str = ""


@dataclass(frozen=True, slots=True)
class ParsedFinal:
    answer: str
    thought: str = ""


@dataclass(frozen=True, slots=True)
class ParseFailure:
    reason: str  # a key of prompts/text_protocol.toml: empty, no_action, no_input, ...
    values: dict[str, str] = field(default_factory=dict)
    thought: str = ""


Parsed = ParsedAction | ParsedFinal | ParseFailure


def cut_invented_observation(text: str) -> str:
    """The reply up to (not including) the first ``Observation`` label the model wrote itself."""
    for m in _LABEL_RE.finditer(text):
        if _LABELS[_norm(m.group("label"))] == "observation":
            return text[: m.start()].rstrip()
    return text


def _norm(label: str) -> str:
    return re.sub(r"[ \t]+", " ", label.lower())


def parse_reply(text: str, params: Mapping[str, Sequence[str]] | None = None) -> Parsed:
    """Parse one model reply. ``params`` maps tool names to their parameter names; it lets
    ``Action: calculate`` / ``Action Input: 2*3`` become ``{"expression": "2*3"}`` and fixes the
    case of tool names."""
    params = params or {}
    text = cut_invented_observation(text or "").strip()
    if not text:
        return ParseFailure("empty")
    sections: dict[str, str] = {}
    matches = list(_LABEL_RE.finditer(text))
    preamble = text[: matches[0].start()].strip() if matches else text
    for i, m in enumerate(matches):
        kind = _LABELS[_norm(m.group("label"))]
        end = matches[i + 1].start() if i + 1 < len(matches) else len(text)
        sections.setdefault(kind, text[m.end() : end].strip())
    thought = sections.get("thought") or preamble
    if "action" in sections:
        return _parse_action(sections["action"], sections.get("input"), thought, params)
    if "final" in sections:
        answer = _strip_fences(sections["final"]).strip()
        return ParsedFinal(answer, thought) if answer else ParseFailure("empty_answer", thought=thought)
    return ParseFailure("no_action", thought=thought)


def _parse_action(action: str, raw_input: str | None, thought: str,
                  params: Mapping[str, Sequence[str]]) -> Parsed:
    first_line, _, rest = action.partition("\n")
    m = re.match(r"[\s`'\"\[(*]*([\w.\-]+)", first_line)
    if not m:
        return ParseFailure("no_action", thought=thought)
    name = _canonical(m.group(1), params)
    tail = (first_line[m.end():] + "\n" + rest).strip().strip("`'\"]*").strip()
    if raw_input is None or not raw_input.strip():
        raw_input = tail
    if tail.startswith("(") and not raw_input.lstrip().startswith("{"):
        raw_input = tail  # Action: calculator(operation="add", a=1, b=2)
    arguments, error = parse_arguments(raw_input, list(params.get(name, ())))
    if arguments is None:
        if error is None:
            if params.get(name) == []:
                return ParsedAction(name, {}, thought)
            return ParseFailure("no_input", {"tool": name}, thought)
        return ParseFailure("bad_input", {"error": error}, thought)
    return ParsedAction(name, arguments, thought)


def _canonical(name: str, params: Mapping[str, Sequence[str]]) -> str:
    name = name.strip(".")
    if name in params:
        return name
    lowered = {n.lower(): n for n in params}
    return lowered.get(name.lower(), name)


def _strip_fences(text: str) -> str:
    m = _FENCE_RE.search(text)
    return m.group(1) if m else text


def parse_arguments(raw: str, param_names: list[str]) -> tuple[dict[str, Any] | None, str | None]:
    """``(arguments, None)``, ``(None, None)`` when there is no input at all, or
    ``(None, reason)`` when there is input that is not an argument object (arguments nested
    deeper than ``safe_json.MAX_DEPTH`` included: they would break the loop further on)."""
    arguments, error = _arguments(raw, param_names)
    if arguments is not None and too_deep(arguments):
        return None, f"nested more than {MAX_DEPTH} levels deep"
    return arguments, error


def _arguments(raw: str, param_names: list[str]) -> tuple[dict[str, Any] | None, str | None]:
    raw = _strip_fences(raw or "").strip()
    if not raw:
        return None, None
    start = raw.find("{")
    if start >= 0:
        candidate = raw[start:]
        try:
            value, _ = raw_decode(candidate)  # ignores trailing prose
        except json.JSONDecodeError as e:
            value = _python_literal(_balanced(candidate))
            if value is None:
                return None, f"{e.msg} at character {e.pos}"
        if isinstance(value, dict):
            return value, None
        return None, f"expected an object, got {type(value).__name__}"
    if raw.startswith("("):
        call = _python_call("f" + _balanced(raw, "(", ")"), param_names)
        if call is not None:
            return call, None
    if "=" in raw and not raw.lstrip().startswith(("=", "==")):
        call = _python_call(f"f({raw.splitlines()[0]})", param_names)
        if call is not None:
            return call, None
    if len(param_names) == 1:  # a bare value for a one-parameter tool
        return {param_names[0]: raw.splitlines()[0].strip().strip("'\"`")}, None
    return None, "no JSON object found"


def _balanced(text: str, open_: str = "{", close: str = "}") -> str:
    depth, quote, escaped = 0, "", False
    for i, ch in enumerate(text):
        if quote:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch == open_:
            depth += 1
        elif ch == close:
            depth -= 1
            if depth == 0:
                return text[: i + 1]
    return text


def _python_literal(text: str) -> Any:
    """``{'a': 1, 'b': True,}`` - Python dict syntax, single quotes, trailing commas."""
    fixed = re.sub(r"\btrue\b", "True", re.sub(r"\bfalse\b", "False", re.sub(r"\bnull\b", "None", text)))
    for candidate in (fixed, re.sub(r",\s*([}\]])", r"\1", fixed)):
        try:
            return ast.literal_eval(_parse_python(candidate))
        except _AST_ERRORS:
            continue
    return None


def _parse_python(text: str) -> ast.expr:
    """``ast.parse(text, mode="eval").body`` without the SyntaxWarnings (``1a``: "invalid decimal
    literal") that model text would print on the user's console."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SyntaxWarning)
        return ast.parse(text.strip(), mode="eval").body


def _python_call(text: str, param_names: list[str]) -> dict[str, Any] | None:
    """``f(a=1, b=2)`` or ``f(1, 2)`` (positional, mapped onto the tool's parameters in order)."""
    try:
        node = _parse_python(text)
    except _AST_ERRORS:
        return None
    if not isinstance(node, ast.Call):
        return None
    try:
        args = {kw.arg: ast.literal_eval(kw.value) for kw in node.keywords if kw.arg}
        positional = [ast.literal_eval(a) for a in node.args]
    except _AST_ERRORS:
        return None
    if len(positional) > len(param_names):
        return None
    args.update(zip(param_names, positional))
    return args
