"""Finding the Python a model wrote in its reply - tolerantly.

Models fence code in many ways: ```python, ```py, ```Python3, a bare ```, an indented fence in a
list, a last fence never closed because the reply was cut (a stop sequence, ``max_tokens``), and
prose before, between and after. ``extract_code`` returns every block in order; the agent runs
them one after the other. Blocks fenced as another language (```bash, ```json, ```text) are not
Python and are left alone.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

#: An opening (or closing) fence: up to three spaces, three or more backticks, an info string.
_FENCE = re.compile(r"^(?P<indent>[ \t]{0,3})(?P<ticks>`{3,})[ \t]*(?P<info>[^`\n]*?)[ \t]*$")
PYTHON_TAGS = {"", "python", "py", "python3", "py3", "ipython", "python-repl", "pycon"}
_PROMPT = re.compile(r"^(>>>|\.\.\.)( |$)")


@dataclass(frozen=True, slots=True)
class Reply:
    """A reply split into its code blocks and the prose around them."""

    blocks: list[str]
    prose: str  # the reply with the code blocks taken out

    @property
    def has_code(self) -> bool:
        return bool(self.blocks)


def split_reply(text: str) -> Reply:
    """Split ``text`` into its Python blocks (in order) and the prose outside them."""
    blocks: list[str] = []
    prose: list[str] = []
    lines = (text or "").splitlines()
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            prose.append(lines[i])
            i += 1
            continue
        ticks, tag = m["ticks"], m["info"].strip().lower().split(" ")[0].lstrip("{.").rstrip("}")
        body: list[str] = []
        i += 1
        while i < len(lines):  # up to the closing fence, or the end of an unclosed last block
            close = _FENCE.match(lines[i])
            if close and not close["info"] and len(close["ticks"]) >= len(ticks):
                i += 1
                break
            body.append(lines[i])
            i += 1
        if tag in PYTHON_TAGS:
            code = _clean(body, len(m["indent"]))
            if code.strip():
                blocks.append(code)
        else:
            prose.extend(body)
    if not blocks and _bare_code(text):
        return Reply([text.strip()], "")
    return Reply(blocks, "\n".join(prose).strip())


def extract_code(text: str) -> list[str]:
    """The Python blocks of a reply, in order (empty when it has none)."""
    return split_reply(text).blocks


def _bare_code(text: str) -> bool:
    """A reply with no fence at all that is nothing but Python calling ``print``/``final_answer``
    or assigning variables (small models sometimes drop the fence). Prose never parses, and a bare
    expression such as ``42`` is an answer, not code."""
    if not text or not text.strip() or "\n" not in text.strip() and "(" not in text:
        return False
    try:
        tree = ast.parse(text.strip())
    except (SyntaxError, ValueError):
        return False
    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.For, ast.FunctionDef, ast.Import)):
            return True
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                and node.func.id in ("print", "final_answer"):
            return True
    return False


def _clean(body: list[str], indent: int) -> str:
    """Dedent a fence that was indented (inside a list item) and unwrap a ``>>>`` session."""
    if indent:
        body = [ln[indent:] if ln[:indent].isspace() else ln for ln in body]
    if body and any(_PROMPT.match(ln) for ln in body) and _PROMPT.match(body[0].lstrip()):
        # doctest style: keep the input lines, drop the printed output
        body = [ln[4:] for ln in body if _PROMPT.match(ln)]
    while body and not body[-1].strip():
        body.pop()
    while body and not body[0].strip():
        body.pop(0)
    return "\n".join(body)


#: GBNF for a model that honours grammars (the embedded one): one line of thought, then one Python
#: block, and the reply ends at that block's closing fence - so the model cannot go on to invent
#: the block's output, and a verbose small model cannot spend hundreds of tokens on a numbered
#: plan first. Code may not contain a triple backtick. ``code_required``: the block is not
#: optional (asked freely, the 0.5B model answered from memory in most replies, and miscounted);
#: otherwise the reply may be that one line alone - the answer.
_NO_FENCE = '( [^`] | "`" [^`] | "``" [^`] )'
#: The line is bounded: unbounded, the 0.5B model once rambled on one line until ``max_tokens``
#: and never reached its code.
LINE_CHARS = 200
#: Lines of plan the model may write before its block: the 0.5B model reasons in a numbered list
#: first (held to one line it solved 4 of the first 9 calculator tasks, with the list 6). The plan
#: must leave room for the code within ``max_tokens``: with 12 lines of 300 characters it once
#: spent all 512 tokens on a Chinese plan and never wrote its block.
PROSE_LINES = 6


def reply_grammar(code_required: bool = False, code_allowed: bool = True) -> str:
    """``code_allowed=False``: the reply is the one line alone (the answer)."""
    if not code_allowed:
        return f"root ::= line\nline ::= [^`\\n]{{1,{LINE_CHARS}}}\n"
    block = 'prose fence code "```" "\\n"?'
    return (f"root ::= line ( \"\\n\" {block} ){'' if code_required else '?'}\n"
            f"line ::= [^`\\n]{{0,{LINE_CHARS}}}\n"
            f"prose ::= ( line \"\\n\" ){{0,{PROSE_LINES}}}\n"
            f"code ::= {_NO_FENCE}*\n"
            'fence ::= "```" ( "python" | "py" )? "\\n"\n')


REPLY_GRAMMAR = reply_grammar()
