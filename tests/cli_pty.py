"""``tao`` in a real terminal: a child process on a pty (pexpect), its model a ScriptedModel.

``launch(script, args)`` starts ``python -c LAUNCHER tao-args...``: the launcher patches
``tao.cli.resolve_model`` the way the CliRunner tests do, so that ``--model auto`` (and any spec
starting with ``scripted``) gets the model ``script`` builds - Python source run in the child,
with ``ScriptedModel``, ``tool_call``, ``Paced`` and ``Sleep`` in scope, that sets ``model`` -
and any other spec goes to the real ``resolve_model`` (an unknown one is its error). ``Term``
reads what the terminal shows with the escape sequences taken out, so a test waits for text the
way a user would read it.
"""

from __future__ import annotations

import os
import re
import sys
import time
from pathlib import Path

import pytest

pexpect = pytest.importorskip("pexpect")

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent

LAUNCHER = r"""
import asyncio, sys
import tao.cli as cli
from tao import ScriptedModel, tool_call
from tao.models.base import ModelResponse
from tao.models.resolve import resolve_model as real_resolve


class Sleep:
    '''A reply that streams ``text`` and then hangs for ``seconds`` (a slow model).'''

    def __init__(self, text, seconds):
        self.text, self.seconds = text, seconds


class Paced(ScriptedModel):
    '''A ScriptedModel whose ``Sleep`` replies stream their text, then wait: asyncio.sleep, so a
    Ctrl-C (the run's task cancelled) stops them the way it stops a real endpoint or the
    embedded model's thread.'''

    async def stream(self, messages, **kw):
        reply = self.replies[self._next] if self._next < len(self.replies) else None
        if isinstance(reply, Sleep):
            self._next += 1
            self.calls.append(list(messages))
            yield reply.text
            await asyncio.sleep(reply.seconds)
            raise RuntimeError("the slow reply was not interrupted")
        async for chunk in super().stream(messages, **kw):
            yield chunk


namespace = dict(ScriptedModel=ScriptedModel, Paced=Paced, Sleep=Sleep, tool_call=tool_call)
exec(sys.argv.pop(1), namespace)
models = [namespace["model"]]


def resolve(spec="auto", timeout=None):
    if spec == "auto" or spec.startswith("scripted"):
        return models[0]
    return real_resolve(spec, timeout=timeout)


cli.resolve_model = resolve
sys.argv[0] = "tao"
cli.main()
"""

_ESCAPES = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[()][0-9A-Za-z]|\x1b[=>78]")


def clean(raw: str) -> str:
    """What a reader sees, near enough: escape sequences and carriage returns out."""
    return _ESCAPES.sub("", raw).replace("\r", "")


class Term:
    """A ``tao`` child on a pty. ``expect(text)`` waits until ``text`` appears after what the
    previous expect found; it fails with the screen so far."""

    def __init__(self, child):
        self.child = child
        self.raw = ""
        self.pos = 0

    def _read(self, wait: float) -> bool:
        try:
            self.raw += self.child.read_nonblocking(65536, timeout=wait)
            return True
        except pexpect.TIMEOUT:
            return False
        except pexpect.EOF:
            return False

    @property
    def screen(self) -> str:
        return clean(self.raw)

    def expect(self, text: str, timeout: float = 20) -> float:
        """Wait for ``text``; returns the time it was seen (``time.monotonic()``)."""
        deadline = time.monotonic() + timeout
        while True:
            found = self.screen.find(text, self.pos)
            if found >= 0:
                self.pos = found + len(text)
                return time.monotonic()
            if time.monotonic() > deadline or (not self.child.isalive() and not self._read(0.2)):
                raise AssertionError(f"{text!r} did not appear; the terminal shows:\n"
                                     f"{self.screen[-3000:]}")
            self._read(0.1)

    def prompt(self) -> None:
        """Wait for the ``> `` prompt, and a moment more: a control key typed before readline
        has put the terminal in raw mode is read by the kernel's line discipline instead (a
        Ctrl-D there is lost), which no user types fast enough to hit."""
        self.expect("> ")
        time.sleep(0.3)

    def rest(self) -> str:
        """What is shown after the last expect."""
        return self.screen[self.pos:]

    def send(self, text: str) -> None:
        self.child.send(text)

    def sendline(self, text: str) -> None:
        self.child.sendline(text)

    def interrupt(self) -> None:
        self.child.sendintr()

    def wait_exit(self, timeout: float = 20) -> int:
        """The exit status once the child has ended (reading what it still prints)."""
        deadline = time.monotonic() + timeout
        while self.child.isalive():
            if time.monotonic() > deadline:
                self.child.kill(9)
                raise AssertionError(f"tao did not exit; the terminal shows:\n{self.screen[-3000:]}")
            self._read(0.1)
        while self._read(0.05):
            pass
        self.child.close()
        return self.child.exitstatus if self.child.exitstatus is not None else -self.child.signalstatus


def launch(script: str, args: list[str], *, cwd: Path, env: dict[str, str] | None = None,
           lang: str = "en_US.UTF-8") -> Term:
    """``tao ARGS`` on a 120x40 pty in ``cwd``, its model built by ``script``; ``lang`` is the
    locale (LANG), ``env`` more variables (TAO_DATA_DIR is ``cwd/data`` unless given)."""
    base = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(cwd), "TERM": "xterm",
            "LANG": lang, "TAO_DATA_DIR": str(cwd / "data"), "PYTHONPATH": os.pathsep.join(sys.path)}
    base.update(env or {})
    child = pexpect.spawn(sys.executable, ["-c", LAUNCHER, script, *args], cwd=str(cwd),
                          env=base, encoding="utf-8", codec_errors="replace",
                          dimensions=(40, 120))
    return Term(child)
