"""The names a source file defines at its top level: what a whole-file rewrite can drop.

Python is read with ``ast`` (a file that does not parse is read line by line, so a half-written
module still counts); JavaScript by its declarations (``function f(``, ``class C``, ``const f =
(...) =>`` or ``= function``). Cheap and conservative: a name it misses is only a note not said.
"""

from __future__ import annotations

import ast
import re

_PY_LINE = re.compile(r"^(?:async\s+)?(?:def|class)\s+([A-Za-z_]\w*)", re.MULTILINE)
_JS = re.compile(r"^\s*(?:export\s+)?(?:(?:async\s+)?function\s*\*?\s*([A-Za-z_$][\w$]*)\s*\("
                 r"|class\s+([A-Za-z_$][\w$]*)"
                 r"|(?:const|let|var)\s+([A-Za-z_$][\w$]*)\s*=\s*(?:async\s+)?"
                 r"(?:function\b|\([^()]*\)\s*=>|[A-Za-z_$][\w$]*\s*=>))", re.MULTILINE)
_KINDS = {".py": "python", ".js": "js", ".mjs": "js", ".html": "js", ".htm": "js"}


def defined(text: str, kind: str) -> list[str]:
    """The top-level functions and classes of ``text`` (``kind``: "python" or "js"), in order."""
    if kind == "python":
        try:
            tree = ast.parse(text)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return list(dict.fromkeys(_PY_LINE.findall(text)))
        return [n.name for n in tree.body
                if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
    return list(dict.fromkeys(next(g for g in m.groups() if g) for m in _JS.finditer(text)))


def kind_of(name: str) -> str | None:
    """Which reading fits a file called ``name`` (None: not a source file this reads)."""
    dot = name.rfind(".")
    return _KINDS.get(name[dot:].lower()) if dot > 0 else None
