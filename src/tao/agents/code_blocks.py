"""Finding the Python a model wrote in its reply - tolerantly.

Models mark code in many ways, and ``tests/data/codeact_replies.jsonl`` holds real replies of each:

- Markdown fences: ```python, ```py, ```Python3, a bare ```, an indented fence in a list, code on
  the fence line (```python x = 5), a one-line fence (```print(1)```), a fence opened after
  prose on the same line (``Let me compute: ```python``), closed at the end of the last code line
  (``print(x)```, what a grammar-held model writes) or followed by text (```<end_code>), and a
  last fence never closed because the reply was cut (a stop sequence, ``max_tokens``).
- The CodeAct paper's and MINT's tags: ``<execute>…</execute>`` (multi-line, one-line, several in
  a reply, unclosed at the token limit), ``<solution>…</solution>`` for the answer, ``<thought>``;
  OpenMath's ``<llm-code>`` is read as ``<execute>``, a ``<final_answer>`` tag as ``<solution>``.

``split_reply`` returns every Python block in order. Blocks fenced as another language (```bash,
```json) are not Python and are left alone. A reply is an *answer* only when it holds no code
marker at all (``Reply.answer``); a marker that yields nothing to run is named in
``Reply.problem`` so the agent can tell the model what went wrong instead of taking the reply as
the answer. Nothing here raises on any input: deep nesting, 3,000-term expressions, megabyte
replies and lone surrogates are text like any other.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

PYTHON_TAGS = {"", "python", "py", "python3", "py3", "ipython", "python-repl", "pycon"}
_PROMPT = re.compile(r"^(>>>|\.\.\.)( |$)")
#: a run of three or more backticks (matched greedily, so scanning stays linear)
_TICKS = re.compile(r"`{3,}")
#: a tag of the CodeAct/MINT protocol; one quoted in backticks (`<solution>`) is a mention
_TAG = re.compile(r"(?<!`)<(?P<close>/?)(?P<name>execute|llm-code|solution|final_answer|thought)"
                  r"\s*>(?!`)", re.IGNORECASE)
#: other names models give the tags: OpenMath's <llm-code>; <final_answer> is what the 0.5B model
#: writes after being reminded to call final_answer()
_SYNONYMS = {"llm-code": "execute", "final_answer": "solution"}
#: a line outside any block that can only be code which was not marked as such
_LOOSE_CODE = re.compile(r"^\s*(?:(?:print|final_answer)\s*\(|import [A-Za-z_]|from [\w.]+ import "
                         r"|def \w+\s*\(|>>> )")
_LABEL = re.compile(r"^\s*(?:\*\*)?(?:final answer|answer|reply|observation|assistant"
                    r"|最终答案|答案|回复|回答|执行结果)(?:\*\*)?\s*[:：]\s*", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class Reply:
    """A reply split into its Python blocks and the prose around them.

    ``solution``: the text of the last ``<solution>`` tag (None without one). ``problem``: why a
    reply with a code marker gave nothing to run, as ``(kind, what)``: ``"language"`` (a block
    of another language; ``what`` is its name), ``"empty"`` (an empty block or tag),
    ``"not_code"`` (a one-line fence around something that is not Python, ``` ```42``` ```),
    ``"loose"`` (a code line outside any block) or ``"tag"`` (a ``<thought>`` with neither
    code nor solution). None when there is code to run or no marker at all."""

    blocks: list[str]
    prose: str  # the reply with the code blocks (and tags) taken out
    solution: str | None = None
    problem: tuple[str, str] | None = None

    @property
    def has_code(self) -> bool:
        return bool(self.blocks)

    @property
    def answer(self) -> str | None:
        """The final answer this reply gives: its ``<solution>``, or the prose of a reply with no
        code marker at all (a label such as "Final Answer:" taken off). None when it has code
        to run - an answer written beside code has not seen the code's output - when a marker
        yielded nothing to run, and when it is empty."""
        if self.blocks:
            return None
        if self.solution:
            return self.solution
        if self.problem is not None:
            return None
        text, before = self.prose, None
        while text != before:  # "Assistant:\nFinal Answer: 4"
            before, text = text, _LABEL.sub("", text, count=1)
        return text.strip() or None


def split_reply(text: str) -> Reply:
    """Split ``text`` into its Python blocks (in order) and the prose outside them."""
    text = text or ""
    blocks: list[str] = []
    prose: list[str] = []
    state = _State()
    pos = span = 0
    for kind, body, start, end in _tagged(text):
        _prose_segment(text, span, pos, start, blocks, prose, state)
        pos, span = end, start
        state.marked = True
        if kind == "thought":
            state.thought = True
        elif kind == "execute":
            before = len(blocks)
            if re.search(r"^[ \t]*```", body, re.MULTILINE):  # a fence inside the tag
                _fenced(body, blocks, [], state)
            else:
                code = _tag_body(body)
                if code.strip():
                    blocks.append(code)
            if len(blocks) == before:
                state.note("empty", "<execute>")
        elif kind == "solution":
            state.solution = body.strip()
            if not state.solution:
                state.note("empty", "<solution>")
    _prose_segment(text, span, pos, len(text), blocks, prose, state)
    joined = re.sub(r"\n{3,}", "\n\n", "\n".join(ln.rstrip() for ln in prose)).strip()
    if not blocks and not state.marked and _bare_code(text):
        return Reply([text.strip()], "")
    problem = None
    if not blocks and not state.solution:
        problem = state.problem
        if problem is None and state.thought:
            problem = ("tag", "<thought>")
        if problem is None:
            loose = next((ln.strip() for ln in joined.splitlines() if _LOOSE_CODE.match(ln)), None)
            if loose is not None:
                problem = ("loose", loose[:60])
    return Reply(blocks, joined, state.solution, problem)


def extract_code(text: str) -> list[str]:
    """The Python blocks of a reply, in order (empty when it has none)."""
    return split_reply(text).blocks


class _State:
    """What one reply has shown so far: any code marker, the first problem, the solution."""

    __slots__ = ("marked", "problem", "solution", "thought")

    def __init__(self) -> None:
        self.marked = False
        self.problem: tuple[str, str] | None = None
        self.solution: str | None = None
        self.thought = False

    def note(self, kind: str, what: str) -> None:
        self.marked = True
        if self.problem is None:
            self.problem = (kind, what)


def _prose_segment(text: str, span: int, start: int, end: int, blocks: list[str],
                   prose: list[str], state: _State) -> None:
    """The text between two tags (the last began at ``span``); prose around an inline tag
    (``is <solution> 4 </solution>.``) stays on one line."""
    before = len(prose)
    _fenced(text[start:end], blocks, prose, state)
    if before and len(prose) > before and span > 0 and text[span - 1] != "\n" \
            and not text[start:end].startswith("\n"):
        prose[before - 1] = (prose[before - 1].rstrip() + " " + prose[before].lstrip()).rstrip()
        del prose[before]


def _tagged(text: str):
    """``(kind, body, start, end)`` for each tag of the reply, in order: ``execute`` and
    ``solution`` spans with their body; ``thought`` and ``close`` (a stray closing tag) with none.

    A span ends at its closing tag, at the next ``<execute>`` or ``<solution>`` (the model forgot
    to close it), or at the end of the reply (cut at the token limit)."""
    pos, n = 0, len(text)
    while pos < n:
        m = _TAG.search(text, pos)
        if m is None:
            return
        name = m["name"].lower()
        name = _SYNONYMS.get(name, name)
        if m["close"] or name == "thought":
            yield ("close" if m["close"] else "thought"), "", m.start(), m.end()
            pos = m.end()
            continue
        body_end = end = n
        nxt = _TAG.search(text, m.end())
        while nxt is not None:
            other = nxt["name"].lower()
            other = _SYNONYMS.get(other, other)
            if nxt["close"] and other == name:
                body_end, end = nxt.start(), nxt.end()
                break
            if not nxt["close"] and other != "thought":
                body_end = end = nxt.start()
                break
            nxt = _TAG.search(text, nxt.end())
        yield name, text[m.end():body_end], m.start(), end
        pos = end


def _tag_body(body: str) -> str:
    """The code of an ``<execute>`` span: on the tag's line (``<execute> print(1) </execute>``)
    or on the lines below it (dedented, a ``>>>`` session unwrapped)."""
    lines = body.split("\n")
    if lines[0].strip():  # code starts on the tag's own line: keep the lines below as they are
        lines[0] = lines[0].strip()
        return _clean(lines, 0)
    rest = lines[1:]
    indent = min((len(ln) - len(ln.lstrip()) for ln in rest if ln.strip()), default=0)
    return _clean([ln[indent:] for ln in rest], 0)


def _fenced(text: str, blocks: list[str], prose: list[str], state: _State) -> None:
    """Append the Python blocks fenced in ``text`` to ``blocks`` and the rest to ``prose``."""
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        runs = list(_TICKS.finditer(line))
        if not runs:
            prose.append(line)
            continue
        state.marked = True
        line, runs = _one_liners(line, runs, blocks, state)
        last = runs[-1] if runs else None
        if last is None or "`" in line[last.end():]:  # no fence opens here: plain prose
            if line.strip():
                prose.append(line.rstrip())
            continue
        pre, ticks, info = line[:last.start()], last.group(), line[last.end():].strip()
        indent = len(pre) if not pre.strip() else 0
        if pre.strip():
            prose.append(pre.rstrip())
        tag, first = _info(info)
        body: list[str] = [first] if first else []
        while i < len(lines):  # up to the closing fence, or the end of an unclosed last block
            close = _close(lines[i], ticks)
            if close is None:
                body.append(lines[i])
                i += 1
                continue
            code, after = close
            if code.strip():
                body.append(code)
            if after and re.fullmatch(r"[\w.+#:-]+", after):
                lines[i] = "```" + after  # a new fence opened where this one should have closed
            else:
                i += 1
                if after:
                    prose.append(after)
            break
        code = _clean(body, indent) if tag in PYTHON_TAGS else ""
        if code.strip() and (tag or not _is_output(code)):
            blocks.append(code)
        elif tag in PYTHON_TAGS:
            prose.extend(body)
            state.note("not_code" if code.strip() else "empty", "```" + tag)
        else:
            prose.extend(body)
            state.note("language", tag)


def _one_liners(line: str, runs: list, blocks: list[str], state: _State) -> tuple[str, list]:
    """Take the one-line fences (```print(1)```, ```python x = 5```) out of ``line``: the Python
    ones go to ``blocks``. Returns the rest of the line and its remaining backtick runs."""
    out, rest, k, pos = [], [], 0, 0
    while k < len(runs):
        a = runs[k]
        b = runs[k + 1] if k + 1 < len(runs) else None
        if b is None or len(a.group()) != len(b.group()):
            rest.append(a)
            k += 1
            continue
        body = line[a.end():b.start()].strip()
        tag, first = _info(body)
        if tag in PYTHON_TAGS and first:
            blocks.append(first)
        elif tag in PYTHON_TAGS:
            state.note("empty", a.group() + body + b.group())
        else:
            state.note("not_code", a.group() + body[:40] + b.group())
        out.append(line[pos:a.start()])
        pos = b.end()
        k += 2
    if not out:
        return line, rest
    out.append(line[pos:])
    kept = " ".join(part.strip() for part in out if part.strip())
    return kept, list(_TICKS.finditer(kept))


def _info(info: str) -> tuple[str, str]:
    """A fence's info string as (language, code on the fence line): ``python x = 5`` is Python
    with a first line ``x = 5``; ``{.python}``, ``python:main.py`` and ``python title="a.py"``
    are just Python; an untagged ``print(1)`` is Python too."""
    word, _, rest = info.partition(" ")
    tag = word.lower().lstrip("{.").rstrip("}").split(":")[0]
    if tag in PYTHON_TAGS:
        rest = rest.strip()
        if rest and (rest.startswith("{") or re.fullmatch(r"(\w+=(\"[^\"]*\"|'[^']*')\s*)+", rest)):
            rest = ""  # attributes, not code
        return tag, rest
    if _looks_like_code(info):
        return "", info
    return tag, ""


def _close(line: str, ticks: str) -> tuple[str, str] | None:
    """``(last code line, text after)`` when ``line`` closes a fence of ``ticks``: a fence alone,
    a fence at the end of a code line (``print(x)```, as a grammar-held model ends), or one
    followed by text (```<end_code>)."""
    stripped = line.strip()
    lead = len(stripped) - len(stripped.lstrip("`"))
    if lead:
        rest = stripped[lead:]
        if lead >= len(ticks) and "`" not in rest:
            return "", rest.replace("<end_code>", "").strip()
        return None
    trail = len(stripped) - len(stripped.rstrip("`"))
    if trail >= len(ticks):
        code = line.rstrip()[:-trail]
        if code.count("'") % 2 == 0 and code.count('"') % 2 == 0:  # not inside a string
            return code, ""
    return None


def _parse(text: str) -> ast.AST | None:
    """``ast.parse`` that never raises: a 3,000-term expression or deep nesting is beyond
    CPython's parser (RecursionError), a lone surrogate beyond its encoder (ValueError)."""
    try:
        return ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def _is_output(code: str) -> bool:
    """A bare fence that only shows values (``16``, ``[-5/2]``): output the model wrote out, not
    code to run. Code that does not parse is still code (cut short, or a bug the model should
    see)."""
    tree = _parse(code)
    return tree is not None and bool(tree.body) and all(
        isinstance(node, ast.Expr) and not isinstance(node.value, ast.Call) for node in tree.body)


def _looks_like_code(text: str) -> bool:
    """Python that does something: an assignment, a call, an import or a compound statement
    (``42`` or ``json`` parse too, but are not programs)."""
    if not text or "(" not in text and "=" not in text and "import" not in text:
        return False
    tree = _parse(text)
    if tree is None or not tree.body:
        return False
    return any(not isinstance(node, ast.Expr) or isinstance(node.value, ast.Call)
               for node in tree.body)


def _bare_code(text: str) -> bool:
    """A reply with no marker at all that is nothing but Python calling ``print``/``final_answer``
    or assigning variables (small models sometimes drop the fence). Prose never parses, and a bare
    expression such as ``42`` is an answer, not code."""
    if not text or not text.strip() or "\n" not in text.strip() and "(" not in text:
        return False
    tree = _parse(text.strip())
    if tree is None:
        return False
    for node in ast.walk(tree):  # iterative: no recursion limit on a tree that parsed
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
#: A reply with no code at all - the final answer in plain text: what the embedded model may write
#: once its blocks only repeat ones that ran before with the same output (``LoopContext.answer_now``).
ANSWER_GRAMMAR = 'root ::= [^`\\n ] [^`]*\n'


@dataclass(frozen=True, slots=True)
class Cut:
    """What was taken off a block the token limit cut: ``line`` is the first line not run (1-based),
    ``repeats`` how many ``assert`` statements were copies of an earlier one."""

    code: str
    line: int
    repeats: int


def cut_block(code: str) -> Cut:
    """The whole top-level statements of ``code``, a block the token limit cut off mid-way, less
    ``assert`` statements that repeat an earlier one word for word.

    A small model that starts listing asserts may not stop: the 1.5B wrote the same few
    ``assert`` lines until its 768 tokens ran out, mid-string, and the block failed as a
    ``SyntaxError`` - its function, which was right, never ran (HumanEval/141). A
    statement the cut reached is dropped whole: a function cut inside its body would parse
    with fewer lines and run as something it is not."""
    lines = code.splitlines()
    kept = len(lines)
    tree = None
    while kept and len(lines) - kept <= 200:  # the cut is near the end; a block is short
        try:
            tree = ast.parse("\n".join(lines[:kept]))
            break
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            kept -= 1
    body = list(tree.body) if tree is not None and kept else []
    if body and kept < len(lines) and lines[kept][:1] in (" ", "\t"):
        body.pop()  # the dropped line was inside the last statement: it is not whole
    end = (body[-1].end_lineno or 0) if body else 0
    seen: set[str] = set()
    drop: set[int] = set()
    for node in body:
        if isinstance(node, ast.Assert):
            text = "\n".join(lines[node.lineno - 1:node.end_lineno]).strip()
            if text in seen:
                drop.update(range(node.lineno - 1, node.end_lineno or node.lineno))
            seen.add(text)
    repeats = sum(1 for node in body if isinstance(node, ast.Assert) and node.lineno - 1 in drop)
    return Cut("\n".join(ln for i, ln in enumerate(lines[:end]) if i not in drop).rstrip(),
               end + 1, repeats)
