"""The sandbox behind ``Workspace.run_command``: made on the first command, one at a time, closed
with the workspace; and what a command did, as the text the model reads.

Why the uid bookkeeping: as root every sandbox runs as a fresh uid of its own, and the folder it
is given becomes that uid's, but files keep their owner. So what the workspace tools wrote (as
root) is handed to the sandbox when it is made - otherwise ``echo >> game.js`` or a build writing
into a folder the tools made would fail - and so is what an earlier sandbox of the same workspace
made (after ``close()`` a new one has a new uid). Files that were in the folder before keep their
owner: the commands may read them, not change them.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Any

from .. import prompts
from . import safe_path

OUTPUT_BUDGET = 7000  # bytes of output in one observation, both streams together


class Commands:
    """Runs ``/bin/sh -c`` commands for one workspace in one lazily made sandbox."""

    def __init__(self, root: Path, kind: str, limits: Any, text: dict[str, str]):
        self.root, self.kind, self.limits, self.text = root, kind, limits, text
        self.sandbox: Any = None
        #: the uid the sandbox runs as, once there is one (``None``: none, or not root)
        self.owner: int | None = None
        self.to_give: list[str] = []  # paths the tools made before the sandbox existed
        self._old_uids: set[int] = set()
        self._lock: tuple[Any, Any] = (None, None)

    def made(self, path: str) -> None:
        """Told of each file or folder the tools make, to hand it to the next sandbox."""
        if self.owner is None and os.geteuid() == 0:
            self.to_give.append(path)

    async def run(self, command: str, timeout: float) -> str:
        return (await self.status(command, timeout))[1]

    async def status(self, command: str, timeout: float) -> tuple[int | None, str]:
        """``(exit status, what run returns)``; the status is None when the command timed out
        or the runner failed."""
        async with self._command_lock():
            sb = self.sandbox or self._new_sandbox()
            code = f"{_shell_source()}\ntao_sh({command!r}, {float(timeout)!r}, {OUTPUT_BUDGET})"
            res = await sb.execute(code, timeout + 15)  # the runner's own clock comes first
        status = None
        if res.has_final_answer and not res.final_answer[1]:
            status = int(res.final_answer[0])
        return status, self.describe(res, timeout)

    async def close(self) -> None:
        sb, self.sandbox = self.sandbox, None
        if sb is not None:
            if sb.uid is not None:
                self._old_uids.add(sb.uid)
            self.owner = None
            await sb.close()

    @property
    def quiet_success(self) -> str:
        """What ``describe`` says of a command that printed nothing and exited 0."""
        return prompts.render(self.text["exit_status"], code="0")

    def describe(self, res: Any, timeout: float) -> str:
        """Output (head and tail), ``[stderr]``, then the exit status or the timeout, then what
        the sandbox says about limits the command ran into."""
        parts = []
        if res.has_final_answer:
            code, timed_out, out, err = res.final_answer
            parts = [self._joined(out), self._joined(err)]
            if parts[1]:
                parts[1] = f"{self.text['stderr']}\n{parts[1]}"
        if res.error:  # the runner itself failed, e.g. no process could be started
            parts.append(res.error.rstrip("\n")[-1500:])
        if res.has_final_answer:
            key, value = ("timed_out", f"{timeout:g}") if timed_out else ("exit_status", str(code))
            parts.append(prompts.render(self.text[key], timeout=value, code=value))
        elif res.killed_reason:
            parts.append(f"[{res.killed_reason}]")
        parts.extend(f"[{note}]" for note in res.notes)
        return "\n".join(p for p in parts if p) or self.text["no_output"]

    def _joined(self, kept: list[Any]) -> str:
        """One stream's head and tail from the runner, the gap between them said in bytes."""
        head, tail, gap = kept
        if not gap:
            return (head + tail).rstrip("\n")
        note = prompts.render(self.text["cut_middle"], bytes=str(gap))
        return f"{head}\n{note}\n{tail.rstrip()}"

    def _command_lock(self) -> Any:
        """One command at a time (a turn may hold several calls), with a lock of this loop."""
        import asyncio

        loop = asyncio.get_running_loop()
        if self._lock[0] is not loop:
            self._lock = (loop, asyncio.Lock())
        return self._lock[1]

    def _new_sandbox(self) -> Any:
        from ..sandbox import get_sandbox

        sb = get_sandbox(self.kind, workspace=self.root, limits=self.limits)
        if sb.uid is not None:
            safe_path.give(str(self.root), self.to_give, sb.uid, self._old_uids)
            self.to_give, self.owner = [], sb.uid
        self.sandbox = sb
        return sb


@functools.cache
def _shell_source() -> str:
    return (Path(__file__).parent / "_shell.py").read_text(encoding="utf-8")


def chosen_backend(kind: str | None) -> str:
    """The backend ``get_sandbox`` would use, checked now: a user's error is raised at once."""
    from ..sandbox import KINDS, SandboxUnavailable, backend_problem, unavailable_message

    chosen = kind or os.environ.get("TAO_SANDBOX") or "bwrap"
    if chosen not in KINDS:
        raise ValueError(f"unknown sandbox {chosen!r}; choose one of {', '.join(KINDS)}, or "
                         "sandbox=False for the file tools alone")
    problem = backend_problem(chosen)
    if problem is not None:
        raise SandboxUnavailable(unavailable_message(chosen, problem) +
                                 " Workspace(..., sandbox=False) gives the file tools alone.")
    return chosen
