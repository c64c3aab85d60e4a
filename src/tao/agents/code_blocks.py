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


#: GBNF for a model that honours grammars (the embedded one): the reply is one Python block and
#: ends at its closing fence, so the model cannot go on to invent the block's output. The model
#: reasons in comments and ends with ``final_answer(x)``. Measured on the calculator tasks
#: (BENCHMARKS.md): a line of prose or a numbered plan before the block made the 0.5B model do
#: the arithmetic in its head and copy that into the code, and a plain-text answer after the
#: output made it misread the output (5/16); code only, answered in code: 10/16, 1.5B 15/16.
#: Code may not contain a triple backtick.
CODE_GRAMMAR = ('root ::= "```python\\n" code "```"\n'
                'code ::= ( [^`] | "`" [^`] | "``" [^`] )*\n')
