"""The terminal's side of human approval: ``TerminalApprover`` (what ``tao run/code/chat`` ask
with). ``SCREEN`` (``tao.sinks.screen``) is the live displays it holds still while it asks."""

from __future__ import annotations

import sys
from typing import Any

from .. import prompts
from ..safe_json import dumps
from ..sinks.screen import SCREEN, Screen  # noqa: F401 - Screen re-exported
from .approval import ApprovalRequest, Decision




def _read_line(prompt: str) -> str:  # the fallback where stdin cannot be watched
    """``input(prompt)``, kept out of readline's history: in ``tao chat`` a y / n / reason typed
    here must not come back as a task on the up arrow (nor be saved with the chat's lines)."""
    text = input(prompt)
    readline = sys.modules.get("readline")
    if readline is not None and text:
        n = readline.get_current_history_length()
        if n and readline.get_history_item(n) == text:
            readline.remove_history_item(n - 1)
    return text


class TerminalApprover:
    """Asks on the terminal: the batch listed together, then y / n (and a reason) / e (new JSON
    arguments) for each. The terminal is read on the event loop (the other steps of a plan keep
    running), so a Ctrl-C at the question stops the run at once - a thread blocked in
    ``input()`` would hold the process until Enter. ``read(prompt)``: a reader of your own
    instead (run in a thread)."""

    by = "terminal"

    def __init__(self, lang: str = "en", read: Any = None, write: Any = None):
        self.t = prompts.table("guard")[lang if lang == "zh" else "en"]
        self.read = read
        self.write = write or (lambda s: print(s, file=_screen(), flush=True))

    async def decide(self, requests: list[ApprovalRequest]) -> list[Decision]:
        async with _one_question():  # two runs asking at once (parallel sub-agents) take turns
            with SCREEN.held():  # a live view drawn over the question would garble it
                return await self._ask_batch(requests)

    async def _line(self, prompt: str) -> str:
        if self.read is not None:
            import asyncio

            return await asyncio.to_thread(self.read, prompt)
        return await read_terminal(prompt)

    async def _ask_batch(self, requests: list[ApprovalRequest]) -> list[Decision]:
        t = self.t
        self.write(prompts.render(t["ask_header"], n=str(len(requests))))
        for i, r in enumerate(requests, 1):
            self.write(prompts.render(t["ask_one"], i=str(i), tool=r.tool,
                                      arguments=dumps(r.arguments), reason=r.reason))
        decisions = []
        for i, r in enumerate(requests, 1):
            try:
                decisions.append(await self._ask(i, r))
            except EOFError:  # the terminal went away: no one can answer
                decisions.append(Decision.reject(self.t["auto_reject"]))
        return decisions

    async def _ask(self, i: int, r: ApprovalRequest) -> Decision:
        from ..safe_json import loads

        while True:
            answer = (await self._line(prompts.render(self.t["ask"], i=str(i), tool=r.tool))
                      ).strip().lower()
            if answer in ("y", "yes", "是"):
                return Decision.approve()
            if answer in ("n", "no", "否"):
                return Decision.reject((await self._line(self.t["ask_reason"])).strip())
            if answer in ("e", "edit", "改"):
                while text := (await self._line(self.t["ask_edit"])).strip():  # empty: back
                    try:
                        value = loads(text)
                        if not isinstance(value, dict):
                            raise ValueError("not an object")
                        return Decision.edit(value)
                    except ValueError as e:
                        self.write(prompts.render(self.t["bad_edit"], error=str(e)))


_QUESTIONS: Any = None


def _one_question() -> Any:
    """The lock that gives the terminal to one batch of questions at a time, on this loop."""
    import asyncio
    import weakref

    global _QUESTIONS
    if _QUESTIONS is None:
        _QUESTIONS = weakref.WeakKeyDictionary()
    loop = asyncio.get_running_loop()
    if loop not in _QUESTIONS:
        _QUESTIONS[loop] = asyncio.Lock()
    return _QUESTIONS[loop]


def _screen() -> Any:
    """Where the question goes: stderr, unless only stdout is the terminal (``2> log``), so the
    person at the terminal sees what they are asked."""
    for stream in (sys.stderr, sys.stdout):
        try:
            if stream is not None and stream.isatty():
                return stream
        except (ValueError, OSError):
            continue
    return sys.stderr


async def read_terminal(prompt: str) -> str:
    """One line typed on the terminal (stdin), read as it becomes readable on the event loop:
    cancelling the await (Ctrl-C) stops the read with nothing left behind. The terminal's own
    line editing (canonical mode) serves; ``EOFError`` at end of input."""
    import asyncio
    import os

    loop = asyncio.get_running_loop()
    out = _screen()
    out.write(prompt)
    out.flush()
    try:
        fd = sys.stdin.fileno()
    except (AttributeError, ValueError, OSError):
        raise EOFError from None
    got: asyncio.Future[bytes] = loop.create_future()
    line = bytearray()

    def readable() -> None:
        try:
            chunk = os.read(fd, 4096)
        except BlockingIOError:
            return
        except OSError:
            chunk = b""
        line.extend(chunk)
        if (not chunk or b"\n" in chunk) and not got.done():
            got.set_result(bytes(line))

    try:
        loop.add_reader(fd, readable)
    except (NotImplementedError, ValueError, OSError):  # not watchable here: read in a thread
        return await asyncio.to_thread(_read_line, "")
    try:
        data = await got
    finally:
        loop.remove_reader(fd)
    if not data:
        raise EOFError
    return data.split(b"\n", 1)[0].decode("utf-8", "replace").rstrip("\r")
