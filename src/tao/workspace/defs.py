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


_WORD = re.compile(r"[A-Za-z_$][\w$]*")


def used(text: str, kind: str, names: list[str]) -> list[str]:
    """Which of ``names`` ``text`` refers to without defining them (a call, a reference): a
    rewrite holding such a use needs the definition it left out. Python by its names read
    (``ast``; a file that does not parse, by its words), JavaScript by its words."""
    mine = set(defined(text, kind))
    words: set[str] = set()
    if kind == "python":
        try:
            words = {n.id for n in ast.walk(ast.parse(text)) if isinstance(n, ast.Name)}
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            words = set(_WORD.findall(_PY_LINE.sub("", text)))
    else:
        words = set(_WORD.findall(_JS.sub("", text)))
    return [n for n in names if n in words and n not in mine]


def hidden_methods(text: str) -> list[tuple[str, str, int]]:
    """``(class, name, line)`` for each method a ``self.name = ...`` of the same class hides
    (pylint's method-hidden): ``self.balance = 0`` in ``__init__`` beside ``def balance(self)``
    makes ``account.balance()`` "'int' object is not callable" - the bug the issue 27 filer's
    package had, which the coder's own runs never showed it."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    found = []
    for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
        methods = {n.name for n in cls.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
                   and not any(isinstance(d, ast.Name) and d.id in ("property", "staticmethod",
                                                                     "classmethod")
                               or isinstance(d, ast.Attribute) for d in n.decorator_list)}
        for node in ast.walk(cls):
            targets = node.targets if isinstance(node, ast.Assign) else \
                [node.target] if isinstance(node, (ast.AnnAssign, ast.AugAssign)) else []
            for t in targets:
                if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) \
                        and t.value.id == "self" and t.attr in methods:
                    found.append((cls.name, t.attr, t.lineno))
                    methods.discard(t.attr)
    return found
