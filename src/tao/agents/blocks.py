"""The pieces of seed 002's text form: ``Action: write_file【index.html】`` and the fenced block after it.

A file is many lines of HTML/CSS/JS; squeezed into one JSON string it is where models make their
escaping mistakes, so the seed puts the path between brackets and the file in a Markdown code block
after the Action line. This module finds those two pieces; ``text_parser`` decides what they mean.

The block follows CommonMark's fence rule: it opens with three or more backticks (or tildes) and an
optional language tag, and closes at a line of at least as many of the same character and nothing
else. A file that itself holds ````` ``` ````` lines is written with a longer fence (````` ```` `````).
One extension, for the Markdown files models write with three backticks around examples of their
own: inside a block, a fence line *with a language tag* (```` ```bash ````) opens a nested block
and the next bare fence closes that one, not the file. Under CommonMark that bare fence would end
the file early and leave the rest of it as stray prose - never what the model meant.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

_FENCE = re.compile(r"[ ]{0,3}(`{3,}|~{3,})[ \t]*([^\n]*?)[ \t]*")
#: the brackets an argument may sit in: seed 002's full-width pair, and the ASCII ones models drift to
PAIRS = {"【": "】", "[": "]", "(": ")"}


@dataclass(frozen=True, slots=True)
class ToolParams:
    """What the parser knows of a tool's parameters: their names in order, the required ones, and
    the free-text strings (no enum, no const) - the only ones brackets or a block can fill."""

    names: tuple[str, ...]
    required: frozenset[str]
    texts: tuple[str, ...]

    @classmethod
    def of(cls, schema: Mapping[str, Any] | Sequence[str]) -> ToolParams:
        """From a tool's JSON schema, or from bare names (each then counts as a required string)."""
        if not isinstance(schema, Mapping):
            names = tuple(schema)
            return cls(names, frozenset(names), names)
        props = schema.get("properties") or {}
        texts = tuple(n for n, p in props.items() if isinstance(p, Mapping) and _free_text(p))
        return cls(tuple(props), frozenset(schema.get("required") or ()), texts)

    @property
    def bracket(self) -> str | None:
        """The parameter between the brackets: the first that is not ``content``."""
        rest = [n for n in self.names if n != "content"] or list(self.names)
        return rest[0] if rest else None

    def block_param(self, given: Mapping[str, Any]) -> str | None:
        """The one long text the block fills: ``content``, else the only required free-text
        string not given (none when that is ambiguous: ``edit_file(path, old, new)``)."""
        if "content" in self.texts and "content" not in given:
            return "content"
        free = [n for n in self.texts if n in self.required and n not in given]
        return free[0] if len(free) == 1 else None

    @property
    def form(self) -> str:
        """How seed 002's prompt and grammar write a call: ``"block"`` (``name【path】`` and a
        fenced block), ``"bracket"`` (``name【arg】``: one string is all it needs), or ``"json"``
        (``Action Input: {...}``)."""
        b = self.bracket
        if b is None or b not in self.texts:
            return "json"
        if b in self.required and self.block_param({b: ""}) is not None:
            return "block"
        if not (self.required - {b}):
            return "bracket"
        return "json"


def _free_text(prop: Mapping[str, Any]) -> bool:
    if "enum" in prop or "const" in prop:
        return False
    if prop.get("type") == "string":
        return True
    return any(isinstance(p, Mapping) and p.get("type") == "string" and "enum" not in p
               for p in prop.get("anyOf", ()))


def bracketed(text: str, start: int, multiline: bool) -> tuple[str, int] | None:
    """``(inside, end)`` for the bracket that opens at ``text[start]``, nesting counted (a path
    ``a[1].txt``, an answer that quotes 【...】); without a balanced close, the last closing
    bracket; ``None`` when there is none - on the same line unless ``multiline``."""
    close = PAIRS[text[start]]
    newline = text.find("\n", start)
    stop = len(text) if multiline or newline < 0 else newline
    depth = 0
    for i in range(start, stop):
        ch = text[i]
        if ch == text[start]:
            depth += 1
        elif ch == close:
            depth -= 1
            if depth == 0:
                return text[start + 1 : i], i + 1
    last = text.rfind(close, start + 1, stop)
    return (text[start + 1 : last], last + 1) if last != -1 else None


@dataclass(frozen=True, slots=True)
class Block:
    """A fenced block: its text (the lines between the fences, joined by newlines, as the seed
    reads it), or ``None`` when the reply ended before the closing fence; ``lines`` it held.
    Of a block the reply never closed, ``complete`` holds the lines before its last one (which
    the length limit may have cut mid-way): what a file writer can keep and carry on from."""

    content: str | None
    lines: int
    language: str = ""
    complete: str | None = None


def find_block(text: str, pos: int, label: Callable[[str], tuple[str, int] | None], *,
               strict: bool = False) -> Block | None:
    """The fenced block that opens after ``pos``. Blank lines may come first, and unless ``strict``
    prose and an ``Action Input:`` label too; any other label line (``Thought:``, ``Action:``,
    ``Observation:``; ``label`` says what a line starts with and where that ends) means none."""
    lines = text[pos:].split("\n")
    for i, line in enumerate(lines):
        found = label(line)
        if found is not None:
            if found[0] != "input" or strict:
                return None
            line = line[found[1]:]
        m = _FENCE.fullmatch(line)
        if m and not (m.group(1)[0] == "`" and "`" in m.group(2)):
            return _body(lines[i + 1 :], m.group(1), m.group(2))
        if line.strip() and strict:
            return None
    return None


def _body(lines: list[str], fence: str, language: str) -> Block:
    char, n, depth, body = fence[0], len(fence), 0, []
    for line in lines:
        m = _FENCE.fullmatch(line)
        if m and m.group(1)[0] == char and len(m.group(1)) >= n:
            if not m.group(2):
                if depth == 0:
                    return Block("\n".join(body), len(body), language)
                depth -= 1
            elif char == "`" and "`" not in m.group(2) and len(m.group(1)) == n:
                depth += 1  # ```bash inside the block: a nested example, closed by the next bare fence
        body.append(line)
    while body and not body[-1].strip():
        body.pop()
    if body and body[-1].rstrip().endswith(fence) and body[-1].strip() != fence:
        body[-1] = body[-1].rstrip()[: -n]  # `}```` at the very end: the fence on the last code line
        return Block("\n".join(body), len(body), language)
    return Block(None, len(body), language, "\n".join(body[:-1]) if len(body) > 1 else None)
