"""After a run: the workspace checked the way its user will, and put back as it was (issue 27).

``Attempts`` (``tao.agents.attempts``) runs the coder again when its work fails a check the
run did not write itself. Those checks are here, and need no model:

- the files and folders the task names by path, and the functions and classes it names
  (the answer checks ``files_check`` and ``named_check``);
- every ``.py`` file parses;
- with a sandbox: the project's tests pass (``python3 -m pytest -q`` where there are test
  files), and each command the task shows in backquotes (`python primes.py 10`) exits 0 and
  prints what the task says it prints (one with a placeholder such as ``FILE`` is skipped, and
  one still running after 60 s - a server - says nothing either way);
- with Chromium: each page, opened confined as ``try_page`` opens it, takes a number in every
  input box and a click on every button, twice over (so buttons the first clicks made, such as
  a list item's Remove, are clicked too) and an arrow key, and nothing throws; where it has
  buttons and no canvas, what it shows changes (a page that answers with ``alert()``, or not
  at all, shows nothing new).

``save()`` / ``restore(saved)``: the files of the folder (and the tools' bookkeeping) as they
were, so a new attempt starts where the first did. A restore writes back what differs and
removes what the runs added; it never touches a link that was there before.
"""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from . import safe_path

#: what one ``save`` may hold: a folder bigger than this is someone's project, not a scratch
#: workspace, and is not copied into memory
SAVE_CAP_BYTES = 64 << 20
SAVE_CAP_FILES = 2000
_CACHES = {"__pycache__", ".pytest_cache"}
COMMAND_TIMEOUT_S = 60  # one command the task shows; the project's tests get twice that
#: an argument the user fills in: `python wordcount.py FILE`, `python primes.py N`, `<path>`
_PLACEHOLDER = re.compile(r"(?<![\w.-])[A-Z][A-Z_]*(?![\w.-])|<[^>]+>|\.\.\.")
_SMOKE = [{"op": "wait", "ms": 1}, {"op": "typeeach"}, {"op": "clickeach"},
          {"op": "typeeach"}, {"op": "clickeach"}, {"op": "press", "arg": "ArrowRight"}]


@dataclass
class Saved:
    """A workspace as ``save`` found it."""

    files: dict[str, bytes] = field(default_factory=dict)
    links: dict[str, str] = field(default_factory=dict)  # path -> where the link points
    dirs: set[str] = field(default_factory=set)
    wrote: dict[str, str] = field(default_factory=dict)
    made: int = 0


class Verify:
    """Mixed into ``Workspace`` (which provides the root, the sandbox and the answer checks)."""

    root: Path
    _commands: Any
    _wrote: dict[str, str]
    _read_ours: dict[str, bool]
    _made: int
    _say: Any
    files_check: Any
    named_check: Any
    _checks_start: Any
    _py_files: Any
    _head: Any
    _owner: Any

    # -- save and restore -------------------------------------------------------------------
    def save(self) -> Saved:
        """The folder's files now (caches left out), or ``ValueError`` past the caps."""
        saved = Saved(wrote=dict(self._wrote), made=self._made)
        size = 0
        for rel, path in _walk(self.root):
            if path.is_symlink():
                saved.links[rel] = os.readlink(path)
                continue
            if path.is_dir():
                saved.dirs.add(rel)
                continue
            if not path.is_file():
                continue
            data = path.read_bytes()
            size += len(data)
            if size > SAVE_CAP_BYTES or len(saved.files) >= SAVE_CAP_FILES:
                raise ValueError(f"{self.root} holds more than {SAVE_CAP_BYTES >> 20} MiB or "
                                 f"{SAVE_CAP_FILES} files: too much to keep a copy of between "
                                 "attempts; use an empty folder")
            saved.files[rel] = data
        return saved

    def restore(self, saved: Saved) -> None:
        """The folder as ``saved``: files the runs added removed, changed ones written back."""
        for rel, path in sorted(_walk(self.root), key=lambda p: -p[0].count("/")):
            link = path.is_symlink()
            if (rel in saved.links and link and os.readlink(path) == saved.links[rel]) or \
                    (rel in saved.dirs and path.is_dir() and not link) or \
                    (rel in saved.files and path.is_file() and not link):
                continue  # as it was (a file's content is compared below)
            if link or not path.is_dir():
                path.unlink(missing_ok=True)
            elif path.name in _CACHES or rel in saved.files or rel in saved.links:
                shutil.rmtree(path, ignore_errors=True)  # never follows a link inside
            else:
                try:
                    path.rmdir()  # empty by now, unless it holds what was there before
                except OSError:
                    pass
        for rel in sorted(saved.dirs, key=lambda d: d.count("/")):
            (self.root / rel).mkdir(exist_ok=True)
        for rel, target in saved.links.items():
            if not (self.root / rel).is_symlink():
                os.symlink(target, self.root / rel)
        for rel, data in saved.files.items():
            path = self.root / rel
            if not path.is_file() or path.read_bytes() != data:
                safe_path.write_atomic(str(self.root), rel.split("/"), data, owner=self._owner)
        self._checks_start()
        self._wrote, self._read_ours, self._made = dict(saved.wrote), {}, saved.made

    # -- the checks -------------------------------------------------------------------------
    async def verify(self, task: str, result: Any = None) -> list[str]:
        """What a user of the project would find wrong, as text (empty: nothing found)."""
        asking = SimpleNamespace(task=task, checklist=())
        problems = [said for check in (self.files_check, self.named_check)
                    if (said := check(asking))]
        from .tools import _python_error

        for path in self._py_files():
            error = _python_error(self._head(path))
            if error:
                problems.append(str(self._say("verify_syntax", path=path, error=error)))
        if self._commands is not None and not problems:
            problems += await self._run_checks(task)
        problems += self._page_checks()
        return problems

    async def _run_checks(self, task: str) -> list[str]:
        from .finish import _TASK_COMMAND, _TASK_EXAMPLE, _is_test, _printed, _words

        problems: list[str] = []
        if any(_is_test(p) for p in self._py_files()):
            code, out = await self._commands.status("python3 -m pytest -q -x -p no:cacheprovider",
                                                    2 * COMMAND_TIMEOUT_S)
            if code != 0:
                problems.append(str(self._say("verify_tests", out=_pytest_tail(out))))
        expected = {c: e for c, e in _TASK_EXAMPLE.findall(task)}
        for command in dict.fromkeys(_TASK_COMMAND.findall(task)):
            if _PLACEHOLDER.search(command.split(None, 1)[-1] if " " in command else ""):
                continue  # `python wordcount.py FILE`: the user puts a file there
            if command.split()[0] == "pytest" and problems:
                continue
            code, out = await self._commands.status(command, COMMAND_TIMEOUT_S)
            if code is None:
                continue  # still running after 60 s: a server, or a loop - no verdict either way
            if code != 0:
                problems.append(str(self._say("verify_command", command=command, out=_tail(out))))
            elif command in expected and _words(_printed(out)) != _words(expected[command]):
                problems.append(str(self._say("verify_output", command=command,
                                              expected=expected[command],
                                              got=" ".join(_printed(out).split())[:200])))
        return problems

    def _page_checks(self) -> list[str]:
        from . import page, page_try

        pages = [p for p in ("index.html",) if (self.root / p).is_file()] or \
            sorted(p.name for p in self.root.glob("*.htm*") if p.is_file())[:2]
        if not pages or page.chromium() is None:
            return []
        problems: list[str] = []
        for name in pages:
            if not page.ready(self.root, name):
                problems.append(str(self._say("verify_page_files", page=name)))
                continue
            try:
                done = page_try.try_steps(self.root, name, [dict(s) for s in _SMOKE])
            except page_try.StepError:
                continue
            if done is None:
                continue  # no Chromium result (a page that navigated away): nothing to say
            errors = list(dict.fromkeys(e["text"] for e in done["errors"]))[:3]
            if errors:
                problems.append(str(self._say("verify_page_errors", page=name,
                                              errors="; ".join(e[:200] for e in errors))))
                continue
            said = [o["said"] for o, s in zip(done["out"], _SMOKE) if s["op"] == "clickeach"]
            changed = "changed" in said or len({o.get("sum") for o in done["out"]}) > 1
            canvas = "<canvas" in self._head(name).lower()
            if any(s != "no_button" for s in said) and not changed and not canvas:
                problems.append(str(self._say("verify_page_still", page=name)))
        return problems


def _walk(root: Path) -> list[tuple[str, Path]]:
    """Every entry under ``root`` as (relative path, path), folders too; links not followed;
    the caches a run leaves (``__pycache__``, ``.pytest_cache``) not entered."""
    found: list[tuple[str, Path]] = []
    for folder, dirs, names in os.walk(root, followlinks=False):
        rel_folder = os.path.relpath(folder, root)
        keep = []
        for d in dirs:
            rel = d if rel_folder == "." else f"{rel_folder}/{d}".replace(os.sep, "/")
            found.append((rel, Path(folder) / d))
            if d not in _CACHES and not (Path(folder) / d).is_symlink():
                keep.append(d)
        dirs[:] = keep
        for n in names:
            rel = n if rel_folder == "." else f"{rel_folder}/{n}".replace(os.sep, "/")
            found.append((rel, Path(folder) / n))
    return found


def _tail(out: str, lines: int = 6) -> str:
    """The last lines of a command's output, where pytest and Python put what failed; pytest's
    rules of ``=`` and ``!`` left out (a small model told the problems copies them back)."""
    kept = [line.strip().strip("=! ").strip() for line in out.rstrip().splitlines()]
    kept = [line for line in kept if line and not line.startswith("short test summary")]
    return " / ".join(kept[-lines:])[:400]


def _pytest_tail(out: str) -> str:
    """What a failed pytest run says matters: its ``E`` lines (what was asserted and got), the
    ``FAILED``/``ERROR`` lines and the count; the rest is where it happened."""
    lines = out.splitlines()
    said = [line.strip() for line in lines if line.lstrip().startswith("E ")][:3]
    said += [line.strip() for line in lines if line.startswith(("FAILED ", "ERROR "))][:3]
    return " / ".join(dict.fromkeys(said))[:400] if said else _tail(out)
