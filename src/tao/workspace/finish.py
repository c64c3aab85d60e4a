"""What a coder owes before it says Finish: its Python run, its pages used (issue 27, point 1).

A small model writes a module and calls Finish without running it, or a page whose Remove
button throws and never clicks it; the user finds out. So ``Workspace`` keeps the files written
since they were last exercised - Python until a command that ran Python (``python3 ...``,
``pytest``) called each function and class the file defines, web files until ``try_page`` ran.
Six answer checks (``Agent.answer_check``) each send the model one reminder a run:
``files_check`` (a file or folder the task names by path, missing), ``unrun_check`` (never
run, never tried), ``commands_check`` (a command the task shows, never run), ``outputs_check`` (one that
printed other than the task says), ``named_check`` (a name the task asks for that no
file defines, or a package does not export) and ``uncalled_check`` (what no run called).
"Called" is read from the text of what ran: the command itself, the script it runs, the test
files pytest collects. A module whose ``to_roman`` was tried while its ``from_roman`` never was
is where the bug stayed (the coder's runs, 2026-12-07).
"""

from __future__ import annotations

import ast
import os
import re
from pathlib import Path
from typing import Any

from . import safe_path
from .defs import defined

#: a command that runs Python code (a script, a module, its tests)
_RUNS_PYTHON = re.compile(r"\b(python[0-9.]*|pytest)\b")
_WEB = (".html", ".htm", ".js", ".mjs", ".css")
_SCRIPT = re.compile(r"([\w./-]+\.py)\b")
_NAME = re.compile(r"[A-Za-z_]\w*")
_DEFINING = re.compile(r"^\s*(?:async\s+)?(?:def|class)\s+([A-Za-z_]\w*)", re.MULTILINE)
_READ_CAP = 200_000  # bytes of a script or test file read for the names it calls
_WALK_CAP = 5_000  # entries looked at when the workspace is searched for .py files
_SKIP_DIRS = {"node_modules", "__pycache__", "venv", "site-packages"}


#: a name the task writes as a call, ``count_words(text)``: a function or class it asks for
_ASKED = re.compile(r"(?<![\w.])([A-Za-z_][A-Za-z0-9_]*)\(")
_NOT_ASKED = frozenset({"print", "len", "int", "str", "float", "list", "dict", "set", "tuple",
                        "range", "open", "input", "sorted", "sum", "min", "max", "abs", "round",
                        "type", "isinstance", "ValueError", "TypeError", "KeyError", "Exception"})


#: a file the task names by its path (``tests/test_bank.py``, ``index.html``), or a folder
#: written with its slash (``shapes/``)
_FILE = re.compile(r"(?<![\w/.-])((?:[\w-]+/)*[\w-]+\.(?:py|html|htm|js|css|json|md|txt|toml|cfg))"
                   r"(?![\w/-])")
#: a command the task shows in backquotes (`python primes.py 10`): its users will type it
_TASK_COMMAND = re.compile(r"`((?:python[0-9.]*|pytest|node|npm)(?:\s[^`\n]*)?)`")
#: a command the task shows with what it prints: `python primes.py 10` prints `2 3 5 7`
_TASK_EXAMPLE = re.compile(r"`((?:python[0-9.]*|node)\s[^`\n]+)`\s*(?:prints|outputs|shows|"
                           r"should print|会?打印出?|会?输出)\s*`([^`\n]+)`")
_NOT_FILES = frozenset({"node.js", "vue.js", "next.js", "nuxt.js", "react.js", "express.js",
                        "chart.js", "three.js", "d3.js", "p5.js", "alpine.js", "ember.js"})
_FOLDER = re.compile(r"(?<![\w/.-])([A-Za-z_][\w-]*)/(?![\w/.-])")


def _all_defined(text: str) -> set[str]:
    """Every function, method and class ``text`` defines, at any depth."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return set(_DEFINING.findall(text))
    return {n.name for n in ast.walk(tree)
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}


def _call(text: str, name: str, example: str) -> str:
    """How to try ``name`` of a module's ``text``: a function called on an example; a class
    made (with the example only if its ``__init__`` needs arguments) and its first public
    method called - calling a class on "an example" made the model give ``__init__`` a
    parameter the task never asked for (2026-12-07)."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        tree = None
    cls = next((n for n in getattr(tree, "body", ()) if isinstance(n, ast.ClassDef) and n.name == name),
               None)
    if cls is None:
        return f"print({name}({example}))"
    methods = {n.name: n for n in cls.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    made = f"{name}({example if _needs(methods.get('__init__')) else ''})"
    public = [m for m in methods if not m.startswith("_")]
    if not public:
        return f"print({made})"
    first = public[0]
    return f"x = {made}; print(x.{first}({example if _needs(methods[first]) else ''}))"


def _needs(fn: ast.FunctionDef | ast.AsyncFunctionDef | None) -> bool:
    """Whether a method takes arguments beyond ``self`` that have no default."""
    if fn is None:
        return False
    args = fn.args.posonlyargs + fn.args.args
    return len(args) - 1 > len(fn.args.defaults)


def _only_defines(text: str) -> bool:
    """Whether a script does nothing when run: only imports, definitions and constants at its
    top level (no call, no ``if __name__ == "__main__":``)."""
    try:
        body = ast.parse(text).body if text else []
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    quiet = (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef,
             ast.Assign, ast.AnnAssign)
    return bool(body) and all(isinstance(n, quiet) or isinstance(n, ast.Expr)
                              and isinstance(n.value, ast.Constant) for n in body)


def _words(command: str) -> list[str]:
    """A command's words as one program would read them: ``python3`` is ``python`` (the
    sandbox's are one interpreter), and ``python -m pytest`` is ``pytest``."""
    words = command.split()
    if words and words[0].startswith("python"):
        words[0] = "python"
        if words[1:2] == ["-m"] and len(words) > 2:
            words = words[2:]
    return words


def _printed(out: str) -> str:
    """What a command printed: its output less the closing status line ("[exit status 0]")."""
    lines = out.rstrip("\n").split("\n")
    if lines and lines[-1].startswith("[") and lines[-1].endswith("]"):
        lines.pop()
    return "\n".join(lines)


def _head(command: str) -> tuple[str, ...]:
    """A command's program and the script it runs, its options left out: ``python3 primes.py
    10`` and ``python primes.py 20`` are one, and so are ``pytest`` and ``python3 -m pytest -q``."""
    return tuple(w for w in _words(command) if not w.startswith("-"))[:2]


def _is_test(path: str) -> bool:
    name = path.rsplit("/", 1)[-1]
    return name.startswith("test") or name.endswith("_test.py") or name == "conftest.py"


class FinishChecks:
    """The bookkeeping, mixed into ``Workspace`` (which provides ``_say``, ``_commands`` and
    its tools)."""

    _say: Any
    _commands: Any
    root: Any

    def _checks_start(self) -> None:
        #: Python files owed a run: None until a command ran Python since the file was
        #: written, then the names of it that the runs since called
        self._unrun: dict[str, set[str] | None] = {}
        self._untried: dict[str, None] = {}  # web files written since try_page last ran
        self._commands_run: list[tuple[str, str]] = []  # every run_command's, with its output

    def _written(self, path: str, appended: bool = False) -> None:
        """A write makes the file owed a run again; lines appended leave what ran before
        called (the functions above them are as they were)."""
        if path.endswith(".py"):
            if not (appended and self._unrun.get(path) is not None):
                self._unrun[path] = None
        elif path.lower().endswith(_WEB):
            self._untried[path] = None

    def _ran(self, command: str, out: str = "", silent: bool = False) -> str:
        """A command that ran Python pays for the files whose functions and classes it called -
        unless it printed nothing and exited 0: ``python3 wordcount.py FILE`` on a module of
        functions calls none of them, and the model took the silence for success. Then a note
        says how to call one, and the files stay owed. Returns the note ("" for none)."""
        self._commands_run.append((command, out))
        if not _RUNS_PYTHON.search(command):
            return ""
        unrun = [p for p, seen in self._unrun.items() if seen is None]
        scripts = [p for p in _SCRIPT.findall(command) if _only_defines(self._head(p))]
        if silent and scripts:  # run as a command, a module with no command line: said first
            return "\n" + str(self._say("ran_no_main", script=scripts[0],
                                         how=self._how(scripts[:1], call=True)))
        if silent and unrun:
            return "\n" + str(self._say("ran_silent", how=self._how(unrun, call=True)))
        called = self._called_by(command)
        for path, seen in self._unrun.items():
            self._unrun[path] = (seen or set()) | called
        return ""

    def _called_by(self, command: str) -> set[str]:
        """The names a Python command may call: those in it, in the scripts it names (their
        own ``def``/``class`` lines aside), and under pytest in every test file."""
        texts = [command]
        paths = set(_SCRIPT.findall(command))
        if "pytest" in command:
            paths |= {p for p in self._unrun if _is_test(p)} | self._test_files()
        texts += [_DEFINING.sub("", self._head(rel)) for rel in paths]
        return {n for text in texts for n in _NAME.findall(text)}

    def _test_files(self) -> set[str]:
        return {p for p in self._py_files() if _is_test(p)}

    def _names(self, path: str) -> list[str]:
        """The public functions and classes ``path`` defines at its top level."""
        return [n for n in defined(self._head(path), "python") if not n.startswith("_")]

    def _uncalled(self, path: str, seen: set[str]) -> list[str]:
        return [n for n in self._names(path) if n not in seen]

    def _tried(self) -> None:
        self._untried.clear()

    def unrun_check(self, answering: Any) -> str | None:
        """The answer check: web files never tried with ``try_page`` (where it exists), else
        Python files never run (where ``run_command`` exists), get one reminder naming them
        and how to check them; ``None`` when all was exercised."""
        if self._untried and "try_page" in self:  # type: ignore[operator]
            note = str(self._say("finish_untried", files=", ".join(list(self._untried)[:5])))
        elif self._commands is None:
            return None
        elif any(seen is None for seen in self._unrun.values()):
            files = [p for p, seen in self._unrun.items() if seen is None]
            note = str(self._say("finish_unrun", files=", ".join(files[:5]), how=self._how(files)))
        else:
            return None
        return note + self._checklist_note(answering)

    def uncalled_check(self, answering: Any) -> str | None:
        """A second answer check, with a reminder of its own: once every Python file ran, the
        functions and classes no run called (``to_roman`` tried, ``from_roman`` never)."""
        if self._commands is None or any(seen is None for seen in self._unrun.values()):
            return None
        owed = [(n, p) for p, seen in self._unrun.items() if not _is_test(p)
                for n in self._uncalled(p, seen or set())]
        if not owed:
            return None
        names = ", ".join(f"{n} ({p})" for n, p in owed[:6])
        how = self._how([owed[0][1]], call=True, name=owed[0][0])
        return str(self._say("finish_uncalled", names=names, how=how)) + self._checklist_note(answering)

    def named_check(self, answering: Any) -> str | None:
        """An answer check: the functions and classes the task names (``count_words(text)``,
        ``Circle(radius)``) that no Python file of the workspace defines - tests that import
        them by name fail on the first line. ``None`` when all are there, or no Python was
        written."""
        asked = dict.fromkeys(n for n in _ASKED.findall(answering.task or "") if n not in _NOT_ASKED)
        files = [p for p in self._py_files() if not _is_test(p)]
        if not asked or not files:
            return None
        anywhere: set[str] = set()
        top: dict[str, list[str]] = {}  # a name -> the files that define it at their top level
        for path in files:
            text = self._head(path)
            anywhere |= _all_defined(text)
            for name in defined(text, "python"):
                top.setdefault(name, []).append(path)
        missing = [n for n in asked if n not in anywhere]
        if missing:
            return str(self._say("finish_unnamed", names=", ".join(missing[:6])))
        for name in asked:
            hidden = self._unexported(name, top.get(name, []))
            if hidden:
                return str(self._say("finish_unexported", name=name, path=hidden[0],
                                     package=hidden[1], module=hidden[2]))
        return None

    def files_check(self, answering: Any) -> str | None:
        """An answer check: the files and folders the task names by path (``tests/test_bank.py``,
        ``shapes/``) that the workspace lacks - the coder finished a package without the tests
        the task asked for, and its users find no file where the task said (2026-12-07)."""
        task = answering.task or ""
        named = [*(f for f in _FILE.findall(task) if f.lower() not in _NOT_FILES),
                 *(f"{d}/" for d in _FOLDER.findall(task))]
        missing = [p for p in dict.fromkeys(named)  # "a folder with __init__.py": in the folder
                   if p != "__init__.py" and not self._exists(p)]
        if not missing:
            return None
        return str(self._say("finish_files", paths=", ".join(missing[:6])))

    def commands_check(self, answering: Any) -> str | None:
        """An answer check: a command the task shows (`python primes.py 10` prints `2 3 5 7`)
        that no ``run_command`` ran - the program and its script, whatever the arguments. The
        coder called the module's functions, saw them right and finished; the command line the
        task asked for was never written (2026-12-07), and only running it shows that."""
        if self._commands is None:
            return None
        ran = [_head(c) for c, _ in self._commands_run]
        owed = [c for c in dict.fromkeys(_TASK_COMMAND.findall(answering.task or ""))
                if not any(h[:len(_head(c))] == _head(c) for h in ran)]
        if not owed:
            return None
        return str(self._say("finish_command", command=owed[0])) + self._checklist_note(answering)

    def outputs_check(self, answering: Any) -> str | None:
        """An answer check: the task shows what a command prints (`python primes.py 10` prints
        `2 3 5 7`), a run of that very command printed something else (``[2, 3, 5, 7]``: the
        coder saw it and finished, 2026-12-07). Compared word by word; a command never run
        this way is ``commands_check``'s."""
        for command, expected in _TASK_EXAMPLE.findall(answering.task or ""):
            outs = [out for c, out in self._commands_run if _words(c) == _words(command)]
            if outs and _words(_printed(outs[-1])) != _words(expected):
                got = " ".join(_printed(outs[-1]).split())[:200] or str(self._say("no_output"))
                return str(self._say("finish_output", command=command, expected=expected, got=got))
        return None

    def _exists(self, path: str) -> bool:
        """Whether the workspace has ``path`` (a folder when it ends with ``/``), looked up as
        the tools look: inside the root, no link followed."""
        try:
            parts = safe_path.parts_of(path.rstrip("/"))
        except (safe_path.Refused, ValueError):
            return True  # not a path the tools could make: nothing to remind of
        where = Path(self.root).joinpath(*parts)
        if any(p.is_symlink() for p in [where, *where.parents][: len(parts)]):
            return False
        return where.is_dir() if path.endswith("/") else where.is_file()

    def _unexported(self, name: str, paths: list[str]) -> tuple[str, str, str] | None:
        """``(file, package, module)`` when ``name`` is defined only in a module of a package
        whose ``__init__.py`` never mentions it: ``from shapes import Circle`` then gives the
        module ``shapes.circle`` or fails, though the class is written."""
        if not paths or any("/" not in p or p.endswith("/__init__.py") for p in paths):
            return None
        path = paths[0]
        package, _, module = path[:-3].rpartition("/")
        init = f"{package}/__init__.py"
        if not (Path(self.root) / init).is_file() or re.search(rf"\b{name}\b", self._head(init)):
            return None
        return path, package, module

    def _py_files(self) -> list[str]:
        """The workspace's .py files (at most 50), found without following links or entering
        hidden folders, ``node_modules`` and the like; a workspace of any size is cut short."""
        found: list[str] = []
        seen = 0
        for folder, dirs, names in os.walk(self.root, followlinks=False):
            dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in _SKIP_DIRS)
            rel = os.path.relpath(folder, self.root)
            for name in sorted(names):
                seen += 1
                if name.endswith(".py"):
                    found.append(name if rel == "." else f"{rel}/{name}".replace(os.sep, "/"))
                if len(found) >= 50 or seen >= _WALK_CAP:
                    return found
        return found

    def _checklist_note(self, answering: Any) -> str:
        """What to check is what the run's checklist said a user will check, where it has one."""
        checklist = getattr(answering, "checklist", ())
        if not checklist:
            return ""
        return str(self._say("finish_checklist", items="\n".join(
            f"{n}. {item}" for n, item in enumerate(checklist, 1))))

    def _how(self, files: list[str], call: bool = False, name: str | None = None) -> str:
        """The command to suggest: the tests if any were written; a script (a main block, or
        no functions), run; else a function of the module called on an example - running a
        module that only defines functions shows nothing. ``call``: call one even so (the
        script ran silent, or left it uncalled); ``name``: which. A module of a package is
        imported from the package, as its users will (``from shapes import Circle``)."""
        if any(_is_test(f) for f in files):
            return "python3 -m pytest -q"
        last = files[-1]
        names = self._names(last)
        if not names or ("__main__" in self._head(last) and not call):
            return f"python3 {last}"
        name = name or names[0]
        example = str(self._say("finish_call"))
        folder, _, module = last[:-3].rpartition("/")
        if folder and not (Path(self.root) / folder / "__init__.py").is_file():
            return f"python3 {last}"
        where = folder.replace("/", ".") if folder else module
        return f'python3 -c "from {where} import {name}; {_call(self._head(last), name, example)}"'

    def _head(self, path: str) -> str:
        """A workspace file's text ("" when it cannot be read: gone, a folder, a link, a FIFO a
        command made, over 200 KB) - read as the tools read, never outside the workspace."""
        try:
            data = safe_path.read_bytes(str(self.root), path.split("/"), _READ_CAP)
        except (safe_path.Refused, OSError, ValueError):
            return ""
        return data.decode("utf-8", "replace")
