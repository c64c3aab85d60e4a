"""What a coder owes before it says Finish: its Python run, its pages used (issue 27, point 1).

A small model writes a module and calls Finish without running it, or a page whose Remove
button throws and never clicks it; the user finds out. So ``Workspace`` keeps the files written
since they were last exercised - Python since a command last ran Python (``python3 ...``,
``pytest``), web files since ``try_page`` last ran - and ``unrun_check``, an answer check
(``Agent.answer_check``), sends the model one reminder when it answers with some left.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

#: a command that runs Python code (a script, a module, its tests)
_RUNS_PYTHON = re.compile(r"\b(python[0-9.]*|pytest)\b")
_WEB = (".html", ".htm", ".js", ".mjs", ".css")


class FinishChecks:
    """The bookkeeping, mixed into ``Workspace`` (which provides ``_say``, ``_commands`` and
    its tools)."""

    _say: Any
    _commands: Any
    root: Any

    def _checks_start(self) -> None:
        self._unrun: dict[str, None] = {}  # Python files written since a command ran Python
        self._untried: dict[str, None] = {}  # web files written since try_page last ran

    def _written(self, path: str) -> None:
        if path.endswith(".py"):
            self._unrun[path] = None
        elif path.lower().endswith(_WEB):
            self._untried[path] = None

    def _ran(self, command: str, silent: bool = False) -> str:
        """A command that ran Python counts as the check - unless it printed nothing and exited
        0: ``python3 wordcount.py FILE`` on a module of functions calls none of them, and the
        model took the silence for success. Then a note says how to call one, and the files
        stay owed. Returns the note ("" for none)."""
        if not _RUNS_PYTHON.search(command):
            return ""
        if silent and self._unrun:
            return "\n" + str(self._say("ran_silent", how=self._how(list(self._unrun), call=True)))
        self._unrun.clear()
        return ""

    def _tried(self) -> None:
        self._untried.clear()

    def unrun_check(self, answering: Any) -> str | None:
        """The answer check: web files never tried with ``try_page`` (where it exists), else
        Python files never run (where ``run_command`` exists), get one reminder naming them
        and how to check them; ``None`` when all was exercised."""
        if self._untried and "try_page" in self:  # type: ignore[operator]
            note = str(self._say("finish_untried", files=", ".join(list(self._untried)[:5])))
        elif self._commands is None or not self._unrun:
            return None
        else:
            files = list(self._unrun)
            note = str(self._say("finish_unrun", files=", ".join(files[:5]), how=self._how(files)))
        checklist = getattr(answering, "checklist", ())
        if checklist:  # what to check is what the run's checklist said a user will check
            note += str(self._say("finish_checklist", items="\n".join(
                f"{n}. {item}" for n, item in enumerate(checklist, 1))))
        return note

    def _how(self, files: list[str], call: bool = False) -> str:
        """The command to suggest: the tests if any were written; a script (a main block, or
        no functions), run; else a module's function called on an example - running a module
        that only defines functions shows nothing. ``call``: the script ran silent, so a
        function of it is called even so."""
        if any(f.rsplit("/", 1)[-1].startswith("test") for f in files):
            return "python3 -m pytest -q"
        last = files[-1]
        try:
            text = (Path(self.root) / last).read_text(encoding="utf-8", errors="replace")
        except OSError:
            text = ""
        if "/" in last or "def " not in text or ("__main__" in text and not call):  # run it
            return f"python3 {last}"
        module = last[:-3]
        return f'python3 -c "import {module}; print({module}.FUNCTION(EXAMPLE))"'.replace(
            "FUNCTION(EXAMPLE)", self._say("finish_call"))
