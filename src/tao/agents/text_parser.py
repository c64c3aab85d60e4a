"""A tolerant parser for the seed 001 text protocol (Thought / Action / Action Input / Final Answer).

Models - small local ones above all - drift from the format: blank lines, bold labels, full-width
colons (``Action：``), JSON in code fences, single quotes, Python call syntax, prose after the
JSON, an ``Observation:`` they made up, or both an action and an answer. This module accepts all
of that and returns a ``ParseFailure`` (never raises) for what it cannot use, so the agent can
send a corrective observation and go on.

It also reads seed 002's form: ``Action: write_file【index.html】`` with the file in the fenced
block after it (see ``blocks``), ``write_file[...]`` and ``write_file(...)`` alike, and
``Action: Finish【answer】`` as the final answer. The brackets hold a tool's first parameter that
is not ``content``; the block fills its one long text (``content``, else the only required string
still missing). What that form gets wrong has a reason of its own: ``unknown_tool``,
``unclosed_bracket``, ``empty_argument``, ``missing_block``, ``unclosed_block`` (nothing is written
from a block the reply never closed), ``no_bracket``, ``missing_argument``, ``empty_finish``.

Rules worth knowing:
- Everything from the first ``Observation`` label on is cut off: only tools produce observations.
  (A fenced block is read before that, so a file may hold such a line.)
- A reply with both an Action and a Final Answer runs the Action; the answer is dropped because it
  was written before the observation it depends on. Of two Actions, the first runs.
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
from .blocks import PAIRS, ToolParams, bracketed, find_block

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
    #: ``unclosed_block``: the action with the block's complete lines only, for a tool that can
    #: carry on where a reply was cut (``Tool.continued_by``); the protocol decides
    partial: ParsedAction | None = None


Parsed = ParsedAction | ParsedFinal | ParseFailure


def cut_invented_observation(text: str) -> str:
    """The reply up to (not including) the first ``Observation`` label the model wrote itself."""
    for m in _LABEL_RE.finditer(text):
        if _LABELS[_norm(m.group("label"))] == "observation":
            return text[: m.start()].rstrip()
    return text


def _norm(label: str) -> str:
    return re.sub(r"[ \t]+", " ", label.lower())


def parse_reply(text: str, params: Mapping[str, Sequence[str] | Mapping[str, Any] | ToolParams]
                | None = None) -> Parsed:
    """Parse one model reply. ``params`` maps tool names to their parameters (names, the JSON
    schema, or ``ToolParams``); it lets ``Action: calculate`` / ``Action Input: 2*3`` become
    ``{"expression": "2*3"}``, fixes the case of tool names and maps brackets and blocks."""
    shapes = {k: v if isinstance(v, ToolParams) else ToolParams.of(v) for k, v in (params or {}).items()}
    text = (text or "").replace("\r\n", "\n")
    action = _first_action(text)
    if action is not None:
        seed002 = _seed002(text, action, shapes)
        if seed002 is not None:
            return seed002
    params = {k: v.names for k, v in shapes.items()}
    text = cut_invented_observation(text).strip()
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
            if params.get(name) == ():
                return ParsedAction(name, {}, thought)
            return ParseFailure("no_input", {"tool": name}, thought)
        return ParseFailure("bad_input", {"error": error}, thought)
    return ParsedAction(name, arguments, thought)


def _line_label(line: str) -> tuple[str, int] | None:
    m = _LABEL_RE.match(line)
    return (_LABELS[_norm(m.group("label"))], m.end()) if m else None


def _first_action(text: str) -> re.Match[str] | None:
    """The first ``Action`` label, unless an ``Observation`` label comes before it."""
    for m in _LABEL_RE.finditer(text):
        kind = _LABELS[_norm(m.group("label"))]
        if kind == "action":
            return m
        if kind == "observation":
            return None
    return None


def _thought_before(head: str) -> str:
    matches = list(_LABEL_RE.finditer(head))
    for i, m in enumerate(matches):
        if _LABELS[_norm(m.group("label"))] == "thought":
            end = matches[i + 1].start() if i + 1 < len(matches) else len(head)
            return head[m.end() : end].strip()
    return head[: matches[0].start() if matches else len(head)].strip()


_NAME_RE = re.compile(r"[ \t*`'\"]*([\w.\-]+)[`'\"*]*[ \t]*")


def _seed002(text: str, action: re.Match[str], shapes: Mapping[str, ToolParams]) -> Parsed | None:
    """Seed 002's form after ``action`` (the Action label), or ``None`` for the other forms."""
    m = _NAME_RE.match(text, action.end())
    if not m:
        return None
    name, at = _canonical(m.group(1), shapes), m.end()
    thought = _thought_before(text[: action.start()])
    opener = text[at : at + 1]
    if name.lower() == "finish" and name not in shapes:
        return _finish(text, at, thought)
    if opener and opener in PAIRS:
        if opener == "(" and find_block(text, at, _line_label) is None:
            return None  # calculator(a=1, b=2): call syntax, read as before
        if name not in shapes:
            return ParseFailure("unknown_tool", {"tool": name, "tools": ", ".join(shapes)}, thought)
        inside = bracketed(text, at, multiline=False)
        if inside is None:
            return ParseFailure("unclosed_bracket", {"tool": name}, thought)
        return _with_block(name, shapes[name], inside[0], opener, text, inside[1], thought)
    shape = shapes.get(name)
    line_end = text.find("\n", at)
    line_end = len(text) if line_end < 0 else line_end
    block = find_block(text, line_end, _line_label, strict=True) if shape else None
    if block is None or (block.content or "").lstrip().startswith("{"):
        return None  # Action: calculator + Action Input (or a fenced JSON object): as before
    rest = text[at:line_end].strip()
    if rest:  # Action: write_file index.html
        if shape.block_param({shape.bracket: rest}) is not None:
            return ParseFailure("no_bracket", {"tool": name, "arg": rest}, thought)
        return None
    param = shape.block_param({})
    if param is None:
        return None
    if block.content is None:
        return ParseFailure("unclosed_block", {"tool": name, "lines": str(block.lines)}, thought)
    missing = [n for n in shape.names if n in shape.required and n != param]
    if missing:
        return ParseFailure("missing_argument", {"tool": name, "param": missing[0]}, thought)
    return ParsedAction(name, {param: block.content}, thought)


def _with_block(name: str, shape: ToolParams, inside: str, opener: str, text: str, end: int,
                thought: str) -> Parsed:
    """``name【inside】`` and the block after ``end``, mapped onto the tool's parameters."""
    arg = inside.strip()
    given: dict[str, Any] | None = None
    if arg and (opener == "(" or "=" in arg or arg[0] in "'\""):
        given = _python_call(f"f({arg})", list(shape.names))  # write_file(path="a.html")
    if given is None:
        arg = _unquote(arg)
        if not arg:
            if shape.required:
                return ParseFailure("empty_argument", {"tool": name, "param": shape.bracket or ""}, thought)
            given = {}
        else:
            given = {shape.bracket: arg} if shape.bracket else {}
    param = shape.block_param(given)
    if param is None:
        return ParsedAction(name, given, thought)
    block = find_block(text, end, _line_label)
    if block is None:
        if param in shape.required:
            return ParseFailure("missing_block", {"tool": name, "arg": arg, "param": param}, thought)
        return ParsedAction(name, given, thought)
    if block.content is None:
        partial = None if block.complete is None else \
            ParsedAction(name, {**given, param: block.complete}, thought)
        return ParseFailure("unclosed_block", {"tool": name, "arg": arg, "lines": str(block.lines),
                                               "param": param}, thought, partial)
    return ParsedAction(name, {**given, param: block.content}, thought)


def _unquote(arg: str) -> str:
    """``"index.html"`` and a backquoted path lose their quotes; a quote that belongs to the
    argument stays: ``python3 -c "print(1)"`` ends in one (the shell needs it), and so does
    ``say 'hi'``. A quote is dropped only where it wraps the whole argument, or stands alone at
    an end (``index.html"``, the model's typo)."""
    for q in "`'\"":
        if len(arg) >= 2 and arg[0] == arg[-1] == q and q not in arg[1:-1]:
            return arg[1:-1].strip()
        if arg.count(q) == 1 and (arg[0] == q or arg[-1] == q):
            return arg.strip(q).strip()
    return arg


def _finish(text: str, at: int, thought: str) -> Parsed:
    """``Finish【answer】`` (the answer may span lines), or ``Finish`` and the answer after it."""
    rest = text[at:].lstrip(" \t:：")
    start = len(text) - len(rest)
    if rest[:1] in PAIRS:
        inside = bracketed(text, start, multiline=True)
        if inside is None:
            return ParseFailure("unclosed_bracket", {"tool": "Finish"}, thought)
        answer = _strip_fences(inside[0]).strip()
    else:
        nxt = _LABEL_RE.search(text, start)
        answer = text[start : nxt.start() if nxt else len(text)].strip()
        if not answer and nxt and _LABELS[_norm(nxt.group("label"))] == "input":
            after = _LABEL_RE.search(text, nxt.end())
            answer = text[nxt.end() : after.start() if after else len(text)].strip()
    return ParsedFinal(answer, thought) if answer else ParseFailure("empty_finish", thought=thought)


def _canonical(name: str, params: Mapping[str, Any]) -> str:
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
