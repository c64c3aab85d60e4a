"""The same failing action, sent again and again: where small models loop (issue 26, point 6).

A 1.5B model that gets ``invalid syntax`` for ``calculate("3*x + 17 = 80")`` tends to send the
very same call until the turns run out; a CodeAct model re-sends the block that just raised. A
``Streak`` follows the action that failed last (a tool call: its name and arguments; a code
block: its text) and how many times in a row. The second identical failure in a row is said in
its result ("failed twice in a row; a third time ends the run"); a third identical send is not
run at all - the run stops there with ``status="budget"`` and the reason, the history kept (the
same way a spent budget ends it). The action working, or failing differently, starts again; so
does a call of a tool with side effects that worked in between (a file written, a command run):
the same action after the world changed is a new try, not a loop - once per such call: the same
working call made again each time (a model that alternates two edits, or sends a failing call and
a working one every turn) is part of the loop. A call of a tool marked ``side_effects=False``
(a calculator, a page tried) in between changes nothing.

It is kept by the run context, for every run - guarded or not - since a loop costs model time
whether or not anyone audits it. The success path pays one attribute store per action.
"""

from __future__ import annotations

from typing import Any

from .. import prompts

#: identical failures in a row after which the same action is refused and the run stops
LIMIT = 2
#: turns in a row that only repeat working calls (same results again), after which the next
#: reply must be an answer (``LoopContext.answer_now``): the first repeat is told, the second ends it
STALE_TURNS = 2


def call_key(name: str, arguments: Any) -> str:
    """What makes two tool calls the same action: the tool and its arguments."""
    from ..guard.policy import digest

    try:
        return digest(name, arguments)
    except (TypeError, ValueError, RecursionError):  # not JSON, nested past the stack
        return f"{name}\x00{arguments!r}"[:100_000]


def code_key(code: str) -> str:
    """What makes two code blocks the same action: their lines, without trailing blanks."""
    return "\x00code\x00" + "\n".join(line.rstrip() for line in code.strip().splitlines())


class Streak:
    """``blocked(key)`` before an action is sent, ``settle(key, failed, what)`` after: the
    note to add to its result (empty unless this failure makes ``limit`` in a row)."""

    def __init__(self, lang: str, limit: int = LIMIT):
        self.lang, self.limit = lang, limit
        self.key: str | None = None
        self.count = 0
        self.changes: set[str] = set()  # the working side-effect calls seen since it began

    def changed(self, key: str) -> bool:
        """A call with side effects worked: whether it is one not made since this streak began
        (a new change: the failing action may now work); the same call again is the loop's."""
        new = key not in self.changes
        self.changes.add(key)
        return new

    def blocked(self, key: str) -> bool:
        return self.count >= self.limit and key == self.key

    def settle(self, key: str, failed: bool, what: str) -> str:
        if not failed:
            self.count = 0
            return ""
        if key == self.key:
            self.count += 1
        else:
            self.key, self.count, self.changes = key, 1, set()
        if self.count != self.limit:
            return ""
        return prompts.render(self._texts()["failed_again"], what=what)

    def reason(self, what: str) -> str:
        """Why the run stops: the action was sent again after ``limit`` failures in a row."""
        return prompts.render(self._texts()["b_stuck"], what=what, used=str(self.count))

    def what_call(self, tool: str) -> str:
        return prompts.render(self._texts()["what_call"], tool=tool)

    def what_code(self) -> str:
        return self._texts()["what_code"]

    def _texts(self) -> dict[str, str]:
        return prompts.table("guard")["zh" if self.lang == "zh" else "en"]
